"""How long ``stoker plan`` takes on a 100,000-GPU spec (target: under 1 s).

Two figures: the model alone (catalog loaded once, median of many runs) and the whole command
as a user runs it (a fresh ``stoker plan --json`` process, median of several). The floor for
the second is the interpreter's own start-up, measured in the same run (``python -c pass``).
No peer tool plans a job this way on this machine (Calculon, ASTRA-sim and the Azure pricing
calculator each cover one part and are not installable here), so the figure stands alone
against its target.

    python bench/plan_speed.py [--write BENCHMARKS.md]

Saves ``bench/results/plan.json``; ``bench/_render_plan.py`` writes the section from it.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _machine import cpu_mark, load_since
from _markdown import publish
from _results import save
from render import render

SPEC = """
name = "bench-100k-gpus"
[cluster]
vm_size = "ND96isr_H100_v5"
gpus = 100000
placement = "scale_set_on_request"
[workload]
kind = "pretrain"
params = "1T"
tokens_per_s_per_gpu = 80
seq_len = 8192
global_batch = 8192
dataset_size = "200 TB"
tp = 8
pp = 32
sharding = "fsdp"
overlap = 0.9
[run]
tokens = "30T"
"""


CLI_RUNS = 7


def _median_s(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure() -> dict[str, float]:
    import tomllib

    from stoker.catalog import load_catalog
    from stoker.plan import make_plan, parse_spec

    mark = cpu_mark()
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "job.toml"
        spec_path.write_text(SPEC)
        cat = load_catalog(defaults=False)
        spec = parse_spec(tomllib.loads(SPEC))
        plan = make_plan(spec, cat)
        assert plan.gpus == 100000
        model_s = _median_s(lambda: make_plan(spec, cat), 200)
        load_s = _median_s(lambda: load_catalog(defaults=False), 20)
        stoker = str(Path(sys.executable).with_name("stoker"))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        cli_s = _median_s(
            lambda: subprocess.run(
                [stoker, "plan", str(spec_path), "--json"], check=True, capture_output=True
            ),
            CLI_RUNS,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cli_cpu_s = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / CLI_RUNS
        python_s = _median_s(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), 7)
    return {
        "model_s": model_s,
        "catalog_load_s": load_s,
        "cli_s": cli_s,
        "cli_cpu_s": cli_cpu_s,
        "python_start_s": python_s,
        "gpus": plan.gpus,
        "spec": tomllib.loads(SPEC),
        "target_s": 1.0,
        **load_since(mark),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="replace this section of a Markdown file")
    args = parser.parse_args()
    result = measure()
    print(json.dumps(result, indent=2))
    save("plan", result)
    publish(render("plan"), args.write)


if __name__ == "__main__":
    main()
