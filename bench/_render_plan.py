"""The ``## plan:`` section of BENCHMARKS.md, from ``bench/results/plan.json``."""

from __future__ import annotations


def render(doc: dict) -> str:
    r = doc["results"]
    target = r["target_s"]
    c, w, run = r["spec"]["cluster"], r["spec"]["workload"], r["spec"]["run"]
    return f"""## plan: a 100,000-GPU spec (target < {target:g} s)

{r["gpus"]:,} GPUs on {c["vm_size"]}, {w["params"]} parameters, tp {w["tp"]} x pp {w["pp"]},
{w["sharding"].upper()}, {run["tokens"]} tokens.

| what | median | against the target |
|---|---:|---:|
| the model alone (`make_plan`, catalog loaded) | {r["model_s"] * 1e3:.2f} ms | {r["model_s"] / target:.4f}x of {target:g} s |
| loading the catalog (TOML + validation) | {r["catalog_load_s"] * 1e3:.1f} ms | |
| the whole command, `stoker plan --json`, fresh process | {r["cli_s"] * 1e3:.0f} ms | {r["cli_s"] / target:.2f}x of {target:g} s |
| the same, CPU time (user + system; steadier when the machine is shared) | {r["cli_cpu_s"] * 1e3:.0f} ms | {r["cli_cpu_s"] / target:.2f}x of {target:g} s |
| floor: `python -c pass` on the same machine | {r["python_start_s"] * 1e3:.0f} ms | |

The command's time is almost all imports (pydantic, rich, typer) and interpreter start-up: it is
{r["cli_s"] / r["python_start_s"]:.1f}x a bare `python -c pass`, while the plan itself takes
{r["model_s"] * 1e3:.2f} ms. The model's arithmetic does not grow with the GPU count
(closed-form collectives), so 100,000 GPUs cost what 8 do. No peer is run: nothing installable
here plans storage, fabric, failures and cost together. Load: other processes took
{r["others_cpu"]:.0%} of the machine's CPU meanwhile (load average {r["loadavg_1m"]:.1f}).
"""
