"""The simulation's charts (``stoker.simulation/1``): the goodput distribution against the
plan's, time lost by cause, and the timeline of events."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from ._figure import MEASURED, PLAN, SIMULATED, Chart, figure, pct

if TYPE_CHECKING:
    from ..simulate import SimulationJson


def _spread(d: Any) -> tuple[float, float, float] | None:
    if not isinstance(d, dict) or not all(
        isinstance(d.get(k), int | float) for k in ("p5", "p50", "p95")
    ):
        return None
    return d["p5"], d["p50"], d["p95"]


def _runs(sim: SimulationJson) -> str:
    return (
        f"{sim.get('runs', '?')} simulated runs of {days(sim)} days on "
        f"{_count(sim.get('gpus'))} GPUs"
    )


def _count(n: Any) -> str:
    return f"{n:,}" if isinstance(n, int | float) else "?"


def days(sim: SimulationJson) -> str:
    d = sim.get("days")
    return f"{d:,.1f}".removesuffix(".0") if isinstance(d, int | float) else "?"


def distribution(sim: SimulationJson) -> Chart | None:
    """Goodput and GPU-busy share across the runs: p5 to p95, the median, and the plan's."""
    rows = [
        (name, s)
        for name, key in (("goodput", "goodput"), ("GPU busy", "gpu_busy"))
        if (s := _spread(sim.get(key))) is not None
    ]
    if not rows:
        return None
    fig = figure(6.4, 0.9 + 0.5 * len(rows))
    ax = fig.axes[0]
    for y, (_, (p5, p50, p95)) in enumerate(rows):
        ax.plot(
            [p5 * 100, p95 * 100],
            [y, y],
            color=SIMULATED,
            linewidth=6,
            alpha=0.5,
            solid_capstyle="butt",
            label="p5 to p95 of the runs" if y == 0 else None,
        )
        ax.scatter(
            [p50 * 100],
            [y],
            color=SIMULATED,
            s=50,
            zorder=3,
            label="median run" if y == 0 else None,
        )
    planned = (sim.get("goodput") or {}).get("plan")
    if isinstance(planned, int | float) and rows[0][0] == "goodput":
        ax.scatter(
            [planned * 100], [0], marker="D", color=PLAN, s=50, zorder=4, label="the plan's goodput"
        )
    ax.set_yticks(range(len(rows)), [n for n, _ in rows])
    ax.invert_yaxis()
    ax.set_xlabel("share of the run's wall-clock time (%)")
    ax.margins(x=0.3, y=0.4)
    fig.legend(loc="upper center", frameon=False, fontsize=8, ncols=3)
    name, (p5, p50, p95) = rows[0]
    text = (
        f"Over {_runs(sim)}, {name} was {pct(p50, 1)} in the median run ({pct(p5, 1)} to "
        f"{pct(p95, 1)}, p5 to p95)"
    )
    if isinstance(planned, int | float):
        text += f"; the plan says {pct(planned, 1)}"
    misses = [m for m in sim.get("plan_misses") or [] if isinstance(m, dict)]
    if misses:
        top = max(misses, key=lambda m: abs(m.get("goodput_points") or 0))
        text += (
            f"; what the plan leaves out costs most in {top.get('effect', '?')} "
            f"({top.get('goodput_points', 0):+.1f} points)"
        )
    return Chart("sim-goodput", "Goodput across simulated runs", text + ".", fig)


def lost_by_cause(sim: SimulationJson) -> Chart | None:
    """Hours lost per cause: the median run's bar, p5 to p95 as the whisker."""
    causes = [
        (c, s) for c, d in (sim.get("lost_hours") or {}).items() if (s := _spread(d)) is not None
    ]
    if not causes:
        return None
    causes.sort(key=lambda cs: -cs[1][1])
    fig = figure(6.4, 0.9 + 0.4 * len(causes))
    ax = fig.axes[0]
    for y, (_, (p5, p50, p95)) in enumerate(causes):
        ax.barh(
            y,
            p50,
            color=MEASURED,
            xerr=[[p50 - p5], [p95 - p50]],
            capsize=3,
            error_kw={"ecolor": "#555"},
        )
        ax.text(p95, y, f"  {p50:,.0f} h", va="center", fontsize=8)
    ax.set_yticks(range(len(causes)), [c.replace("_", " ") for c, _ in causes])
    ax.invert_yaxis()
    ax.set_xlabel("wall-clock hours lost in a run (bar: median run; whisker: p5 to p95)")
    ax.margins(x=0.2)
    total = sum(s[1] for _, s in causes)
    top, (_, p50, _) = causes[0]
    share = f", {pct(p50 / total)} of the {total:,.0f} h lost" if total else ""
    text = (
        f"{top.replace('_', ' ').capitalize()} loses the most time: {p50:,.0f} h in the "
        f"median run{share} ({_runs(sim)})."
    )
    return Chart("sim-lost", "Time lost by cause", text, fig)


def timeline(sim: SimulationJson) -> Chart | None:
    """Every event of the simulated run in time, one row per kind of event."""
    events = [
        e
        for e in sim.get("timeline") or []
        if isinstance(e, dict) and isinstance(e.get("t_hours"), int | float)
    ]
    if not events:
        return None
    kinds = list(dict.fromkeys(str(e.get("event", "?")) for e in events))
    days = max(e["t_hours"] for e in events) > 72
    scale, unit = (1 / 24, "days") if days else (1.0, "hours")
    fig = figure(6.4, 0.9 + 0.35 * len(kinds))
    ax = fig.axes[0]
    for y, kind in enumerate(kinds):
        ts = [e["t_hours"] * scale for e in events if str(e.get("event")) == kind]
        ax.scatter(ts, [y] * len(ts), marker="|", s=120, color=SIMULATED, linewidths=1.2)
    ax.set_yticks(range(len(kinds)), [k.replace("_", " ") for k in kinds])
    ax.invert_yaxis()
    ax.set_xlabel(f"time into the run ({unit})")
    ax.margins(y=0.3)
    counts = Counter(str(e.get("event", "?")) for e in events)
    said = ", ".join(f"{n:,} {k.replace('_', ' ')}" for k, n in counts.most_common(4))
    span = max(e["t_hours"] for e in events)
    text = f"{len(events):,} events in {span * scale:,.1f} {unit} of one simulated run: {said}."
    return Chart("sim-timeline", "Timeline of one simulated run", text, fig)


def charts(sim: SimulationJson) -> list[Chart]:
    made = [distribution(sim), lost_by_cause(sim), timeline(sim)]
    return [c for c in made if c is not None]
