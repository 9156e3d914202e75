"""Goodput from a renewal model that holds at any MTBF. Pure functions, seconds throughout.

The run alternates stretches of training and restarts. Failures are exponential with rate
``1/M`` and strike at any moment: during training, during a save, during a restart. A stretch
does ``tau`` of work, then blocks ``C`` to save, again and again; a save is safe (a restart can
load it) ``L`` after its blocking ends (an async save still being written; 0 when synchronous).
A failure costs everything since the last safe save, and a restart that needs ``R`` of quiet
time (a failure during it starts it again).

Derivation (renewal-reward, one cycle = one stretch that ends in a failure, plus its restart):
- the stretch lasts ``F ~ Exp(1/M)``; save ``k`` is safe when ``F >= k (tau + C) + L``, so the
  work kept is ``tau * sum_k P(F >= k P + L) = tau e^{-L/M} / (e^{P/M} - 1)``, ``P = tau + C``;
- a restart that must run ``R`` uninterrupted takes ``M (e^{R/M} - 1)`` on average, so the cycle
  lasts ``M + M (e^{R/M} - 1) = M e^{R/M}``;
- goodput (work kept / wall clock) = ``(tau / M) e^{-(L + R)/M} / (e^{(tau + C)/M} - 1)``.

With ``L = 0`` this is Daly's expected wall time per segment, ``M e^{R/M} (e^{(tau+C)/M} - 1)``
(J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps",
Future Generation Computer Systems 22 (2006) 303-312, doi:10.1016/j.future.2004.11.016).
Setting its derivative in ``tau`` to zero gives ``e^{(tau+C)/M} (1 - tau/M) = 1``: the optimum
interval ``M (1 + W0(-e^{-(1 + C/M)}))`` (Lambert's W), independent of ``R`` and ``L``; Daly's
higher-order estimate (reliability.daly_interval) is its series.

The first-order form (reliability.waste_fraction, Young 1974) is kept only where it is within
0.5 % of this one: it is the one a reader can check by hand, and it is exact enough for jobs
that fail every few hours. At a job MTBF near the save and restart times it is not (it clamps
to zero goodput where the run still makes progress).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import reliability as rel

FIRST_ORDER_TOLERANCE = 0.005  # relative: the first-order goodput is used within 0.5 %


@dataclass(frozen=True)
class Renewal:
    """What one checkpoint interval buys, as shares of the wall clock."""

    goodput: float  # training kept / wall clock
    checkpoint_share: float  # blocking on saves, for the training kept
    failure_share: float  # rework, restarts and saves lost to failures
    first_order: bool  # True: the figures are Young's first-order form (within 0.5 %)
    exact_goodput: float  # the renewal model's, whichever form is used

    def wall_s(self, training_s: float) -> float:
        """Wall clock for ``training_s`` of nominal training (steps x their time, no saves)."""
        return training_s / self.goodput

    def training_s(self, wall_s: float) -> float:
        """Nominal training done in ``wall_s`` of wall clock: ``wall_s``'s inverse."""
        return wall_s * self.goodput


def exact_goodput(
    interval_s: float, blocking_s: float, mtbf_s: float, restart_s: float, in_flight_s: float = 0.0
) -> float:
    """Training kept / wall clock, exponential failures at any point (the module's derivation)."""
    if interval_s <= 0:
        return 0.0
    x = (interval_s + blocking_s) / mtbf_s
    lost = (in_flight_s + restart_s) / mtbf_s
    if x > 700 or lost > 700:  # e^x overflows: every stretch fails before its first save
        return 0.0
    return (interval_s / mtbf_s) * math.exp(-lost) / math.expm1(x)


def renewal(
    interval_s: float, blocking_s: float, mtbf_s: float, restart_s: float, in_flight_s: float = 0.0
) -> Renewal:
    """The goodput of saving every ``interval_s`` of training: the first-order form where it is
    within 0.5 % of the renewal model, the renewal model elsewhere."""
    exact = exact_goodput(interval_s, blocking_s, mtbf_s, restart_s, in_flight_s)
    simple = 1 - rel.waste_fraction(interval_s, blocking_s, mtbf_s, restart_s, in_flight_s)
    first = exact > 0 and abs(simple - exact) <= FIRST_ORDER_TOLERANCE * exact
    return split(simple if first else exact, interval_s, blocking_s, first, exact)


def split(
    goodput: float,
    interval_s: float,
    blocking_s: float,
    first_order: bool = False,
    exact: float | None = None,
) -> Renewal:
    """A goodput's wall clock in its three shares: the plan's step and run are built from this,
    so its goodput and the run's effective training fraction cannot disagree."""
    # Kept training blocks C for every tau of it; the rest of the wall clock is the failures'.
    share = goodput * blocking_s / interval_s if interval_s > 0 else 0.0
    failures = max(0.0, 1 - goodput - share)
    return Renewal(goodput, share, failures, first_order, goodput if exact is None else exact)


def optimal_interval(blocking_s: float, mtbf_s: float) -> float:
    """The interval that maximises the renewal goodput: ``M (1 + W0(-e^{-(1 + C/M)}))``, found as
    the root x in (0, 1) of ``e^{x + c} (1 - x) = 1`` (x = tau/M, c = C/M) by bisection; the
    function falls all the way, so the root is unique."""
    c = blocking_s / mtbf_s
    if c <= 0:
        return 0.0

    def f(x: float) -> float:  # e^{x+c}(1-x) - 1, without cancelling when x and c are tiny
        return math.expm1(x + c) * (1 - x) - x

    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return mtbf_s * (lo + hi) / 2


def beyond_checkpointing(blocking_s: float, mtbf_s: float, restart_s: float) -> bool:
    """True where the job fails more often than it can restart and save once: no interval
    keeps much of the run, and the fix is elsewhere (restart, save time, failure rate)."""
    return mtbf_s < restart_s + blocking_s
