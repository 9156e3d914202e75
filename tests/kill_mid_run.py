"""A copy killed (-9) mid-run, for the stage tests that resume one (test_stage_faults.py,
test_stage_durability.py): what has landed on disk, and the kill once enough has."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def landed_bytes(root: Path) -> int:
    """Bytes on disk under ``root`` (allocated blocks: partial files are sparse until written),
    stoker's state directory left out."""
    total = 0
    for path in root.rglob("*"):
        if ".stoker" in path.relative_to(root).parts[:1]:
            continue
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            total += min(st.st_blocks * 512, st.st_size)
    return total


def kill_when(
    proc: subprocess.Popen,
    dst: Path,
    enough: Callable[[int], bool],
    timeout_s: float,
    poll_s: float,
) -> int:
    """SIGKILL ``proc`` once ``enough(landed bytes)`` holds (``enough`` may also assert what it
    sees mid-run), or at ``timeout_s``; returns the bytes landed. Fails the test unless the copy
    was still running when killed, so that the kill really came mid-run."""
    landed = 0
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and proc.poll() is None:
            if dst.exists():
                landed = landed_bytes(dst)
                if enough(landed):
                    break
            time.sleep(poll_s)
        alive = proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        out = proc.communicate(timeout=30)[0].decode(errors="replace")
    assert alive, f"the copy ended before it could be killed (landed {landed} B): {out[-2000:]}"
    assert proc.returncode == -signal.SIGKILL
    return landed
