"""Charts of measured runs (``stoker.measured/1``): the step ledger over time, accelerator
utilization over time, loader and staging throughput over time, checkpoint blocking and storage
throughput; the plan's figure beside each where a plan was given."""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING

from ..measure.measured import Measured, Series
from ..units import format_rate
from ._figure import MEASURED, PHASE_COLOURS, PLAN, Chart, duration, figure, pct

if TYPE_CHECKING:
    from ..plan import PlanJson

_PHASES = ("compute", "copy", "exposed_comm", "data", "checkpoint", "other")
_LINE_COLOURS = (MEASURED, "#3d9970", "#8e6bb0", "#d1495b", "#5f6caf")


def _clean(s: Series) -> tuple[list[float], list[float]]:
    pairs = [(t, v) for t, v in zip(s.t_s, s.values, strict=True) if math.isfinite(v)]
    return [t for t, _ in pairs], [v for _, v in pairs]


def ledger_over_time(m: Measured, index: int) -> Chart | None:
    """One ledger's step split over the run, as stacked shares."""
    shares = {ph: m.series[f"{ph}_share"] for ph in _PHASES if f"{ph}_share" in m.series}
    if not shares or max(len(_clean(s)[0]) for s in shares.values()) < 2:
        return None  # one window is no line over time; the step split shows it
    fig = figure(6.4, 2.8)
    ax = fig.axes[0]
    t = next(iter(shares.values())).t_s
    ys = [[v * 100 if math.isfinite(v) else 0.0 for v in shares[ph].values] for ph in shares]
    ax.stackplot(
        t,
        ys,
        colors=[PHASE_COLOURS[ph] for ph in shares],
        labels=[ph.replace("_", " ") for ph in shares],
    )
    ax.set_ylim(0, 100)
    ax.set_xlabel("time into the run (s)")
    ax.set_ylabel("share of step time (%)")
    fig.legend(loc="upper center", ncols=6, frameon=False, fontsize=8)
    data_t, data_v = _clean(shares["data"]) if "data" in shares else ([], [])
    mean = m.summary.get("data_share")
    text = f"{m.name}: {m.summary.get('steps', '?')} steps"
    if m.summary.get("step_mean_s"):
        text += f" of {duration(m.summary['step_mean_s'])} on average"
    if isinstance(mean, int | float):
        text += f"; the loop waited on data {pct(mean, 1)} of its time"
    if data_v:
        worst = max(range(len(data_v)), key=data_v.__getitem__)
        text += f", most ({pct(data_v[worst])}) around {data_t[worst]:.0f} s"
    return Chart(f"ledger-{index}", f"Step ledger over time: {m.name}", text + ".", fig)


def utilization(records: list[Measured], plan: PlanJson | None) -> Chart | None:
    """Accelerator utilization (compute's share of each step) over time, per run."""
    lines = []
    for m in records:
        s = m.series.get("utilization") or m.series.get("compute_share")
        if s is not None and _clean(s)[0]:
            lines.append((m, _clean(s)))
    if not lines:
        return None
    fig = figure(6.4, 2.8)
    ax = fig.axes[0]
    for i, (m, (t, v)) in enumerate(lines):
        ax.plot(
            t,
            [x * 100 for x in v],
            color=_LINE_COLOURS[i % len(_LINE_COLOURS)],
            label=f"{m.name} ({m.source})",
            marker="." if len(t) < 30 else None,
        )
    planned = ((plan or {}).get("step") or {}).get("gpu_utilization")
    if isinstance(planned, int | float):
        ax.axhline(planned * 100, color=PLAN, linestyle="--", label="the plan")
    ax.set_ylim(0, 105)
    ax.set_xlabel("time into the run (s)")
    ax.set_ylabel("accelerator utilization (%)")
    ax.legend(loc="lower right", frameon=False, fontsize=8)
    parts = []
    for m, (t, v) in lines:
        low = min(range(len(v)), key=v.__getitem__)
        parts.append(
            f"{m.name}: mean {pct(statistics.fmean(v))}, lowest {pct(v[low])} at {t[low]:.0f} s"
        )
    if isinstance(planned, int | float):
        parts.append(f"the plan expects {pct(planned)}")
    return Chart("utilization", "Accelerator utilization over time", "; ".join(parts) + ".", fig)


def throughput(records: list[Measured], plan: PlanJson | None) -> Chart | None:
    """Loader and staging throughput over time; the plan's need per VM as a dashed line."""
    lines = [
        (m, _clean(m.series["throughput_bps"]))
        for m in records
        if "throughput_bps" in m.series and _clean(m.series["throughput_bps"])[0]
    ]
    if not lines:
        return None
    fig = figure(6.4, 2.8)
    ax = fig.axes[0]
    for i, (m, (t, v)) in enumerate(lines):
        ax.plot(
            t,
            [x / 1e6 for x in v],
            color=_LINE_COLOURS[i % len(_LINE_COLOURS)],
            label=f"{m.name} ({m.source})",
            marker="." if len(t) < 30 else None,
        )
    need = _need_per_vm(plan)
    if need:
        ax.axhline(need / 1e6, color=PLAN, linestyle="--", label="the plan's need per VM")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time into the run (s)")
    ax.set_ylabel("throughput (MB/s)")
    ax.legend(loc="lower right", frameon=False, fontsize=8)
    parts = [
        f"{m.name} ({m.source}) moved a median {statistics.median(v) / 1e6:,.0f} MB/s "
        f"(lowest {min(v) / 1e6:,.0f})"
        for m, (_, v) in lines
    ]
    if need:
        parts.append(f"the plan needs {format_rate(need)} per VM")
    return Chart(
        "throughput", "Loader and staging throughput over time", "; ".join(parts) + ".", fig
    )


def _need_per_vm(plan: PlanJson | None) -> float | None:
    data, nodes = (plan or {}).get("data") or {}, (plan or {}).get("nodes")
    need = data.get("required_bps")
    return need / nodes if isinstance(need, int | float) and nodes else None


def checkpoint_blocking(records: list[Measured], plan: PlanJson | None) -> Chart | None:
    """How long each save held the training loop; the plan's blocking time beside it."""
    runs = [
        (m, _clean(m.series["blocking_s"]))
        for m in records
        if "blocking_s" in m.series and _clean(m.series["blocking_s"])[0]
    ]
    if not runs:
        return None
    fig = figure(6.4, 2.8)
    ax = fig.axes[0]
    for i, (m, (t, v)) in enumerate(runs):
        ax.plot(
            t,
            [x * 1e3 for x in v],
            color=_LINE_COLOURS[i % len(_LINE_COLOURS)],
            marker="o",
            label=f"{m.name}: each save",
        )
    planned = ((plan or {}).get("checkpoints") or {}).get("blocking_s")
    if isinstance(planned, int | float):
        ax.axhline(planned * 1e3, color=PLAN, linestyle="--", label="the plan's save")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time into the run (s)")
    ax.set_ylabel("training loop held (ms)")
    ax.legend(loc="upper right", frameon=False, fontsize=8)
    parts = [
        f"{m.name}: a save held the loop {duration(statistics.median(v))} (median of "
        f"{len(v)}, worst {duration(max(v))})"
        for m, (_, v) in runs
    ]
    if isinstance(planned, int | float):
        parts.append(f"the plan's save blocks {duration(planned)} at its scale")
    return Chart("checkpoint-blocking", "Checkpoint blocking", "; ".join(parts) + ".", fig)


def storage(records: list[Measured], plan: PlanJson | None) -> Chart | None:
    """Each storage test's throughput, as ``stoker bench storage`` measured it."""
    rows = [
        (f"{m.name}: {k.removesuffix('_bps').replace('_', ' ')}", v)
        for m in records
        if m.source == "storage"
        for k, v in m.summary.items()
        if k.endswith("_bps") and isinstance(v, int | float)
    ]
    if not rows:
        return None
    fig = figure(6.4, 0.9 + 0.3 * len(rows))
    ax = fig.axes[0]
    for y, (_, v) in enumerate(rows):
        ax.barh(y, v / 1e6, color=MEASURED)
        ax.text(v / 1e6, y, f" {v / 1e6:,.0f}", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [r for r, _ in rows])
    ax.invert_yaxis()
    ax.set_xlabel("throughput (MB/s)")
    ax.margins(x=0.2)
    best = max(rows, key=lambda r: r[1])
    text = f"Fastest: {best[0]} at {best[1] / 1e6:,.0f} MB/s"
    need = _need_per_vm(plan)
    if need:
        text += f"; the plan needs {format_rate(need)} per VM"
    return Chart("storage", "Storage throughput measured", text + ".", fig)


def charts(records: list[Measured], plan: PlanJson | None) -> list[Chart]:
    made = [ledger_over_time(m, i) for i, m in enumerate(records) if m.source == "ledger"]
    made += [
        utilization(records, plan),
        throughput(records, plan),
        checkpoint_blocking(records, plan),
        storage(records, plan),
    ]
    return [c for c in made if c is not None]
