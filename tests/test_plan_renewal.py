"""The renewal goodput (plan/_renewal.py): against a direct Monte Carlo of its own assumptions,
its optimum against a scan, the first-order form only where it holds, one split for goodput and
the run, the regime no interval can save, and stoker's simulator at a short MTBF."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest

from sim_jobs import seventy_b_job
from stoker.catalog import load_catalog
from stoker.errors import SpecError
from stoker.plan import _renewal as rn
from stoker.plan import make_plan, parse_spec
from stoker.plan import reliability as rel
from stoker.simulate import CLOSED_FORM, simulate

MIN, HOUR = 60.0, 3600.0
EXAMPLES = Path(__file__).parent.parent / "examples"


def monte_carlo(tau, c, m, r, latency, cycles=200_000, seed=7):
    """Stretches that end in a failure, each followed by a restart that a failure starts over:
    the work kept over the time spent, drawn, not derived."""
    rng = np.random.default_rng(seed)
    f = rng.exponential(m, cycles)
    kept = tau * np.maximum(0, np.floor((f - latency) / (tau + c)))
    spent = f.copy()
    pending = np.ones(cycles, dtype=bool)
    while pending.any():  # each restart retries until R passes without a failure
        gap = rng.exponential(m, pending.sum())
        ok = gap >= r
        spent[pending] += np.where(ok, r, gap)
        idx = np.flatnonzero(pending)
        pending[idx[ok]] = False
    return kept.sum() / spent.sum()


@pytest.mark.parametrize(
    ("tau", "c", "m", "r", "latency"),
    [
        (9 * MIN, 5 * MIN, 15 * MIN, 10 * MIN, 0.0),  # Daly's hardest case: M = 15 min
        (20 * MIN, 30.0, 30 * MIN, 10 * MIN, 2 * MIN),  # 100k GPUs: a failure every 30 min
        (60 * MIN, 10.0, 3 * HOUR, 10 * MIN, 5 * MIN),  # Llama 3 scale
    ],
)
def test_exact_goodput_matches_a_monte_carlo_of_its_assumptions(tau, c, m, r, latency):
    drawn = monte_carlo(tau, c, m, r, latency)
    assert rn.exact_goodput(tau, c, m, r, latency) == pytest.approx(drawn, rel=0.01)


@pytest.mark.parametrize("m", [15 * MIN, 1 * HOUR, 6 * HOUR, 24 * HOUR])
def test_the_optimum_maximises_the_exact_goodput_and_daly_is_its_series(m):
    c, r = 5 * MIN, 10 * MIN
    best = rn.optimal_interval(c, m)
    scan = np.linspace(best * 0.2, best * 3, 4001)
    top = scan[np.argmax([rn.exact_goodput(t, c, m, r) for t in scan])]
    assert best == pytest.approx(top, rel=2e-3)
    # e^{(tau+C)/M} (1 - tau/M) = 1 at the optimum (the derivative's zero)
    assert math.exp((best + c) / m) * (1 - best / m) == pytest.approx(1.0, abs=1e-9)
    assert rel.daly_interval(c, m) == pytest.approx(best, rel=0.005)


def test_first_order_form_is_kept_only_within_half_a_percent():
    # A failure every 3 h, a 10 s save, 2 min restarts: first order holds (with 10 min restarts
    # it is already 0.7 % off).
    calm = rn.renewal(20 * MIN, 10.0, 3 * HOUR, 2 * MIN)
    assert calm.first_order
    assert calm.goodput == pytest.approx(1 - rel.waste_fraction(20 * MIN, 10.0, 3 * HOUR, 120))
    assert not rn.renewal(20 * MIN, 10.0, 3 * HOUR, 10 * MIN).first_order
    assert calm.goodput == pytest.approx(calm.exact_goodput, rel=rn.FIRST_ORDER_TOLERANCE)
    # A failure every 30 min: the first-order form is more than 0.5 % off, the exact one is used.
    busy = rn.renewal(10 * MIN, 30.0, 30 * MIN, 10 * MIN)
    simple = 1 - rel.waste_fraction(10 * MIN, 30.0, 30 * MIN, 10 * MIN)
    assert not busy.first_order and busy.goodput == busy.exact_goodput
    assert abs(simple - busy.exact_goodput) > rn.FIRST_ORDER_TOLERANCE * busy.exact_goodput
    # At a 15 min MTBF with 10 min restarts the first-order form clamps to nothing; the run
    # still makes a fifth of its progress.
    assert rel.waste_fraction(9 * MIN, 5 * MIN, 15 * MIN, 10 * MIN) == 1.0
    assert rn.renewal(9 * MIN, 5 * MIN, 15 * MIN, 10 * MIN).goodput == pytest.approx(0.2, abs=0.01)


def test_shares_add_up_and_the_wall_clock_is_their_inverse():
    r = rn.renewal(10 * MIN, 30.0, 30 * MIN, 10 * MIN, 60.0)
    assert r.goodput + r.checkpoint_share + r.failure_share == pytest.approx(1.0)
    assert r.checkpoint_share == pytest.approx(r.goodput * 30.0 / (10 * MIN))
    assert r.training_s(r.wall_s(1000.0)) == pytest.approx(1000.0)


def spec_of(name: str, **sections: dict) -> dict:
    import tomllib

    data = tomllib.loads((EXAMPLES / name).read_text())
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    return data


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


@pytest.mark.parametrize("gpu_mtbf", ["50000 h", "2000 h", "300 h", "100 h"])
def test_goodput_and_effective_training_fraction_agree_at_any_mtbf(cat, gpu_mtbf):
    p = make_plan(
        parse_spec(spec_of("pretrain-64vm.toml", reliability={"gpu_mtbf": gpu_mtbf})), cat
    )
    ck, step, run = p.checkpoints, p.step, p.run
    base = step.total_s - step.checkpoint_s  # compute + exposed + stall
    assert run.wall_s == pytest.approx(run.steps * base / ck.goodput)
    assert run.effective_training_fraction == pytest.approx(ck.goodput * step.compute_s / base)
    assert ck.waste_fraction == pytest.approx(1 - ck.goodput)
    assert 0 < ck.goodput <= ck.goodput_at_optimal + 1e-12


def test_a_job_failing_sooner_than_restart_plus_save_is_told_what_to_change(cat):
    # 512 GPUs at 20 h each: a failure every 2.3 min against 10 min restarts.
    p = make_plan(parse_spec(spec_of("pretrain-64vm.toml", reliability={"gpu_mtbf": "20 h"})), cat)
    warn = p.warnings[0]
    assert warn.startswith("the job fails every 2.34 min, sooner than a restart (10 min)")
    assert "no checkpoint interval can save this run" in warn
    assert "reliability.restart_time" in warn and 'checkpoints.mode = "async"' in warn
    assert 0 < p.checkpoints.goodput < 0.01
    calm = make_plan(parse_spec(spec_of("pretrain-64vm.toml")), cat)
    assert not any("no checkpoint interval can save" in w for w in calm.warnings)


def test_a_job_that_never_reaches_a_save_is_refused_naming_the_field(cat):
    data = spec_of("pretrain-64vm.toml", reliability={"gpu_mtbf": "1 s"})
    with pytest.raises(SpecError, match=r"^reliability\.gpu_mtbf: the job fails every 1\.95 ms"):
        make_plan(parse_spec(data), cat)


# 512 GPUs failing every 30 min (a 100,000-GPU job's MTBF) with 10 min restarts: the regime the
# first-order form got wrong. 20 days hold ~900 failures a run, so 20 seeded runs pin the mean.
SHORT = seventy_b_job("renewal-short-mtbf", gpu_mtbf="256 h")


@pytest.mark.parametrize(
    "checkpoints",
    [{}, {"mode": "sync", "tier": "blob"}, {"tier": "nvme", "interval": "5 min"}],
    ids=["async-auto", "sync-blob", "nvme-5min"],
)
def test_the_simulator_agrees_within_2_percent_at_a_30_minute_mtbf(checkpoints):
    job = copy.deepcopy(SHORT)
    job["checkpoints"] = checkpoints
    plan = make_plan(parse_spec(job), load_catalog())
    assert plan.checkpoints.job_mtbf_s == pytest.approx(30 * MIN)
    assert not rn.renewal(
        plan.checkpoints.interval_s,
        plan.checkpoints.blocking_s,
        plan.checkpoints.job_mtbf_s,
        plan.checkpoints.restart_s,
    ).first_order  # the regime where the first-order form does not hold
    sim = simulate(job, runs=20, seed=3, knobs=CLOSED_FORM, plan=plan)
    assert sim.goodput["p50"] == pytest.approx(plan.checkpoints.goodput, rel=0.02)
    assert sim.gpu_busy["p50"] == pytest.approx(plan.run.effective_training_fraction, rel=0.02)
