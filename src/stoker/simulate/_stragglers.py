"""Stragglers: every step waits for the slowest of N ranks.

One rank's compute time is ``compute x X`` with ``E[X] = 1`` and spread ``cv`` (lognormal, or a
shifted exponential for a heavier tail). The step takes the largest of N such draws, so its
excess over the plan's step is ``compute x (max X - 1)``. The largest of N has the CDF
``F(x)^N``: its quantile at ``p`` is F's quantile at ``p^(1/N)``, so a table of quantiles on a
grid of ``p`` is built once, and the steps of a whole segment are drawn from it in one numpy
call, never one Python call per rank or per step.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

GRID = 4096
# Past this many steps a segment's mean excess is drawn from its normal limit (CLT).
EXACT_STEPS = 1024


class Stragglers:
    def __init__(self, kind: str, cv: float, ranks: int, compute_s: float) -> None:
        # one rank waits for no one: its spread averages out to the plan's step
        self.active = kind != "none" and cv > 0 and ranks > 1
        p = (np.arange(GRID) + 0.5) / GRID
        # 1 - p^(1/N), computed without losing digits when N is large
        upper = -np.expm1(np.log(p) / max(1, ranks))
        if not self.active:
            excess = np.zeros(GRID)
        elif kind == "lognormal":
            sigma = math.sqrt(math.log1p(cv * cv))
            nd = NormalDist()
            z = np.array([nd.inv_cdf(1.0 - float(u)) for u in np.clip(upper, 1e-300, 1.0)])
            excess = np.exp(sigma * z - sigma * sigma / 2) - 1.0
        else:  # exponential: X = 1 - cv + cv * Exp(1)
            excess = -cv + cv * -np.log(np.clip(upper, 1e-300, 1.0))
        self.table_s = excess * compute_s  # seconds a step waits, at each grid probability
        self.mean_s = float(self.table_s.mean())
        self.sd_s = float(self.table_s.std())

    def mean_excess_s(self, rng: np.random.Generator, steps: float) -> float:
        """The mean wait per step over ``steps`` steps, drawn."""
        if not self.active or steps < 1:
            return self.mean_s if self.active else 0.0
        n = int(steps)
        if n > EXACT_STEPS:
            return float(rng.normal(self.mean_s, self.sd_s / math.sqrt(n)))
        idx = rng.integers(0, GRID, n)
        return float(self.table_s[idx].mean())
