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
    mem = (
        next(
            (
                int(line.split()[1]) * 1024
                for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal:")
            ),
            0,
        )
        if Path("/proc/meminfo").exists()
        else 0
    )
    return {
        "cores": os.cpu_count(),
        "memory_bytes": mem,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


def now() -> str:
    """The time a result is stamped with (UTC, to the minute)."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def save(
    name: str,
    results: dict[str, Any],
    *,
    command: str | None = None,
    measured: str | None = None,
    folder: Path = RESULTS,
) -> Path:
    """Write ``results`` as ``bench/results/NAME.json`` with when, how and on what it ran.

    ``command`` is the line that reproduces it (default: this process's own command line);
    ``measured`` its time (default: now); ``folder`` another place for a run that is not to be
    published (a ``--quick`` one, say)."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = {
        "bench": name,
        "command": command or own_command(),
        "measured": measured or now(),
        "machine": machine(),
        "results": results,
    }
    path = folder / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    tmp.replace(path)  # a reader never sees half a file
    return path


def own_command() -> str:
    """This process's command line, as run from the repository's root."""
    root = RESULTS.parents[1]
    exe = Path(sys.executable)
    python = str(exe.relative_to(root)) if exe.is_relative_to(root) else "python"
    args = [
        str(Path(a).resolve().relative_to(root))
        if i == 0 and Path(a).resolve().is_relative_to(root)
        else a
        for i, a in enumerate(sys.argv)
    ]
    return shlex.join([python, *args])


def load(name: str, folder: Path = RESULTS) -> dict[str, Any]:
    """The saved document of benchmark ``name`` (see :func:`save`)."""
    return json.loads((folder / f"{name}.json").read_text())
