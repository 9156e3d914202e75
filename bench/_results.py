"""Benchmarks measure, then render: each script saves what it measured as JSON here, and
``bench/render.py`` turns those files into BENCHMARKS.md's sections. No number is written by
hand: a section shows only what its results file holds, and names that file."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    """What ran the benchmark: the figures a reader needs to weigh its numbers."""
    mem = next(
        (int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
         if line.startswith("MemTotal:")),
        0,
    ) if Path("/proc/meminfo").exists() else 0
    return {
        "cores": os.cpu_count(),
        "memory_bytes": mem,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


def save(name: str, results: dict[str, Any], *, command: str | None = None) -> Path:
    """Write ``results`` as ``bench/results/NAME.json`` with when, how and on what it ran.

    ``command`` is the line that reproduces it (default: this process's own command line)."""
    RESULTS.mkdir(exist_ok=True)
    doc = {
        "bench": name,
        "command": command or "python " + shlex.join(sys.argv),
        "measured": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "results": results,
    }
    path = RESULTS / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    tmp.replace(path)  # a reader never sees half a file
    return path


def load(name: str) -> dict[str, Any]:
    """The saved document of benchmark ``name`` (see :func:`save`)."""
    return json.loads((RESULTS / f"{name}.json").read_text())
