"""The ``## ledger:`` section of BENCHMARKS.md, from ``bench/results/ledger.json``."""

from __future__ import annotations


def render(doc: dict) -> str:
    r = doc["results"]
    step_ms = r["step_s"] * 1e3
    met = "met" if r["overhead_share"] < r["target_share"] else "**missed**"
    return f"""## ledger: overhead on a {step_ms:g} ms step (target < {r["target_share"]:.0%})

Wall clock (CPU; the CUDA-event path is not measured: no GPU here). Each step: `wrap`'s `next()`,
then `copy`, `compute` (a {step_ms:g} ms busy wait) and `checkpoint` blocks. {r["steps"]:,} steps each
way, in alternating rounds of {r["round_steps"]}; medians.

| what | per step | overhead | share of the step |
|---|---:|---:|---:|
| bare loop, {step_ms:g} ms of work (the floor) | {r["bare_step_s"] * 1e3:.4f} ms | | |
| the same loop under the ledger | {r["ledger_step_s"] * 1e3:.4f} ms | {r["overhead_s"] * 1e6:+.1f} us | {r["overhead_share"]:.3%} ({met}) |
| the ledger's calls alone (empty steps, {r["calls_steps"]:,} x {r["calls_runs"]}) | {r["calls_alone_s"] * 1e6:.1f} us | | {r["calls_alone_s"] / r["step_s"]:.3%} of {step_ms:g} ms |

The ledger's own mean step, {r["ledger_reported_mean_s"] * 1e3:.3f} ms, agrees with the same
steps timed from outside the loop, {r["outside_mean_s"] * 1e3:.3f} ms (means include the steps
on which other processes took the CPU). The {step_ms:g} ms figure can be larger than the calls
alone: the same code runs slower right after {step_ms:g} ms of other work (cold caches, most
likely, on a machine shared with other processes: they took {r["others_cpu"]:.0%} of its CPU
meanwhile, load average {r["loadavg_1m"]:.1f}). It is a difference of two medians and moves by
tens of microseconds with load. The calls-alone figure is a mean and includes reading the ended
steps, which the ledger does in one pass every 16 steps (or every second); the {step_ms:g} ms
medians leave those steps out. `attach()`'s DDP hook adds two marks and a lock per gradient
bucket, not measured here.
"""
