"""How long ``stoker plan`` takes on a 100,000-GPU spec (target: under 1 s).

Two figures: the model alone (catalog loaded once, median of many runs) and the whole command
as a user runs it (a fresh ``stoker plan --json`` process, median of several). The floor for
the second is the interpreter's own start-up, measured in the same run (``python -c pass``).
No peer tool plans a job this way on this machine (Calculon, ASTRA-sim and the Azure pricing
calculator each cover one part and are not installable here), so the figure stands alone
against its target.

    python bench/plan_speed.py [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _markdown import publish

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
        cli_s = _median_s(
            lambda: subprocess.run(
                [stoker, "plan", str(spec_path), "--json"], check=True, capture_output=True
            ),
            7,
        )
        python_s = _median_s(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), 7)
    return {
        "model_s": model_s,
        "catalog_load_s": load_s,
        "cli_s": cli_s,
        "python_start_s": python_s,
    }


def markdown(r: dict[str, float]) -> str:
    return f"""## plan: a 100,000-GPU spec (target < 1 s)

Reproduce: `make bench` (runs `.venv/bin/python bench/plan_speed.py --write BENCHMARKS.md`).
12,500 x ND96isr_H100_v5, 1T parameters, tp 8 x pp 32, FSDP, 30T tokens.

| what | median | against the target |
|---|---:|---:|
| the model alone (`make_plan`, catalog loaded) | {r["model_s"] * 1e3:.2f} ms | {r["model_s"] / 1.0:.4f}x of 1 s |
| loading the catalog (TOML + validation) | {r["catalog_load_s"] * 1e3:.1f} ms | |
| the whole command, `stoker plan --json`, fresh process | {r["cli_s"] * 1e3:.0f} ms | {r["cli_s"] / 1.0:.2f}x of 1 s |
| floor: `python -c pass` on the same machine | {r["python_start_s"] * 1e3:.0f} ms | |

The command's time is almost all imports (pydantic, rich, typer) and interpreter start-up: it is
{r["cli_s"] / r["python_start_s"]:.1f}x a bare `python -c pass`, while the plan itself takes under a millisecond. The model's arithmetic does not grow
with the GPU count (closed-form collectives), so 100,000 GPUs cost what 8 do. No peer is run:
nothing installable here plans storage, fabric, failures and cost together.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="replace this section of a Markdown file")
    args = parser.parse_args()
    result = measure()
    print(json.dumps(result, indent=2))
    publish(markdown(result), args.write)


if __name__ == "__main__":
    main()
