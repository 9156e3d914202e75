"""stoker's code at another commit against the working tree's, on export B and import C, in one
run, alternating order, rclone beside them each round: whether a ratio to rclone that moved
between days moved with stoker's code or with the machine and the emulator.

    git archive <commit> src | tar -x -C /tmp/old && .venv/bin/python -m compileall -q /tmp/old/src
    .venv/bin/python bench/stage_ab.py /tmp/old/src [rounds]

The other code runs through PYTHONPATH (ahead of the editable install); the figures are MB/s,
printed, not saved (docs/stage-cpu-notes.md quotes them).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _peers  # noqa: E402
import stage_bench as sb  # noqa: E402
from _peers import BENCH, Azurite  # noqa: E402
from _stage_tools import (  # noqa: E402
    Tools,
    check_count,
    check_local_copy,
    drop_caches,
    fresh_dir,
    run_tool,  # noqa: E402
)

ORDERS = (["old", "new", "rclone"], ["rclone", "new", "old"])  # alternating rounds


def _code(which: str, old_src: str) -> None:
    """The stoker the next run imports: ``old_src`` through PYTHONPATH, or the installed one."""
    os.environ.pop("PYTHONPATH", None)
    if which == "old":
        os.environ["PYTHONPATH"] = old_src


def export_b(peers: _peers.Peers, old_src: str, rounds: int, got: dict) -> None:
    shape = {s.name: s for s in sb.shapes(False, None)}["B"]
    data = sb.ensure_dataset(shape, "full")
    for rep in range(rounds):
        for which in ORDERS[rep % 2]:
            _code(which, old_src)
            tool = "rclone" if which == "rclone" else "stoker"
            run, problem, _ = sb._export_once(shape, data, peers, tool, rep)
            if problem:
                raise SystemExit(f"export B {which}: {problem}")
            _note(got, f"export-B-{which}", shape.nbytes / run.total_s / 1e6)


def import_c(peers: _peers.Peers, old_src: str, rounds: int, got: dict) -> None:
    shape = {s.name: s for s in sb.shapes(False, None)}["C"]
    data = sb.ensure_dataset(shape, "full")
    with Azurite() as az, tempfile.TemporaryDirectory(dir=BENCH) as state:
        sb.setup_source(shape, data, az)
        tools = Tools(peers, az, Path(state))
        for rep in range(rounds):
            for which in ORDERS[rep % 2]:
                _code(which, old_src)
                dst = fresh_dir(f"ab-{which}")
                drop_caches()
                log = BENCH / "logs" / f"ab-C-{which}-{rep}"
                if which == "rclone":
                    src = f":azureblob:{sb.SRC_CONTAINER}/{shape.name}"
                    run = run_tool(*tools.rclone(src, str(dst), upload=False), log)
                    problem = check_count(shape, dst)
                else:
                    src = f"az://{sb.SRC_CONTAINER}/{shape.name}"
                    run = run_tool(*tools.stoker(src, str(dst)), log)
                    problem = check_local_copy(shape, data, dst)
                shutil.rmtree(dst)
                if problem:
                    raise SystemExit(f"import C {which}: {problem}")
                _note(got, f"import-C-{which}", shape.nbytes / run.total_s / 1e6)


def _note(got: dict, key: str, mb_s: float) -> None:
    got.setdefault(key, []).append(mb_s)
    print(f"{key} {mb_s:.1f}", flush=True)


def main() -> None:
    old_src, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 4
    peers, got = _peers.install(), {}
    try:
        export_b(peers, old_src, rounds, got)
        import_c(peers, old_src, rounds, got)
    finally:
        os.environ.pop("PYTHONPATH", None)
    print(json.dumps({k: round(statistics.median(v), 1) for k, v in got.items()}))


if __name__ == "__main__":
    main()
