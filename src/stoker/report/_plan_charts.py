"""The plan's charts: where a step's time goes (beside measured ledgers), the tier options' stall
against cost, goodput against checkpoint interval, and the bill. Each reads the plan's JSON
(``stoker.plan/1``, docs/plan-json.md) by key and tolerates keys it does not know."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from matplotlib.ticker import MaxNLocator, NullLocator

from ..measure.measured import Measured
from ..plan import renewal
from ._figure import MEASURED, PHASE_COLOURS, PLAN, Chart, duration, figure, money, pct

if TYPE_CHECKING:
    from ..plan.plan_json import CheckpointsJson, DataJson, PlanJson, TierChoiceJson

_PLAN_PHASES = (  # plan key -> ledger phase
    ("compute_s", "compute"),
    ("exposed_comm_s", "exposed_comm"),
    ("data_stall_s", "data"),
    ("checkpoint_s", "checkpoint"),
)
_LEDGER_PHASES = ("compute", "copy", "exposed_comm", "data", "checkpoint", "other")


def step_split(plan: PlanJson | None, ledgers: list[Measured]) -> Chart | None:
    """Shares of one step per phase: the plan's bar, then each measured ledger's."""
    step = (plan or {}).get("step")
    rows: list[tuple[str, dict[str, float]]] = []
    if step and step.get("total_s"):
        total = step["total_s"]
        rows.append(
            (
                f"plan ({duration(total)} a step)",
                {ph: (_figure(step, k) or 0.0) / total for k, ph in _PLAN_PHASES},
            )
        )
    for m in ledgers:
        shares = {ph: float(m.summary.get(f"{ph}_share") or 0.0) for ph in _LEDGER_PHASES}
        mean = m.summary.get("step_mean_s")
        label = f"measured: {m.name}" + (f" ({duration(mean)} a step)" if mean else "")
        rows.append((label, shares))
    if not rows:
        return None
    fig = figure(6.4, 0.9 + 0.45 * len(rows))
    ax = fig.axes[0]
    for y, (_, shares) in enumerate(rows):
        left = 0.0
        for ph in _LEDGER_PHASES:
            width = shares.get(ph, 0.0) * 100
            if width <= 0:
                continue
            ax.barh(
                y,
                width,
                left=left,
                color=PHASE_COLOURS[ph],
                edgecolor="white",
                label=ph.replace("_", " "),
            )
            if width >= 6:
                ax.text(
                    left + width / 2,
                    y,
                    f"{width:.0f}",
                    ha="center",
                    va="center",
                    color="white",
                    fontsize=8,
                )
            left += width
    ax.set_yticks(range(len(rows)), [label for label, _ in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of the step (%)")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    fig.legend(
        unique.values(), unique.keys(), loc="upper center", ncols=6, frameon=False, fontsize=8
    )
    return Chart("step-split", "Where a step's time goes", _step_reading(plan, rows), fig)


def _step_reading(plan: PlanJson | None, rows: list[tuple[str, dict[str, float]]]) -> str:
    parts = []
    step = (plan or {}).get("step")
    if step and step.get("total_s"):
        shares = rows[0][1]
        data = (plan or {}).get("data") or {}
        chosen = (data.get("chosen") or {}).get("name", "the chosen tier")
        parts.append(
            f"Planned: the GPU computes {pct(shares['compute'])} of each step and "
            f"waits {pct(shares['data'], 1)} on data from {chosen}, "
            f"{pct(shares['exposed_comm'], 1)} on exposed communication and "
            f"{pct(shares['checkpoint'], 1)} on checkpoints"
        )
        if shares["data"] > 0:
            fix = _cheapest_without_stall(data)
            if fix:
                parts[-1] += f"; {fix['name']} removes the data wait"
        rows = rows[1:]
    for label, shares in rows:
        parts.append(
            f"{label.removeprefix('measured: ')}: compute {pct(shares['compute'])}, "
            f"data {pct(shares['data'], 1)}, checkpoint {pct(shares['checkpoint'], 1)}"
        )
    return ". ".join(parts) + "."


def _stall(o: TierChoiceJson) -> float:
    """A tier's stall per step (those drawn have one: the others are named, not drawn)."""
    return o.get("stall_per_step_s") or 0.0


def _figure(doc: Mapping[str, object], key: str) -> float | None:
    value = doc.get(key)
    return value if isinstance(value, int | float) else None


def _cheapest_without_stall(data: DataJson) -> TierChoiceJson | None:
    options = [
        o
        for o in data.get("options") or []
        if o.get("fits")
        and o.get("stall_per_step_s") == 0
        and o.get("price_per_hour_usd") is not None
    ]
    return min(options, key=lambda o: o.get("price_per_hour_usd") or 0.0, default=None)


def tier_options(plan: PlanJson) -> Chart | None:
    """Each storage tier the plan weighed: its stall per step beside its price per hour (two
    panels on one row per tier, so tiers with no public price still show their stall)."""
    data = plan.get("data") or {}
    options = [o for o in data.get("options") or [] if o.get("stall_per_step_s") is not None]
    if not options:
        return None
    chosen = (data.get("chosen") or {}).get("tier")
    stalls = [_stall(o) for o in options]
    scale, unit = (1e3, "ms") if max(stalls) < 1 else (1.0, "s")
    fig = figure(6.4, 0.9 + 0.4 * len(options))
    fig.clear()
    left, right = fig.subplots(1, 2, sharey=True, width_ratios=(3, 2))
    for y, o in enumerate(options):
        colour = MEASURED if o["tier"] == chosen else PLAN
        stall = _stall(o) * scale
        left.barh(y, stall, color=colour, hatch=None if o.get("fits", True) else "//")
        left.text(stall, y, f" {stall:,.3g} {unit}", va="center", fontsize=8)
        price = o.get("price_per_hour_usd")
        if price is None:
            why = "billed as Blob storage" if o["tier"] == "blob" else "no public price"
            right.text(0, y, f" {why}", va="center", fontsize=8, color="#777")
        else:
            right.barh(y, price, color=colour)
            right.text(price, y, f" {money(price)}", va="center", fontsize=8)
    labels = [
        o["tier"]
        + (" (chosen)" if o["tier"] == chosen else "")
        + ("" if o.get("fits", True) else " (does not fit)")
        for o in options
    ]
    left.set_yticks(range(len(options)), labels)
    left.invert_yaxis()
    left.set_xlabel(f"GPU stall per step ({unit})")
    right.set_xlabel("price of the tier (USD per hour)")
    left.set_xlim(0, max(stalls) * scale * 1.4 or 1.0)  # all zero: still an axis from 0
    right.set_xlim(0, max([o.get("price_per_hour_usd") or 0 for o in options]) * 1.5 or 1.0)
    return Chart(
        "tier-options", "Storage tiers: stall against cost", _tier_reading(data, options), fig
    )


def _tier_reading(data: DataJson, options: list[TierChoiceJson]) -> str:
    chosen = data.get("chosen") or {}
    price = chosen.get("price_per_hour_usd")
    text = (
        f"Chosen: {chosen.get('name', chosen.get('tier'))}, stall "
        f"{duration(chosen.get('stall_per_step_s') or 0)} a step"
        + (f" at {money(price)}/h" if price else "")
    )
    others = [o for o in options if o["tier"] != chosen.get("tier")]
    worst = max(others, key=_stall, default=None)
    if worst is not None and _stall(worst) > 0:
        worst_s = duration(_stall(worst))
        text += f"; {worst['tier']} would stall the GPU {worst_s} a step"
    unknown = [o["tier"] for o in data.get("options") or [] if o.get("stall_per_step_s") is None]
    if unknown:
        text += f"; no published rate for {', '.join(unknown)} (not drawn)"
    return text + "."


def in_flight_s(ck: CheckpointsJson) -> float:
    """The work lost while a save is still being written (``L`` in stoker.plan.renewal), which
    the plan's JSON does not carry: the ``L`` at which the plan's own renewal function gives the
    plan's goodput at the plan's interval. Both of its forms are inverted and the one that
    reproduces the goodput kept (the plan uses the first-order form only within 0.5 % of the
    exact one)."""
    c, m, r, t = ck["blocking_s"], ck["job_mtbf_s"], ck["restart_s"], ck["interval_s"]
    g = ck["goodput"]
    candidates = [max(0.0, (1 - g - c / t) * m - t / 2 - r)]  # first order: 1 - C/t - (t/2+L+R)/M
    kept_if_no_loss = g * math.expm1((t + c) / m) * m / t  # exact: e^{-(L+R)/M} from the goodput
    if kept_if_no_loss > 0:
        candidates.append(max(0.0, -m * math.log(kept_if_no_loss) - r))
    return min(candidates, key=lambda lost: abs(renewal(t, c, m, r, lost).goodput - g))


def goodput_curve(plan: PlanJson) -> Chart | None:
    """Goodput against checkpoint interval (the plan's renewal model, right at any MTBF), the
    plan's point and the optimum marked."""
    ck = plan.get("checkpoints") or {}
    need = ("blocking_s", "interval_s", "job_mtbf_s", "restart_s", "goodput", "optimal_interval_s")
    if any(not isinstance(ck.get(k), int | float) for k in need) or ck["job_mtbf_s"] <= 0:
        return None
    if ck["interval_s"] <= 0 or not 0 < ck["goodput"] <= 1:
        return None
    c, m, r, t0 = ck["blocking_s"], ck["job_mtbf_s"], ck["restart_s"], ck["interval_s"]
    lost = in_flight_s(ck)

    def goodput(t: float) -> float:
        return renewal(t, c, m, r, lost).goodput

    opt = ck["optimal_interval_s"]
    lo, hi = min(t0, opt) / 20, max(t0, opt) * 20
    xs = [lo * (hi / lo) ** (i / 199) for i in range(200)]
    fig = figure(6.4, 3.0)
    ax = fig.axes[0]
    ax.plot([x / 60 for x in xs], [goodput(x) * 100 for x in xs], color=PLAN, label="goodput")
    ax.scatter(
        [opt / 60],
        [goodput(opt) * 100],
        marker="D",
        color=PLAN,
        zorder=3,
        label=f"the optimum, {duration(opt)}",
    )
    ax.scatter(
        [t0 / 60],
        [ck["goodput"] * 100],
        s=90,
        color=MEASURED,
        zorder=4,
        label=f"the plan's interval, {duration(t0)}",
    )
    if "safe" in str(ck.get("interval_basis", "")):  # the plan's interval is the floor
        ax.axvspan(
            lo / 60,
            t0 / 60,
            color="#cccccc",
            alpha=0.4,
            label="sooner: the previous save is not yet safe",
        )
    ax.set_xscale("log")
    ax.xaxis.set_minor_locator(NullLocator())  # a log axis's minor labels cost a third here
    ax.xaxis.set_major_formatter(lambda x, _: f"{x:g}")  # 0.1, 1, 10: no mathtext to parse
    ax.set_xlabel("checkpoint interval (minutes, log scale)")
    ax.set_ylabel("goodput (%)")
    best = goodput(opt) * 100
    ax.set_ylim(max(0.0, best - 3 * max(best - ck["goodput"] * 100, 2)), min(100.0, best + 1))
    ax.legend(loc="lower center", frameon=False, fontsize=8)
    reading = (
        f"Checkpointing every {duration(t0)} ({ck.get('interval_basis', '')}) gives "
        f"goodput {pct(ck['goodput'], 1)}; the optimum, {duration(opt)}, gives "
        f"{pct(goodput(opt), 1)}. A save blocks {duration(c)}; the job fails every "
        f"{duration(m)}."
    )
    return Chart("goodput-interval", "Goodput against checkpoint interval", reading, fig)


def bill(plan: PlanJson) -> Chart | None:
    """The bill item by item; an item with no known price is named, not drawn as zero."""
    cost = plan.get("cost") or {}
    items = cost.get("items") or []
    if not items:
        return None
    fig = figure(6.4, 0.9 + 0.4 * len(items))
    ax = fig.axes[0]
    for y, item in enumerate(items):
        usd = item.get("usd")
        if usd is None:
            ax.text(0, y, "  no price in the catalog", va="center", fontsize=8, color="#777")
            continue
        ax.barh(y, usd, color=PLAN)
        ax.text(usd, y, f" {money(usd)}", va="center", fontsize=8)
    ax.set_yticks(range(len(items)), [i.get("item", "?") for i in items])
    ax.invert_yaxis()
    ax.set_xlabel(f"cost of the run ({cost.get('currency', 'USD')})")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=3))
    ax.xaxis.set_major_formatter(lambda x, _: money(x))
    ax.margins(x=0.2)
    known = cost.get("known_total_usd") or 0.0
    total = cost.get("total_usd")
    biggest = max(
        (i for i in items if i.get("usd") is not None),
        key=lambda i: i.get("usd") or 0.0,
        default=None,
    )
    text = (
        f"The run costs {money(total)}"
        if total is not None
        else f"The priced part costs {money(known)} (no price for "
        f"{', '.join(cost.get('unknown') or [])})"
    )
    if biggest and known > 0:
        text += f"; {biggest['item']} is {pct((biggest.get('usd') or 0.0) / known)} of it"
    if idle := cost.get("idle_gpu_usd"):
        text += f"; GPUs not computing cost {money(idle)}"
    return Chart("bill", "The bill by item", text + ".", fig)


def cold_start(plan: PlanJson) -> Chart | None:
    """An inference plan: how long every replica takes to load the model, per source."""
    inf = plan.get("inference") or {}
    starts = {
        k: v for k, v in (inf.get("cold_start_s") or {}).items() if isinstance(v, int | float)
    }
    if not starts:
        return None
    fig = figure(6.4, 0.9 + 0.4 * len(starts))
    ax = fig.axes[0]
    for y, (source, secs) in enumerate(starts.items()):
        ax.barh(y, secs, color=MEASURED if source == inf.get("chosen") else PLAN)
        ax.text(secs, y, f" {duration(secs)}", va="center", fontsize=8)
    ax.set_yticks(
        range(len(starts)), [s + (" (chosen)" if s == inf.get("chosen") else "") for s in starts]
    )
    ax.invert_yaxis()
    ax.set_xlabel("time for every replica to load the model (s)")
    ax.margins(x=0.2)
    chosen = inf.get("chosen")
    text = (
        f"{inf.get('replicas', '?')} replicas load {inf.get('model_bytes', 0) / 1e9:,.0f} GB "
        f"each from {chosen} in {duration(starts.get(chosen or '', 0))}"
    )
    if "nvme" in starts:
        text += f"; a warm restart from the VM's NVMe takes {duration(starts['nvme'])}"
    return Chart("cold-start", "Cold start by model source", text + ".", fig)


def charts(plan: PlanJson, ledgers: list[Measured]) -> list[Chart]:
    made = [
        step_split(plan, ledgers),
        tier_options(plan),
        goodput_curve(plan),
        cold_start(plan),
        bill(plan),
    ]
    return [c for c in made if c is not None]


def finite(x: Any) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)
