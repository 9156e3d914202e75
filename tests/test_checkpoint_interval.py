"""checkpoint_interval is the plan's optimum (stoker.plan.optimal_interval), not Daly's series:
the two part where a save is long against the MTBF, and there the series gives up."""

from __future__ import annotations

import math

import pytest

from stoker.checkpoint import checkpoint_interval
from stoker.errors import CheckpointError
from stoker.plan import optimal_interval, renewal
from stoker.plan.reliability import daly_interval


def _goodput(interval_s: float, blocking_s: float, mtbf_s: float) -> float:
    return renewal(interval_s, blocking_s, mtbf_s, restart_s=0.0).exact_goodput


def test_a_long_save_gets_the_renewal_optimum_where_dalys_series_gives_up() -> None:
    # A save that blocks 4000 s on a job that fails every 30 min: Daly's series returns M itself.
    blocking, mtbf = 4000.0, 1800.0
    got = checkpoint_interval(blocking, mtbf="30min")
    assert got == optimal_interval(blocking, mtbf)
    assert daly_interval(blocking, mtbf) == mtbf and not math.isclose(got, mtbf, rel_tol=0.01)
    # It is the maximum: the goodput falls on both sides of it, and Daly's M keeps less.
    best = _goodput(got, blocking, mtbf)
    assert best > _goodput(got * 0.95, blocking, mtbf)
    assert best > _goodput(got * 1.05, blocking, mtbf)
    assert best > _goodput(mtbf, blocking, mtbf)


def test_the_optimum_solves_the_first_order_condition() -> None:
    # d/dtau of the renewal goodput is zero where e^{(tau+C)/M} (1 - tau/M) = 1.
    blocking, mtbf = 300.0, 1800.0
    tau = checkpoint_interval(blocking, mtbf=mtbf)
    assert math.exp((tau + blocking) / mtbf) * (1 - tau / mtbf) == pytest.approx(1, abs=1e-9)


def test_never_sooner_than_a_save_becomes_safe_and_an_mtbf_is_needed() -> None:
    assert checkpoint_interval(10, 5000, mtbf="3h") == 5000
    with pytest.raises(CheckpointError, match="mtbf"):
        checkpoint_interval(10, 60)
