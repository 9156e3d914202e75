"""``stoker stage`` again over a 2,000-file tree already at the destination: the sync target
(< 2 s and 0 bytes moved unchanged; one more ``--include`` moves only the new files). Run by
``bench/stage_bench.py --sync``; saved as ``stage-sync``, rendered by _render_stage_sync."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _machine import cpu_mark, load_since
from _peers import BENCH, ROOT, Azurite

TARGET_S = 2.0
REPEATS = 3  # the unchanged re-run, each beside the CLI's bare start-up


def _median(runs: list[dict]) -> dict:
    """The run whose seconds are the median (its other fields with it)."""
    return sorted(runs, key=lambda r: r["s"])[len(runs) // 2]


SYNC_FILES, SYNC_NEW = 2000, 200  # the unchanged tree, and what a wider --include adds


def measure_sync() -> dict:
    """``stoker stage`` run again over a 2,000-file tree that is already at the destination
    (the real CLI, a process per run, as a user runs it): with its manifest, without it (a
    tree another tool copied, or a lost manifest), and with one more ``--include`` pattern,
    which should move only the new files. Local to local, and local to Blob (Azurite)."""
    root = BENCH / "sync"
    shutil.rmtree(root, ignore_errors=True)
    src = root / "src"
    rng = random.Random(20261202)
    for i in range(SYNC_FILES + SYNC_NEW):
        folder = src / ("new" if i >= SYNC_FILES else f"d{i % 20:02d}")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:05d}.bin").write_bytes(rng.randbytes(rng.randint(1 << 10, 64 << 10)))
    old = time.time() - 60  # written a minute ago (Blob's times are whole seconds)
    for path in src.rglob("*.bin"):
        os.utime(path, (old, old))
    new_bytes = sum(p.stat().st_size for p in (src / "new").iterdir())
    stoker = str(Path(sys.executable).parent / "stoker")
    # stoker's bytecode, as an installed package has it: under PYTHONDONTWRITEBYTECODE (set on
    # the machines here) an editable install compiles every module it imports in every run, and
    # that was most of an unchanged sync's time (0.6 s of CPU per process, profiled).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], check=True)
    rows = []
    mark = cpu_mark()

    def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
        import resource

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
        seconds = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        return seconds, cpu, done.stdout

    def run(*args: str, env: dict[str, str]) -> dict:
        seconds, cpu, out = timed([stoker, "stage", str(src), *args, "--json"], env)
        summary = json.loads(out.splitlines()[-1])
        return {
            "s": seconds,
            "cpu_s": cpu,
            "bytes": summary["bytes_copied"],
            "files": summary["files_copied"],
        }

    def unchanged(args: list[str], env: dict[str, str]) -> tuple[dict, dict]:
        """The unchanged re-run REPEATS times, each after ``stoker --help`` (the CLI's start-up
        alone: the floor of any stoker process on this machine as loaded now); the median of
        each."""
        runs, floors = [], []
        for _ in range(REPEATS):
            seconds, cpu, _ = timed([stoker, "--help"], env)
            floors.append({"s": seconds, "cpu_s": cpu})
            runs.append(run(*args, env=env))
        return _median(runs), _median(floors)

    with Azurite() as az:
        az.create_container("sync")
        env = {
            **os.environ,
            "AZURE_STORAGE_CONNECTION_STRING": az.connection_string,
            "XDG_CACHE_HOME": str(root / "cache"),
        }
        for name, dst, state in (
            ("local -> local", str(root / "dst"), root / "dst" / ".stoker"),
            ("local -> Blob", f"{az.endpoint}/sync/tree", root / "cache" / "stoker"),
        ):
            old_only = ["--include", "d*"]
            first = run(dst, *old_only, env=env)
            again, floor = unchanged([dst, *old_only], env)
            shutil.rmtree(state)
            lost = run(dst, *old_only, env=env)
            wider = run(dst, *old_only, "--include", "new/*", env=env)
            rows.append(
                {
                    "path": name,
                    "first": first,
                    "again": again,
                    "start_up": floor,
                    "no_manifest": lost,
                    "wider": wider,
                    "new_bytes": new_bytes,
                }
            )
            print(f"  sync: {json.dumps(rows[-1])}", flush=True)
    shutil.rmtree(root, ignore_errors=True)
    return {
        "files": SYNC_FILES,
        "new_files": SYNC_NEW,
        "target_s": TARGET_S,
        "repeats": REPEATS,
        "rows": rows,
        "load": load_since(mark),
    }
