"""How busy the machine was: benchmarks report the CPU that other processes took meanwhile."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine since boot, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def own_ticks() -> int:
    """CPU ticks used by this process and its waited-for children (the tools, the emulators)."""
    t = os.times()
    return int((t.user + t.system + t.children_user + t.children_system) * os.sysconf("SC_CLK_TCK"))


def cpu_mark() -> tuple[int, int, int]:
    return (*cpu_ticks(), own_ticks())


def others_cpu_share(start: tuple[int, int, int]) -> float:
    """Share of the machine's CPU that processes outside this benchmark used since ``start``."""
    busy, total = cpu_ticks()
    mine = own_ticks() - start[2]
    return max(0.0, (busy - start[0] - mine) / max(1, total - start[1]))
