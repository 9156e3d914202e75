"""The ``## simulate:`` section of BENCHMARKS.md, from ``bench/results/simulate.json``."""

from __future__ import annotations


def _pct(x: float) -> str:
    return f"{x * 100:.1f} %"


def _dist(q: dict) -> str:
    return f"{_pct(q['p5'])} / {_pct(q['p50'])} / {_pct(q['p95'])}"


def render(doc: dict) -> str:
    r = doc["results"]
    target, d, c, n = r["target_s"], r["default"], r["closed_form"], r["naive_per_step"]
    wall_h = r["days"] * 24
    causes = "\n".join(
        f"| {cause} | {q['p5']:,.1f} | {q['p50']:,.1f} | {q['p95']:,.1f} "
        f"| {_pct(q['p50'] / wall_h)} |"
        for cause, q in d["lost_hours"].items()
        if q["p95"] > 0
    )
    misses = "\n".join(
        f"| {m['effect']} | {m['goodput_points']:+.2f} | {m['detail']} |" for m in d["plan_misses"]
    )
    agree = c["goodput"]["p50"] / c["goodput"]["plan"]
    return f"""## simulate: a {r["gpus"]:,}-GPU, {r["days"]:g}-day run simulated {r["runs"]} times (target < {target:g} s)

`{r["spec"]}` over {r["days"]:g} days, {r["runs"]} runs from seed 0 (step {r["step_s"]:.2f} s, a save
every {r["interval_s"]:.0f} s of training). Events are the modelled ones: failures, VM swaps,
restarts, saves and epochs; the saves and steps between two failures are worked out at once,
with each step's straggler wait drawn in bulk.

| what | wall | CPU | events | events/s | against the target |
|---|---:|---:|---:|---:|---:|
| stoker, default knobs (every effect on) | {d["wall_s"]:.2f} s | {d["cpu_s"]:.2f} s | {d["events"]:,} | {d["events_per_second"]:,.0f} | {d["wall_s"] / target:.3f}x of {target:g} s |
| stoker, the closed form's assumptions | {c["wall_s"]:.2f} s | {c["cpu_s"]:.2f} s | {c["events"]:,} | {c["events_per_second"]:,.0f} | {c["wall_s"] / target:.3f}x of {target:g} s |
| baseline: one SimPy event per step and save, {n["sim_hours"]:g} h simulated | {n["wall_s"]:.3f} s | {n["cpu_s"]:.3f} s | {n["events"]:,} | {n["events"] / n["wall_s"]:,.0f} | |
| the same baseline scaled to {r["runs"]} x {r["days"]:g} days (x{n["scale"]:,.0f}) | {n["scaled_wall_s"]:,.0f} s | | | | {n["scaled_wall_s"] / target:,.1f}x of {target:g} s |

Goodput (P5 / P50 / P95) against the plan's closed form, {_pct(d["goodput"]["plan"])}:
with the closed form's assumptions {_dist(c["goodput"])} (P50 {agree:.3f}x the plan's; the
target is within 2 %); with every effect on {_dist(d["goodput"])}. Failures per run: plan
{d["failures"]["plan"]:.0f}, simulated {d["failures"]["p5"]:.0f} / {d["failures"]["p50"]:.0f} / {d["failures"]["p95"]:.0f}.

| time lost to, hours of {wall_h:,.0f} | P5 | P50 | P95 | share at P50 |
|---|---:|---:|---:|---:|
{causes}

| what the plan misses | goodput points | why |
|---|---:|---|
{misses}

Load: other processes took {r["others_cpu"]:.0%} of the machine's CPU meanwhile (load average
{r["loadavg_1m"]:.1f}); the CPU column is this process alone.
"""
