"""How long ``stoker provision`` takes on the 2,048-VM example (target: under 1 s), and what
the offline checks find in what it writes (targets: 0 schema errors, 0 checkov failures).

Three times: the library call alone (``stoker.provision``, imports warm, median of many),
the whole command as a user runs it (a fresh ``stoker provision`` process, median of several)
and the interpreter's start-up (``python -c pass``), the floor of the second. The checks run
once on the written folder; checkov only when installed (``make checkov``). No peer writes a
deployment from a training plan, so the figures stand against their targets alone.

    python bench/provision_speed.py [--write BENCHMARKS.md]

Saves ``bench/results/provision.json``; ``bench/_render_provision.py`` writes the section.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
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

SPEC = Path(__file__).resolve().parents[1] / "examples" / "llama3-405b-2048vm.toml"


def _median_s(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure() -> dict[str, object]:
    import stoker
    from stoker.provision.validate import check

    mark = cpu_mark()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "deploy"

        def library() -> None:
            shutil.rmtree(out, ignore_errors=True)
            stoker.provision(SPEC, out)

        library()
        library_s = _median_s(library, 30)
        exe = str(Path(sys.executable).with_name("stoker"))

        def command() -> None:
            shutil.rmtree(out, ignore_errors=True)
            subprocess.run(
                [exe, "provision", str(SPEC), "--out", str(out), "--json"],
                check=True,
                capture_output=True,
            )

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        cli_s = _median_s(command, 7)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cli_cpu_s = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / 7
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        plan_s = _median_s(
            lambda: subprocess.run(
                [exe, "plan", str(SPEC), "--json"], check=True, capture_output=True
            ),
            7,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        plan_cpu_s = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / 7
        python_s = _median_s(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), 7)
        started = time.perf_counter()
        report = check(out)
        check_s = time.perf_counter() - started
        template = json.loads((out / "main.json").read_text())
        files = sorted(p.name for p in out.iterdir())
    kinds: dict[str, int] = {}
    for resource_ in template["resources"]:
        kinds[resource_["type"]] = kinds.get(resource_["type"], 0) + 1
    return {
        "spec": str(SPEC.relative_to(SPEC.parents[1])),
        "target_s": 1.0,
        "files": files,
        "resource_types": kinds,
        "library_s": library_s,
        "cli_s": cli_s,
        "cli_cpu_s": cli_cpu_s,
        "plan_s": plan_s,
        "plan_cpu_s": plan_cpu_s,
        "python_start_s": python_s,
        "check_s": check_s,
        "resources": len(template["resources"]),
        "schema_errors": len(report.schema_errors),
        "checkov_passed": report.checkov_passed,
        "checkov_failed": len(report.checkov_failed),
        "checkov_skipped": len(report.checkov_skipped),
        **load_since(mark),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="replace this section of a Markdown file")
    args = parser.parse_args()
    result = measure()
    print(json.dumps(result, indent=2))
    save("provision", result)
    publish(render("provision"), args.write)


if __name__ == "__main__":
    main()
