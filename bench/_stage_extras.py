"""The stage benchmark's two extras: how much a resumed import re-sends after ``kill -9`` half
way, and the peak memory of a 1,000,000-key listing streamed into the manifest."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from _peers import BENCH, Azurite
from _stage_data import Shape
from _stage_tools import (
    SRC_CONTAINER,
    Tools,
    allocated_bytes,
    check_local_copy,
    drop_caches,
    fresh_dir,
    run_tool,
)

RESUME_KILL_AT = 0.5
LISTING_KEYS, LISTING_BATCH = 1_000_000, 5000


def _log(shape: Shape, what: str, rep: int) -> Path:
    return BENCH / "logs" / f"{shape.name}-{what}-{rep}"


def measure_resume(shape: Shape, data: Path, az: Azurite, tools: Tools) -> dict:
    """Kill -9 a stoker import at ~half the bytes, re-run it, count what the re-run fetched."""
    dst = fresh_dir("resume")
    argv, env = tools.stoker(f"az://{SRC_CONTAINER}/{shape.name}", str(dst))
    drop_caches()
    first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    polled = _wait_for_bytes(first, dst, int(shape.nbytes * RESUME_KILL_AT))
    first.send_signal(signal.SIGKILL)
    first.wait()
    on_disk = allocated_bytes(dst)
    second = run_tool(argv, env, _log(shape, "resume-second", 0))
    summary = json.loads(second.stdout.strip().splitlines()[-1])
    needed = shape.nbytes - on_disk  # what the first run had not written yet
    resent = max(0, summary["bytes_fetched"] - needed)
    result = {
        "killed_at_bytes": polled,
        "on_disk_after_kill": on_disk,
        "second_fetched": summary["bytes_fetched"],
        "second_bytes_copied": summary["bytes_copied"],
        "second_files_skipped": summary["files_skipped"],
        "resent_bytes": resent,
        "resent_fraction": resent / shape.nbytes,
        "problem": check_local_copy(shape, data, dst),
    }
    print(f"  resume: {json.dumps(result)}", flush=True)
    shutil.rmtree(dst, ignore_errors=True)
    return result


def _wait_for_bytes(proc: subprocess.Popen, root: Path, threshold: int) -> int:
    while proc.poll() is None:
        now = allocated_bytes(root)
        if now >= threshold:
            return now
        time.sleep(0.02)
    raise RuntimeError("the import finished before it could be killed half way")


# --------------------------------------------------------------------------------- listing
LISTING = r"""
import json, sys, tempfile, time
from pathlib import Path
from stoker.stage._manifest import Manifest
from stoker.store import ObjectInfo
n, batch = int(sys.argv[1]), int(sys.argv[2])
with tempfile.TemporaryDirectory() as tmp:
    m = Manifest(Path(tmp) / "stage.sqlite")
    run = m.start_run()
    files = pending = 0
    record_s = done_s = 0.0
    for first in range(0, n, batch):
        t = time.perf_counter()
        listed = m.record_listing([ObjectInfo(f"shard-{i // 10000:04d}/sample-{i:08d}.jpg",
                                              100_000 + i % 997, f"0x8DC{i:012X}", None)
                                   for i in range(first, min(n, first + batch))], run)
        record_s += time.perf_counter() - t
        files += len(listed.pending) + listed.done_files
        pending += len(listed.pending)
        t = time.perf_counter()
        for key, *_ in listed.pending:
            m.object_done(key, None)
        done_s += time.perf_counter() - t
    m.close()
print(json.dumps({"files": files, "pending": pending, "record_s": record_s, "done_s": done_s}))
"""


def measure_listing(keys: int) -> dict:
    """Peak RSS and times of a listing of ``keys`` keys streamed into the manifest."""
    run = run_tool(
        [sys.executable, "-c", LISTING, str(keys), str(LISTING_BATCH)],
        None,
        BENCH / "logs" / "listing",
    )
    floor = run_tool(
        [sys.executable, "-c", "import stoker.stage, stoker.store._azure, obstore"],
        None,
        BENCH / "logs" / "import-floor",
    )
    result = {
        "keys": keys,
        "rss_mib": run.rss_mib,
        "import_rss_mib": floor.rss_mib,
        "import_s": floor.seconds,
        **json.loads(run.stdout),
    }
    print(f"  listing: {json.dumps(result)}", flush=True)
    return result
