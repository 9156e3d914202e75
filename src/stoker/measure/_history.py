"""Cumulative figures sampled over a run (a ledger's totals, a loader's steps and bytes), for
the report's charts over time. Bounded: when full, every other point goes and the spacing
doubles, so a week-long run keeps as few points as a minute-long one."""

from __future__ import annotations

import time

MAX_POINTS = 2048


class History:
    """``offer(values)`` keeps ``(seconds since the first point, *values)`` at most once per
    ``every_s``."""

    __slots__ = ("every_s", "points", "_t0", "_next")

    def __init__(self, every_s: float = 0.5) -> None:
        self.every_s = every_s
        self.points: list[tuple[float, ...]] = []
        self._t0 = time.perf_counter()
        self._next = 0.0

    def offer(self, *values: float, force: bool = False) -> None:
        if not self.points:  # time counts from the first point: the run's own start
            self._t0 = time.perf_counter()
        t = time.perf_counter() - self._t0
        if t < self._next and not force:
            return
        self.points.append((t, *values))
        self._next = t + self.every_s
        if len(self.points) > MAX_POINTS:
            self.points = self.points[1::2]
            self.every_s *= 2
