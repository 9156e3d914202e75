"""stoker report on the 2,048-VM example: its plan and a simulation in one HTML file (targets:
written in < 2 s, < 5 MB, 0 console errors in Chromium, every chart drawn), beside plotly
writing the same seven charts as one self-contained page (bench/_report_plotly.py).

Each side runs as a user runs it, a fresh process per run (interpreter start and imports
counted), median of RUNS; then Debian's headless Chromium (tests/browser.py, through Playwright) opens each page
once: console errors, charts drawn (an SVG with marks), load time. The simulation is
``stoker simulate SPEC --json`` where that verb exists, else tests/fixtures/simulation_2048vm.json
(the same shape); the results name which.

    python bench/report_bench.py [--runs 5] [--write BENCHMARKS.md]

Saves ``bench/results/report.json``; ``bench/_render_report.py`` writes the section from it.
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

from _machine import cpu_mark, load_since  # noqa: E402
from _markdown import publish  # noqa: E402
from _peers import ensure_report_venv  # noqa: E402
from _results import save  # noqa: E402
from render import render  # noqa: E402

from browser import open_page  # noqa: E402

SPEC = ROOT / "examples" / "llama3-405b-2048vm.toml"
FIXTURE = ROOT / "tests" / "fixtures" / "simulation_2048vm.json"
STOKER = Path(sys.executable).parent / "stoker"


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, its stdout) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, run.stdout


def inputs(folder: Path) -> tuple[Path, Path, str]:
    plan = folder / "plan.json"
    plan.write_text(
        subprocess.run(
            [str(STOKER), "plan", str(SPEC), "--json"], check=True, capture_output=True, text=True
        ).stdout
    )
    sim = folder / "simulation.json"
    made = subprocess.run(
        [str(STOKER), "simulate", str(SPEC), "--json"], capture_output=True, text=True
    )
    if made.returncode == 0 and '"stoker.simulation/1"' in made.stdout:
        sim.write_text(made.stdout)
        return plan, sim, f"stoker simulate {SPEC.relative_to(ROOT)} --json"
    sim.write_text(FIXTURE.read_text())
    return plan, sim, f"{FIXTURE.relative_to(ROOT)} (stoker simulate not available)"


def measure(name: str, cmd: list[str], out: Path, runs: int, shots: Path) -> dict:
    walls, cpus, inside = [], [], []
    for _ in range(runs):
        wall, cpu, stdout = timed(cmd)
        walls.append(wall)
        cpus.append(cpu)
        inside.append(json.loads(stdout)["elapsed_s"])
    view = open_page(out.as_uri(), screenshot=shots / f"{name}.png")
    drawn = [c for c in view.charts if c["marks"] > 0 and c["width"] > 0 and c["height"] > 0]
    return {
        "wall_s": statistics.median(walls),
        "wall_all_s": walls,
        "cpu_s": statistics.median(cpus),
        "in_process_s": statistics.median(inside),
        "size_bytes": out.stat().st_size,
        "console_errors": view.console_errors,
        "charts": len(view.charts),
        "charts_drawn": len(drawn),
        "marks_fewest": min((c["marks"] for c in view.charts), default=0),
        "requests_outside": [u for u in view.requests if not u.startswith("file://")],
        "browser_load_s": view.load_s,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write", type=Path, help="Markdown file whose section to replace")
    args = parser.parse_args()
    mark = cpu_mark()
    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        folder = Path(tmp)
        plan, sim, sim_source = inputs(folder)
        out = folder / "stoker.html"
        stoker = measure(
            "stoker",
            [
                str(STOKER),
                "report",
                "--out",
                str(out),
                "--plan",
                str(plan),
                "--simulation",
                str(sim),
                "--json",
            ],
            out,
            args.runs,
            folder,
        )
        peer_python = ensure_report_venv()
        peer_out = folder / "plotly.html"
        plotly = measure(
            "plotly",
            [str(peer_python), str(HERE / "_report_plotly.py"), str(plan), str(sim), str(peer_out)],
            peer_out,
            args.runs,
            folder,
        )
        version = subprocess.run(
            [str(peer_python), "-c", "import plotly; print(plotly.__version__)"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        floor, _, _ = timed([sys.executable, "-c", "pass"])
        # Where stoker's CPU goes: the CLI's start-up, then importing matplotlib.
        cli_cpu = statistics.median(timed([str(STOKER), "report", "--help"])[1] for _ in range(3))
        mpl = "import matplotlib.figure, matplotlib.backends.backend_svg"
        mpl_cpu = statistics.median(timed([sys.executable, "-c", mpl])[1] for _ in range(3))
        bare_cpu = statistics.median(timed([sys.executable, "-c", "pass"])[1] for _ in range(3))
    results = {
        "spec": str(SPEC.relative_to(ROOT)),
        "simulation": sim_source,
        "runs": args.runs,
        "targets": {"wall_s": 2.0, "size_bytes": 5e6, "console_errors": 0},
        "stoker": stoker,
        "plotly": plotly | {"version": version},
        "python_start_s": floor,
        "cli_start_cpu_s": cli_cpu,
        "matplotlib_import_cpu_s": mpl_cpu - bare_cpu,
        **load_since(mark),
    }
    save("report", results)
    publish(render("report"), args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
