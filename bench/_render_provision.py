"""The ``## provision:`` section of BENCHMARKS.md, from ``bench/results/provision.json``."""

from __future__ import annotations


def render(doc: dict) -> str:
    r = doc["results"]
    target = r["target_s"]
    checkov = (
        "not installed (`make checkov`)"
        if r["checkov_passed"] is None
        else f"{r['checkov_failed']} failed, {r['checkov_passed']} passed, "
        f"{r['checkov_skipped']} skipped with a reason next to the resource"
    )
    kinds = ", ".join(
        f"{n} x `{t.split('/', 1)[-1]}`" for t, n in sorted(r["resource_types"].items())
    )
    return f"""## provision: the 2,048-VM example as a deployment (target < {target:g} s, 0 schema errors, 0 checkov failures)

`{r["spec"]}` (checkov from `make checkov`): {r["resources"]} ARM resources ({kinds}), written as
{len(r["files"])} files ({", ".join(f"`{f}`" for f in r["files"])}).

| what | result | against the target |
|---|---:|---:|
| `stoker.provision(...)`, library call, imports warm (median) | {r["library_s"] * 1e3:.1f} ms | {r["library_s"] / target:.3f}x of {target:g} s |
| `stoker provision ... --json`, fresh process (median) | {r["cli_s"] * 1e3:.0f} ms | {r["cli_s"] / target:.2f}x of {target:g} s |
| the same, CPU time (user + system; steadier when the machine is shared) | {r["cli_cpu_s"] * 1e3:.0f} ms | {r["cli_cpu_s"] / target:.2f}x of {target:g} s |
| for scale: `stoker plan ... --json` on the same spec, fresh process (median; CPU) | {r["plan_s"] * 1e3:.0f} ms; {r["plan_cpu_s"] * 1e3:.0f} ms CPU | |
| floor: `python -c pass` on the same machine | {r["python_start_s"] * 1e3:.0f} ms | |
| ARM resources failing their schema (strict: objects closed) | {r["schema_errors"]} | target 0 |
| checkov on `main.json` | {checkov} | target 0 failed |
| the checks themselves (schemas + checkov) | {r["check_s"]:.1f} s | |

The command's time is interpreter start-up and imports (pydantic, rich, typer), as for
`stoker plan`: its CPU time is {(r["cli_cpu_s"] - r["plan_cpu_s"]) * 1e3:+.0f} ms from `stoker plan`'s
on the same spec, and the library call that writes the files takes {r["library_s"] * 1e3:.1f} ms of it.
Wall-clock figures on this shared machine move with the other work on it: other processes took
{r["others_cpu"]:.0%} of its CPU meanwhile (load average {r["loadavg_1m"]:.1f} at the end).
"""
