"""The ``## report:`` section of BENCHMARKS.md, from ``bench/results/report.json``."""

from __future__ import annotations


def render(doc: dict) -> str:
    r = doc["results"]
    s, p, t = r["stoker"], r["plotly"], r["targets"]

    def row(what: str, a: float, b: float, fmt: str, target: float | None = None) -> str:
        vs = f"{a / b:.2f}x" if b else "-"
        tgt = f"{a / target:.2f}x of {target:g}" if target else ""
        return f"| {what} | {a:{fmt}} | {b:{fmt}} | {vs} | {tgt} |"

    def errors(side: dict) -> str:
        return str(len(side["console_errors"]))

    lines = [
        f"## report: the 2,048-VM plan and its simulation in one HTML file (target < "
        f"{t['wall_s']:g} s, < {t['size_bytes'] / 1e6:g} MB)",
        "",
        f"`stoker report --plan PLAN.json --simulation SIM.json` on `{r['spec']}`; the simulation "
        f"is {r['simulation']}. Beside it, plotly {p['version']} writing the same "
        f"{p['charts']} charts as one self-contained page (`bench/_report_plotly.py`). Each side "
        f"is a fresh process, median of {r['runs']} runs; Debian's headless Chromium opens each "
        f"page once.",
        "",
        "| what | stoker (matplotlib SVG) | plotly | stoker / plotly | against the target |",
        "|---|---:|---:|---:|---:|",
        row("written, the whole command (s)", s["wall_s"], p["wall_s"], ".2f", t["wall_s"]),
        row("the same, CPU time (s)", s["cpu_s"], p["cpu_s"], ".2f", t["wall_s"]),
        row(
            "timed inside the process, after start-up (s)",
            s["in_process_s"],
            p["in_process_s"],
            ".2f",
        ),
        row(
            "file size (MB)",
            s["size_bytes"] / 1e6,
            p["size_bytes"] / 1e6,
            ".3f",
            t["size_bytes"] / 1e6,
        ),
        row(
            "Chromium: load to the load event (s)", s["browser_load_s"], p["browser_load_s"], ".2f"
        ),
        f"| console errors | {errors(s)} | {errors(p)} | | target 0 |",
        f"| charts drawn (an SVG with marks) / charts | {s['charts_drawn']} / {s['charts']} | "
        f"{p['charts_drawn']} / {p['charts']} | | every one |",
        f"| requests outside the file | {len(s['requests_outside'])} | "
        f"{len(p['requests_outside'])} | | |",
        "",
        f"stoker's runs: {', '.join(f'{x:.2f}' for x in s['wall_all_s'])} s; a bare `python -c "
        f"pass` took {r['python_start_s']:.2f} s. Of stoker's {s['cpu_s']:.2f} CPU s, "
        f"`stoker report --help` (the CLI's start-up) takes {r['cli_start_cpu_s']:.2f} and "
        f"importing matplotlib {r['matplotlib_import_cpu_s']:.2f}; the seven charts and the page "
        f"the remaining {s['cpu_s'] - r['cli_start_cpu_s'] - r['matplotlib_import_cpu_s']:.2f}. "
        f"The page is static SVG with its text as text "
        f"and no script, so its size is the charts' own; plotly's page carries plotly.js "
        f"inline. Load: other processes took {r['others_cpu']:.0%} of the machine's CPU "
        f"meanwhile (load average {r['loadavg_1m']:.1f}); the CPU time is the steadier figure "
        f"on a shared machine.",
    ]
    return "\n".join(lines) + "\n"
