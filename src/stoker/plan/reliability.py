"""Checkpoint interval and goodput from failure rates. Pure functions, seconds throughout.

Young (1974): the period that minimises expected waste is ``sqrt(2 C M)`` for a checkpoint
that blocks for ``C`` on a job whose mean time between failures is ``M``. Daly (2006) refines
it to ``sqrt(2 C M) (1 + sqrt(C / 2M) / 3 + (C / 2M) / 9) - C`` for ``C < 2M``, else ``M``.

Expected share of wall time lost (first order in 1/M):
    waste = C / T  +  (T / 2 + L + R) / M
blocking per period, plus, per failure, half a period of lost work, the extra work lost while
an async checkpoint was still being written (L), and the restart (R).
"""

from __future__ import annotations

import math


def job_mtbf(gpu_mtbf_s: float, gpus: int) -> float:
    """Failures are independent per GPU, so a job of N GPUs fails N times as often."""
    return gpu_mtbf_s / gpus


def young_interval(blocking_s: float, mtbf_s: float) -> float:
    return math.sqrt(2 * blocking_s * mtbf_s)


def daly_interval(blocking_s: float, mtbf_s: float) -> float:
    if blocking_s >= 2 * mtbf_s:
        return mtbf_s
    ratio = blocking_s / (2 * mtbf_s)
    return math.sqrt(2 * blocking_s * mtbf_s) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - blocking_s


def waste_fraction(
    interval_s: float, blocking_s: float, mtbf_s: float, restart_s: float, in_flight_s: float = 0.0
) -> float:
    """Share of wall-clock time not spent on useful training (checkpoints and failures)."""
    if interval_s <= 0:
        return 1.0
    waste = blocking_s / interval_s + (interval_s / 2 + in_flight_s + restart_s) / mtbf_s
    return min(1.0, waste)


def best_interval(blocking_s: float, mtbf_s: float, floor_s: float = 0.0) -> float:
    """Daly's interval, but never shorter than ``floor_s`` (an async checkpoint must finish
    writing before the next one starts)."""
    return max(daly_interval(blocking_s, mtbf_s), floor_s)
