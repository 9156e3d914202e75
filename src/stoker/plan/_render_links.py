"""The plan's view of the links a step uses: the bytes each VM sends per step, how long the
links are busy, the job with InfiniBand off, and the what-if of fewer links and SHARP
(plan/bandwidth.py computes them), as a rich table and as Markdown."""

from __future__ import annotations

from rich.table import Table

from ..units import format_bytes as fb
from ..units import format_rate as fr
from ._format import duration as fd
from ._format import md_cell, usd
from .result import Plan


def links_caption(plan: Plan) -> str:
    """What the inter-VM links carry per step, and the job with InfiniBand off; "" if nothing."""
    ic = plan.interconnect
    b, e = (ic.bandwidth, ic.ethernet) if ic else (None, None)
    out = []
    if b:
        out.append(
            f"{b.network} per VM per step: {fb(b.bytes_per_vm)} sent in {fd(b.busy_s)} of a "
            f"{fd(b.step_s)} step: {100 * b.average_use:.0f} % of {fr(b.capacity_bps)} on "
            f"average, {100 * b.peak_use:.0f} % while the exchange runs"
        )
    if e:
        rate = "measured" if e.measured else "line rate: an upper bound"
        out.append(
            f"InfiniBand off (NCCL sockets at {fr(e.busbw_bps)}, {rate}): step {fd(e.step_s)}, "
            f"{e.ratio:.1f}x the step with InfiniBand"
        )
    return "; ".join(out)


def links_rows(plan: Plan) -> list[tuple[str, str, str, str, str]]:
    """(links per VM, SHARP, exposed comm, step, cost) for each what-if row; the plan's marked."""
    b = plan.interconnect.bandwidth if plan.interconnect else None
    return [
        (
            f"{o.links_per_vm}" + (" (plan)" if o.planned else ""),
            "on" if o.sharp else "off",
            fd(o.exposed_s),
            fd(o.step_s),
            usd(o.cost_usd),
        )
        for o in (b.options if b else [])
    ]


_LINKS_COLUMNS = ("IB links per VM", "SHARP", "exposed comm", "step", "cost")


def links_table(plan: Plan) -> Table | None:
    caption = links_caption(plan)
    if not caption:
        return None
    table = Table(title="The links a step uses", title_justify="left", caption=caption)
    table.caption_justify = "left"
    for col in _LINKS_COLUMNS:
        table.add_column(col, justify="right")
    for row in links_rows(plan):
        table.add_row(*row)
    return table


def links_markdown(plan: Plan) -> list[str]:
    caption = links_caption(plan)
    if not caption:
        return []
    lines = ["", "## The links a step uses", "", md_cell(caption)]
    if links_rows(plan):
        lines += ["", "| " + " | ".join(_LINKS_COLUMNS) + " |", "|---:|---|---:|---:|---:|"]
        lines += ["| " + " | ".join(row) + " |" for row in links_rows(plan)]
    return lines
