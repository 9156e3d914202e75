"""Show a Plan: a rich terminal report, Markdown, and two plans side by side.

The JSON form is ``Plan.to_dict()``; these are for people.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..units import format_rate as fr
from ._format import duration as fd
from ._format import gpus, md_cell, usd
from ._render_cache import cache_block, cache_markdown
from ._render_links import links_markdown, links_table
from .result import CostPlan, Plan


def stall_unknown(plan: Plan) -> bool:
    """The data tier has no published figure: the step is a lower bound, GPU busy an upper one."""
    return plan.step is not None and plan.step.data_stall_s is None


def wall_is_lower_bound(plan: Plan) -> bool:
    """With the stall unknown, the wall clock (and what it costs) is at least the plan's, unless
    run.length caps the run: then the length is known and the steps done are at most the plan's."""
    run = plan.run
    capped = run is not None and run.steps_asked is not None and run.steps < run.steps_asked
    return stall_unknown(plan) and not capped


def headline(plan: Plan) -> list[tuple[str, str]]:
    """The few numbers a reader wants first, as (label, value)."""
    rows = [
        ("job", f"{plan.name} ({plan.kind})"),
        ("cluster", f"{plan.nodes} x {plan.vm_size} = {gpus(plan.gpus)}, {plan.region}"),
    ]
    if plan.step and plan.run:
        rows += [
            (
                "step",
                f"{fd(plan.step.total_s)}; GPU busy {100 * plan.step.gpu_utilization:.1f} %"
                + (" (at most: data stall unknown)" if plan.step.data_stall_s is None else ""),
            ),
            (
                "run",
                f"{plan.run.steps:,.0f} steps in "
                + ("at least " if wall_is_lower_bound(plan) else "")
                + f"{fd(plan.run.wall_s)} wall clock; "
                f"{100 * plan.run.effective_training_fraction:.1f} % useful",
            ),
        ]
    elif plan.run:
        rows.append(("run", f"{fd(plan.run.wall_s)} wall clock"))
    if plan.data and plan.step:
        d = plan.data
        rows.append(
            (
                "data",
                f"{d.chosen.name}, {fr(d.required_bps)} for {100 * d.au_target:.0f} % "
                "accelerator utilization (workload.au_target)"
                + ("" if d.au is None else f"; AU {100 * d.au:.1f} %"),
            )
        )
    cost = plan.cost
    total = (
        (
            f"at least {usd(cost.total_usd)} (the data stall is unknown)"
            if wall_is_lower_bound(plan)
            else usd(cost.total_usd)
        )
        if cost.total_usd is not None
        else (f"at least ${cost.known_total_usd:,.0f} (unknown: {', '.join(cost.unknown)})")
    )
    rows.append(("cost", total))
    if cost.idle_gpu_usd is not None:
        rows.append(("idle GPU time", usd(cost.idle_gpu_usd)))
    return rows


def _stall(seconds: float | None) -> str:
    """A data stall; unknown when the tier has no published figure (never 0 s)."""
    return "unknown" if seconds is None else fd(seconds)


def _split_table(plan: Plan) -> Table | None:
    if not plan.step:
        return None
    st = plan.step
    table = Table(title="Where a step's time goes", title_justify="left")
    for col in ("compute", "exposed comm", "data stall", "checkpoint", "step", "GPU busy"):
        table.add_column(col, justify="right")
    table.add_row(
        fd(st.compute_s),
        fd(st.exposed_comm_s),
        _stall(st.data_stall_s),
        fd(st.checkpoint_s),
        fd(st.total_s),
        f"{100 * st.gpu_utilization:.1f} %",
    )
    return table


def _recs_block(plan: Plan) -> Panel:
    text = Text()
    for i, rec in enumerate(plan.recommendations):
        if i:
            text.append("\n\n")
        text.append(rec.need, style="bold")
        text.append(f": {rec.choice}")
        if rec.size != "-":
            text.append(f" ({rec.size})", style="cyan")
        text.append(f"\n  {rec.reason}", style="dim")
    return Panel(text, title="Recommendations", title_align="left")


def _cost_table(plan: Plan) -> Table:
    table = Table(title=f"Cost ({plan.cost.currency})", title_justify="left")
    for col, justify in (("item", "left"), ("hours", "right"), ("cost", "right"), ("note", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for row in cost_rows(plan):
        table.add_row(*row)
    return table


def cost_rows(plan: Plan) -> list[tuple[str, str, str, str]]:
    """(item, hours, cost, note) rows, the fast tier's idle weekend last when it has a price."""
    rows = [(i.item, f"{i.hours:,.0f}", usd(i.usd), i.note) for i in plan.cost.items]
    if plan.cost.idle_storage_weekend_usd is not None:
        rows.append(
            (
                "fast tier left up unused (e.g. over a weekend)",
                f"{plan.cost.idle_storage_hours:,.0f}",
                usd(plan.cost.idle_storage_weekend_usd),
                "not included in the total",
            )
        )
    return rows + idle_and_purchase_rows(plan.cost)


def idle_and_purchase_rows(cost: CostPlan) -> list[tuple[str, str, str, str]]:
    """The idle hour and day, what teardown leaves billed, and the ways to pay: rows below the
    bill, none of them in its total."""
    rows = []
    if cost.idle_meters:
        known = sum(i.usd or 0.0 for i in cost.idle_meters)
        unknown = [i.item for i in cost.idle_meters if i.usd is None]
        cents = [f"{i.item} {'unknown' if i.usd is None else f'${i.usd:,.2f}'}/h ({i.note})"
                 for i in cost.idle_meters]  # fmt: skip
        per_hour = cost.idle_per_hour_usd
        day = usd(per_hour * 24) if per_hour is not None else f">= {usd(known * 24)}"
        rows.append(
            (
                "idle day, GPU VMs deallocated",
                "24",
                day,
                "; ".join(cents) + (f"; unknown: {', '.join(unknown)}" if unknown else ""),
            )
        )
        after = cost.after_teardown_per_hour_usd
        rows.append(
            (
                "a day after teardown (Lustre deleted)",
                "24",
                usd(None if after is None else after * 24),
                "OS disks, Blob and network stay billed",
            )
        )
    for option in cost.purchase:
        best = " (cheapest)" if option.item == cost.cheapest_purchase else ""
        rows.append((f"buy: {option.item}{best}", f"{option.hours:,.0f}", usd(option.usd),
                     option.note))  # fmt: skip
    if cost.right_size:
        rows.append(("right-size", "", usd(cost.right_size_saving_usd), cost.right_size))
    return rows


def rich_report(plan: Plan) -> Group:
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    for label, value in headline(plan):
        head.add_row(label, escape(value))  # a job name may hold '[': not markup
    parts: list = [Panel(head, title="stoker plan", expand=False)]
    split = _split_table(plan)
    if split:
        parts.append(split)
    links = links_table(plan)
    if links:
        parts.append(links)
    if plan.inference and plan.inference.cache:
        parts.append(cache_block(plan.inference.cache))
    parts += [_recs_block(plan), _cost_table(plan)]
    if plan.calibration:
        parts.append(_calibration_table(plan))
    if plan.warnings:
        parts.append(
            Panel(
                Text("\n".join(f"! {w}" for w in plan.warnings), style="yellow"),
                title="What to change",
                expand=False,
            )
        )
    parts.append(Text(f"catalog as of {plan.catalog_as_of}; --json for every figure", style="dim"))
    return Group(*parts)


def calibration_rows(plan: Plan) -> list[tuple[str, str, str, str]]:
    """(figure, catalog, measured, measured / catalog) for each figure a measurement replaced."""
    rows = []
    for c in plan.calibration:
        ratio = f"{c.measured_bps / c.catalog_bps:.2f}x" if c.catalog_bps else "-"
        catalog = fr(c.catalog_bps) if c.catalog_bps else "none published"
        rows.append((c.figure, catalog, fr(c.measured_bps), ratio))
    return rows


def _calibration_table(plan: Plan) -> Table:
    table = Table(title="Measured figures used instead of the catalog's", title_justify="left")
    for name in ("figure", "catalog", "measured", "measured / catalog"):
        table.add_column(name)
    for row in calibration_rows(plan):
        table.add_row(*row)
    return table


def markdown(plan: Plan) -> str:
    lines = [f"# stoker plan: {plan.name}", ""]
    lines += [f"- **{label}**: {value}" for label, value in headline(plan)]
    if plan.step:
        st = plan.step
        lines += [
            "",
            "## Where a step's time goes",
            "",
            "| compute | exposed comm | data stall | checkpoint | step | GPU busy |",
            "|---:|---:|---:|---:|---:|---:|",
            f"| {fd(st.compute_s)} | {fd(st.exposed_comm_s)} | {_stall(st.data_stall_s)} | "
            f"{fd(st.checkpoint_s)} | {fd(st.total_s)} | {100 * st.gpu_utilization:.1f} % |",
        ]
    lines += links_markdown(plan)
    if plan.inference and plan.inference.cache:
        lines += cache_markdown(plan.inference.cache)
    lines += ["", "## Recommendations", "", "| need | choice | size | why |", "|---|---|---|---|"]
    lines += [
        "| " + " | ".join(md_cell(c) for c in (r.need, r.choice, r.size, r.reason)) + " |"
        for r in plan.recommendations
    ]
    lines += [
        "",
        f"## Cost ({plan.cost.currency})",
        "",
        "| item | hours | cost | note |",
        "|---|---:|---:|---|",
    ]
    lines += ["| " + " | ".join(map(md_cell, row)) + " |" for row in cost_rows(plan)]
    if plan.calibration:
        lines += [
            "",
            "## Measured instead of the catalog",
            "",
            "| figure | catalog | measured | ratio |",
        ]
        lines += ["|---|---:|---:|---:|"] + [
            "| " + " | ".join(r) + " |" for r in calibration_rows(plan)
        ]
    if plan.warnings:
        lines += ["", "## What to change", ""] + [f"- {w}" for w in plan.warnings]
    lines += ["", f"_Catalog as of {plan.catalog_as_of}._", ""]
    return "\n".join(lines)


def _pct_or_dash(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _at_least(bound: bool, text: str) -> str:
    return f">= {text}" if bound and text not in ("-", "unknown") else text


def _at_most(bound: bool, text: str) -> str:
    return f"<= {text}" if bound and text != "-" else text


# With a data stall unknown, each figure it feeds is marked as the bound it is (>=, <=).
COMPARE_ROWS: list[tuple[str, Callable[[Plan], str]]] = [
    ("cluster", lambda p: f"{p.nodes} x {p.vm_size}"),
    ("GPUs", lambda p: f"{p.gpus:,}"),
    ("step", lambda p: _at_least(stall_unknown(p), fd(p.step.total_s)) if p.step else "-"),
    (
        "GPU busy",
        lambda p: _at_most(
            stall_unknown(p), _pct_or_dash(p.step.gpu_utilization if p.step else None)
        ),
    ),
    ("exposed comm", lambda p: fd(p.step.exposed_comm_s) if p.step else "-"),
    ("data stall", lambda p: _stall(p.step.data_stall_s) if p.step else "-"),
    ("data tier", lambda p: p.data.chosen.name if p.data else "-"),
    ("checkpoint every", lambda p: fd(p.checkpoints.interval_s) if p.checkpoints else "-"),
    (
        "useful share of wall clock",
        lambda p: _at_most(
            stall_unknown(p), _pct_or_dash(p.run.effective_training_fraction if p.run else None)
        ),
    ),
    ("wall clock", lambda p: _at_least(wall_is_lower_bound(p), fd(p.run.wall_s)) if p.run else "-"),
    ("GPU VM hours", lambda p: _at_least(wall_is_lower_bound(p), f"{p.cost.gpu_vm_hours:,.0f}")),
    (
        "cost",
        lambda p: (
            _at_least(wall_is_lower_bound(p), usd(p.cost.total_usd))
            if p.cost.total_usd is not None
            else f">= ${p.cost.known_total_usd:,.0f}"
        ),
    ),
    ("idle GPU cost", lambda p: _at_least(wall_is_lower_bound(p), usd(p.cost.idle_gpu_usd))),
    ("warnings", lambda p: str(len(p.warnings))),
]


def compare_rows(plans: list[Plan]) -> list[list[str]]:
    return [[label, *(fn(p) for p in plans)] for label, fn in COMPARE_ROWS]


def rich_compare(plans: list[Plan]) -> Table:
    table = Table(title="stoker plan --compare", title_justify="left")
    table.add_column("")
    for plan in plans:
        table.add_column(escape(plan.name), justify="right")
    for row in compare_rows(plans):
        table.add_row(*row)
    return table


def markdown_compare(plans: list[Plan]) -> str:
    head = "| | " + " | ".join(md_cell(p.name) for p in plans) + " |"
    rule = "|---|" + "---:|" * len(plans)
    body = ["| " + " | ".join(map(md_cell, row)) + " |" for row in compare_rows(plans)]
    return "\n".join([head, rule, *body, ""])
