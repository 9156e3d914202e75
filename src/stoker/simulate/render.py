"""The simulation as rich tables: the distributions beside the plan, time lost by cause, and
what the closed form misses."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ._result import Simulation

LABELS = {
    "checkpoint": "checkpoint blocking",
    "rework": "work redone after failures",
    "restart": "restarts (detect, reschedule, reload)",
    "restart_contention": "every VM loading the checkpoint at once",
    "restaging": "swapped VMs re-staging their data",
    "stragglers": "stragglers (slowest rank per step)",
    "upload_contention": "data reads beside checkpoint writes/uploads",
    "hsm_first_reads": "first epoch through Lustre HSM",
}


def _pct(x: float) -> str:
    return f"{x * 100:.1f} %"


def distributions(sim: Simulation) -> Table:
    t = Table(title="Plan (closed form) beside the simulation", title_justify="left")
    for col in ("", "plan", "P5", "P50", "P95"):
        t.add_column(col, justify="left" if not col else "right")
    g, b, f = sim.goodput, sim.gpu_busy, sim.failures
    t.add_row("goodput", _pct(g["plan"]), _pct(g["p5"]), _pct(g["p50"]), _pct(g["p95"]))
    t.add_row("GPU busy", _pct(b["plan"]), _pct(b["p5"]), _pct(b["p50"]), _pct(b["p95"]))
    t.add_row(
        "failures",
        f"{f['plan']:,.0f}",
        *(f"{f[p]:,.0f}" for p in ("p5", "p50", "p95")),
    )
    return t


def lost_by_cause(sim: Simulation) -> Table:
    wall = sim.days * 24
    t = Table(title=f"Time lost by cause, hours of {wall:,.0f}", title_justify="left")
    for col in ("cause", "P5", "P50", "P95", "share (P50)"):
        t.add_column(col, justify="left" if col == "cause" else "right")
    for cause, q in sim.lost_hours.items():
        if q["p95"] <= 0:
            continue
        t.add_row(
            LABELS.get(cause, cause),
            f"{q['p5']:,.1f}",
            f"{q['p50']:,.1f}",
            f"{q['p95']:,.1f}",
            _pct(q["p50"] / wall) if wall else "",
        )
    return t


def misses(sim: Simulation) -> Table | Text:
    if not sim.plan_misses:
        return Text(
            "The plan's closed form agrees with the simulation here (no effect of 0.05 "
            "goodput points or more)."
        )
    t = Table(title="What the plan misses (goodput points, mean over runs)", title_justify="left")
    t.add_column("effect")
    t.add_column("points", justify="right")
    t.add_column("why")
    for m in sim.plan_misses:
        t.add_row(m["effect"], f"{m['goodput_points']:+.2f}", m.get("detail", ""))
    return t


def rich_report(sim: Simulation) -> Group:
    head = Text(
        f"stoker simulate: {sim.spec}, {sim.gpus:,} GPU{'s' if sim.gpus != 1 else ''}, "
        f"{sim.days:,.1f} days, {sim.runs:,} run{'s' if sim.runs != 1 else ''} "
        f"from seed {sim.seed} ({sim.events:,} events in {sim.seconds:.2f} s, "
        f"{sim.events_per_second:,.0f}/s)",
        style="bold",
    )
    parts = [head, distributions(sim), lost_by_cause(sim), misses(sim)]
    parts += [Text(f"note: {n}") for n in sim.notes]
    return Group(*parts)


def markdown(sim: Simulation) -> str:
    """The same three tables in Markdown (``stoker plan --simulate --markdown``)."""
    g, b = sim.goodput, sim.gpu_busy
    wall = sim.days * 24
    lines = [
        f"## Simulation: {sim.runs} runs of {sim.days:,.1f} days (seed {sim.seed})",
        "",
        "| | plan | P5 | P50 | P95 |",
        "|---|---:|---:|---:|---:|",
        f"| goodput | {_pct(g['plan'])} | {_pct(g['p5'])} | {_pct(g['p50'])} | {_pct(g['p95'])} |",
        f"| GPU busy | {_pct(b['plan'])} | {_pct(b['p5'])} | {_pct(b['p50'])} | {_pct(b['p95'])} |",
        "",
        "| time lost to | P50 hours | share |",
        "|---|---:|---:|",
    ]
    for cause, q in sim.lost_hours.items():
        if q["p95"] > 0:
            lines.append(
                f"| {LABELS.get(cause, cause)} | {q['p50']:,.1f} | {_pct(q['p50'] / wall)} |"
            )
    if sim.plan_misses:
        lines += ["", "| the plan misses | goodput points (mean) | why |", "|---|---:|---|"]
        lines += [
            f"| {m['effect']} | {m['goodput_points']:+.2f} | {m.get('detail', '')} |"
            for m in sim.plan_misses
        ]
    return "\n".join(lines) + "\n"
