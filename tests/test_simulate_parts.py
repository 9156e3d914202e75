"""The simulation's parts against independent arithmetic: the slowest-of-N table against a
brute-force draw of N ranks, the fleet's clocks against the exponential's mean, the tiers'
fluid sharing against hand-worked figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stoker.simulate._fleet import Fleet
from stoker.simulate._stragglers import Stragglers
from stoker.simulate._tiers import RestartLoad, Window, extra_stall_per_cycle_s, share, stall_s


@pytest.mark.parametrize("kind", ["lognormal", "exponential"])
@pytest.mark.parametrize("ranks", [1, 8, 512])
def test_the_slowest_of_n_table_matches_drawing_every_rank(kind: str, ranks: int) -> None:
    cv, compute = 0.05, 2.0
    table = Stragglers(kind, cv, ranks, compute)
    rng = np.random.default_rng(1)
    draws = 20_000
    if kind == "lognormal":
        sigma = math.sqrt(math.log1p(cv * cv))
        x = np.exp(sigma * rng.standard_normal((draws, ranks)) - sigma * sigma / 2)
    else:
        x = 1 - cv + cv * rng.exponential(1.0, (draws, ranks))
    brute = float((x.max(axis=1) - 1).mean() * compute)
    assert table.mean_s == pytest.approx(brute, rel=0.03, abs=2e-3)
    # one rank has the mean step: no wait on average
    if ranks == 1:
        assert abs(table.mean_s) < 0.002


def test_more_ranks_wait_longer_and_none_waits_not_at_all() -> None:
    means = [Stragglers("lognormal", 0.01, n, 1.0).mean_s for n in (8, 512, 16384)]
    assert means[0] < means[1] < means[2]
    off = Stragglers("none", 0.01, 16384, 1.0)
    assert off.mean_s == 0 and off.mean_excess_s(np.random.default_rng(0), 1000) == 0


def test_a_segments_mean_is_drawn_exactly_or_from_its_normal_limit() -> None:
    st = Stragglers("lognormal", 0.02, 1024, 1.0)
    rng = np.random.default_rng(3)
    small = [st.mean_excess_s(rng, 500) for _ in range(200)]
    large = [st.mean_excess_s(rng, 50_000) for _ in range(200)]
    assert np.mean(small) == pytest.approx(st.mean_s, rel=0.01)
    assert np.mean(large) == pytest.approx(st.mean_s, rel=0.01)
    assert np.std(large) < np.std(small)  # more steps, a tighter mean


def test_the_fleets_first_failure_comes_at_the_mtbf_over_the_parts() -> None:
    gpus, nodes, mtbf = 1024, 128, 1e6
    firsts = []
    for seed in range(400):
        fleet = Fleet(gpus, nodes, mtbf, math.inf, 1.0, np.random.default_rng(seed))
        firsts.append(fleet.next_failure()[0])
    assert np.mean(firsts) == pytest.approx(mtbf / gpus, rel=0.1)


def test_weibull_below_one_fails_new_parts_sooner_with_the_same_mean() -> None:
    rng = np.random.default_rng(0)
    young = Fleet(50_000, 1, 1000.0, math.inf, 0.7, rng)
    exp = Fleet(50_000, 1, 1000.0, math.inf, 1.0, rng)
    assert young.next_s[:50_000].mean() == pytest.approx(1000.0, rel=0.03)
    # more of them fail within the first 10 % of the mean
    assert (young.next_s < 100).mean() > 1.5 * (exp.next_s < 100).mean()


def test_a_swap_renews_the_vm_and_its_gpus_only() -> None:
    fleet = Fleet(16, 2, 100.0, 100.0, 1.0, np.random.default_rng(5))
    before = fleet.next_s.copy()
    fleet.swap(1, now=1000.0)
    assert (fleet.next_s[8:16] >= 1000).all() and fleet.next_s[17] >= 1000
    assert (fleet.next_s[:8] == before[:8]).all() and fleet.next_s[16] == before[16]
    assert fleet.node_of(9) == 1 and fleet.node_of(16) == 0 and fleet.node_of(17) == 1


def test_the_fluid_share_and_the_stall() -> None:
    assert share(10.0, 4.0, 4.0) == 1.0
    assert share(10.0, 10.0, 10.0) == 0.5
    assert share(None, 1e9) == 1.0
    assert stall_s(100.0, 10.0, 4.0) == 6.0  # 10 s to read, 4 s of compute hide it in part
    assert stall_s(100.0, None, 4.0) == 0.0


def test_a_save_beside_the_reads_stalls_them_for_as_long_as_it_runs() -> None:
    # reads need exactly the ideal step's worth; a write takes half the tier for 10 s alone,
    # so 20 s at half speed: every step in it takes twice as long
    extra = extra_stall_per_cycle_s(
        [Window("write", 10.0, 0.5)],
        bytes_per_step=10.0,
        read_bps=10.0,
        ideal_step_s=1.0,
        planned_stall_s=0.0,
        cycle_s=100.0,
    )
    assert extra == pytest.approx(20.0 / 2.0 * 1.0)  # 10 steps, each 1 s longer
    # a window past the cycle counts the cycle only
    capped = extra_stall_per_cycle_s(
        [Window("upload", 500.0, 0.5)], 10.0, 10.0, 1.0, 0.0, cycle_s=100.0
    )
    assert capped == pytest.approx(100.0 / 2.0)


def test_every_vm_loading_at_once_is_the_shared_limit_over_the_total() -> None:
    load = RestartLoad(total_bytes=64e12, per_vm_bytes=1e12, shared_bps=15e9, vm_bps=10e9)
    assert load.baseline_s == pytest.approx(100.0)
    assert load.contended_s == pytest.approx(64e12 / 15e9)
    local = RestartLoad(64e12, 1e12, None, 10e9)
    assert local.contended_s == local.baseline_s
