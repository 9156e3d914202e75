"""How busy the machine was: benchmarks report the CPU that other processes took meanwhile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PRIME_GIB = 3.0  # more than any one run here writes (shape A: 2 GiB)


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine since boot, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def own_ticks() -> int:
    """CPU ticks used by this process and its waited-for children (the tools, the emulators)."""
    t = os.times()
    return int((t.user + t.system + t.children_user + t.children_system) * os.sysconf("SC_CLK_TCK"))


def kernel_thread_ticks() -> int:
    """CPU ticks the kernel's own threads (children of kthreadd: the flusher kworkers among
    them) have used, as far as those alive now say. A process that leaves its dirty pages to
    the kernel has them written back by these threads, on nobody's rusage; one that syncs its
    own files does that work itself, in its own system time."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            after_name = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # (a thread that exited meanwhile)
            continue
        if after_name[1] == "2":  # ppid: kthreadd
            total += int(after_name[11]) + int(after_name[12])  # utime, stime
    return total


def cpu_mark() -> tuple[int, int, int]:
    return (*cpu_ticks(), own_ticks())


def load_since(start: tuple[int, int, int]) -> dict:
    """The machine's load over a benchmark that began at ``start`` (a :func:`cpu_mark`): the
    share of its CPU that other processes took, and the 1-minute load average at the end."""
    return {"others_cpu": others_cpu_share(start), "loadavg_1m": os.getloadavg()[0]}


def others_cpu_share(start: tuple[int, int, int]) -> float:
    """Share of the machine's CPU that processes outside this benchmark used since ``start``."""
    busy, total = cpu_ticks()
    mine = own_ticks() - start[2]
    return max(0.0, (busy - start[0] - mine) / max(1, total - start[1]))


def page_cache_fill(folder: Path, nbytes: int = 1 << 30, pause_s: float = 12.0) -> dict:
    """MB/s of one process writing ``nbytes`` into the page cache (a file in ``folder``, removed
    before it reaches the disk): into memory freed just before, and into memory freed
    ``pause_s`` before. Where the VM hands free memory back to its host (virtio-balloon free
    page reporting), the second is many times slower: every process that takes fresh memory
    (a page cache fill, new buffers) pays for it, by how long ago another process freed it."""
    import time

    piece = os.urandom(16 << 20)

    def write(path: Path) -> float:
        start = time.perf_counter()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for offset in range(0, nbytes, len(piece)):
                os.pwrite(fd, piece, offset)
        finally:
            os.close(fd)
        took = time.perf_counter() - start
        path.unlink()
        return nbytes / took / 1e6

    folder.mkdir(parents=True, exist_ok=True)
    write(folder / "fill-0")  # frees nbytes of memory the next write can take at once
    recycled = write(folder / "fill-1")
    time.sleep(pause_s)
    returned = write(folder / "fill-2")
    return {"recycled_mb_s": recycled, "returned_mb_s": returned, "pause_s": pause_s}


def prime_memory(gib: float = PRIME_GIB) -> None:
    """Touch ``gib`` GiB in a child process that exits at once, so that the next process finds
    that much free memory the host still backs. This VM hands memory freed ~2 s ago back to its
    host (see page_cache_fill), so a tool's fresh pages (its buffers, the page cache it fills)
    cost it several times the system time by how long ago someone freed them: the tool that
    wrote sooner after the last run's files were deleted paid less (profiles of the same
    import: the copy into the page cache 0.09 to 2.6 s by round). Called before every run, it
    gives each tool the start a VM whose memory is not handed back gives all of them."""
    if gib > 0:
        code = f"b'\\1' * {int(gib * (1 << 30))}"  # (bytes filled: every page touched)
        subprocess.run([sys.executable, "-c", code], check=True)
