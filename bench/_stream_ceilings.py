"""What this machine allows the stream benchmark at best: the disk, one core's memory copy, and
torch's DataLoader itself fed from memory (the per-sample path with no storage at all)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import numpy as np

GiB = 1 << 30


def disk_read_ceiling(folder: Path, streams: int = 1) -> float:
    """MB/s of ``dd if=FILE of=/dev/null bs=16M iflag=direct`` over a 1 GiB file in ``folder``,
    as one stream or as ``streams`` dd processes at once, each over its own part of the file
    (the loaders keep several reads in flight, which this disk may serve faster than one)."""
    path = folder / "dd.bin"
    if not path.exists() or path.stat().st_size != GiB:
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["dd", "if=/dev/urandom", f"of={path}", "bs=16M", "count=64", "conv=fsync"],
            check=True,
            capture_output=True,
        )
    part = 64 // streams  # 16 MiB blocks in each stream's share
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            ["dd", f"if={path}", "of=/dev/null", "bs=16M", "iflag=direct"]
            + ([f"skip={k * part}", f"count={part}"] if streams > 1 else []),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for k in range(streams)
    ]
    if any(proc.wait() for proc in procs):
        raise RuntimeError(f"dd over {path} failed")
    return GiB / (time.perf_counter() - start) / 1e6


def memory_ceiling() -> float:
    """MB/s of one core copying 1 GiB in memory (numpy), best of 3."""
    src = np.ones(GiB, dtype=np.uint8)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return GiB / best / 1e6
