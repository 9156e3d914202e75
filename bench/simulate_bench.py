"""How fast ``stoker simulate`` runs a 16,384-GPU, 54-day job 100 times (target: under 30 s).

The job is examples/llama3-405b-2048vm.toml (2,048 ND H100 v5 VMs x 8 GPUs) over Llama 3's
54 days. Measured in one run, side by side:

- stoker's simulation with its default knobs (every effect on), 100 runs: wall and CPU
  seconds, modelled events (failures, swaps, restarts, saves, epochs) per second, and the
  goodput distribution beside the plan's closed form;
- the same with the closed form's assumptions (exponential failures, no stragglers, no
  contention, no re-staging, data pre-staged): the agreement with the plan;
- the baseline a straightforward SimPy model would be: one event per training step and per
  save on the same job (no peer tool simulates an Azure training run; this is what the
  granularity saves), timed over a few simulated hours and scaled to 100 x 54 days.

    python bench/simulate_bench.py [--write BENCHMARKS.md]

Saves ``bench/results/simulate.json``; ``bench/_render_simulate.py`` writes the section.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _machine import cpu_mark, load_since
from _markdown import publish
from _results import save
from render import render

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "llama3-405b-2048vm.toml"
DAYS = 54.0
RUNS = 100
TARGET_S = 30.0
NAIVE_HOURS = 24.0  # simulated hours of the per-step baseline


def _cpu_s() -> float:
    return time.process_time()  # this process's CPU, finer than os.times' ticks


def _timed(fn):
    wall, cpu = time.perf_counter(), _cpu_s()
    out = fn()
    return out, time.perf_counter() - wall, _cpu_s() - cpu


def naive_per_step(step_s: float, interval_s: float, blocking_s: float, hours: float) -> dict:
    """One SimPy event per step and per save: the model stoker does not build."""
    import simpy

    env = simpy.Environment()
    count = {"events": 0}

    def train(env: simpy.Environment):
        since_save = 0.0
        while True:
            yield env.timeout(step_s)
            count["events"] += 1
            since_save += step_s
            if since_save >= interval_s:
                yield env.timeout(blocking_s)
                count["events"] += 1
                since_save = 0.0

    env.process(train(env))
    _, wall, cpu = _timed(lambda: env.run(until=hours * 3600))
    return {"events": count["events"], "wall_s": wall, "cpu_s": cpu, "sim_hours": hours}


def measure() -> dict:
    from stoker.simulate import CLOSED_FORM, simulate

    mark = cpu_mark()
    simulate(SPEC, runs=1, days=1)  # imports and the catalog, outside the timing
    full, full_wall, full_cpu = _timed(lambda: simulate(SPEC, runs=RUNS, days=DAYS))
    closed, closed_wall, closed_cpu = _timed(
        lambda: simulate(SPEC, runs=RUNS, days=DAYS, knobs=CLOSED_FORM)
    )
    from stoker.plan import plan_job
    from stoker.simulate import load_job

    plan = plan_job(load_job(SPEC)[0])
    assert plan.step is not None and plan.checkpoints is not None
    naive = naive_per_step(
        plan.step.total_s, plan.checkpoints.interval_s, plan.checkpoints.blocking_s, NAIVE_HOURS
    )
    scale = RUNS * DAYS * 24 / NAIVE_HOURS
    return {
        "spec": str(SPEC.relative_to(ROOT)),
        "gpus": full.gpus,
        "days": DAYS,
        "runs": RUNS,
        "target_s": TARGET_S,
        "default": {
            "wall_s": full_wall,
            "cpu_s": full_cpu,
            "events": full.events,
            "events_per_second": full.events / full_wall,
            "simpy_events": full.simpy_events,
            "goodput": full.goodput,
            "gpu_busy": full.gpu_busy,
            "failures": full.failures,
            "lost_hours": full.lost_hours,
            "plan_misses": full.plan_misses,
            "knobs": full.knobs,
        },
        "closed_form": {
            "wall_s": closed_wall,
            "cpu_s": closed_cpu,
            "events": closed.events,
            "events_per_second": closed.events / closed_wall,
            "goodput": closed.goodput,
            "gpu_busy": closed.gpu_busy,
            "failures": closed.failures,
        },
        "naive_per_step": {**naive, "scaled_wall_s": naive["wall_s"] * scale, "scale": scale},
        "step_s": plan.step.total_s,
        "interval_s": plan.checkpoints.interval_s,
        **load_since(mark),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="replace this section of a Markdown file")
    args = parser.parse_args()
    result = measure()
    print(json.dumps({k: v for k, v in result.items() if k != "default"}, indent=1))
    save("simulate", result)
    publish(render("simulate"), args.write)


if __name__ == "__main__":
    main()
