"""The plan's checkpoint efficiency (goodput: training kept / wall clock) against published
figures, issue 54. The intervals are held in tests/test_plan_published.py (Daly 2006 at 24 h,
6 h and 15 min); Daly gives his efficiencies only as plots, which are not read here.

Source: A. Kokolis, M. Kuchnik, J. Hoffman et al. (Meta), "Revisiting Reliability in
Large-Scale Machine Learning Research Clusters", HPCA 2025, https://arxiv.org/abs/2410.21680
(v1 2024-10-29), its section on estimating ETTR and Insight 10. What it states in text:
- RSC-1 fails 6.50 times per thousand node-days (8 A100s a node); the projected job MTTF at
  16,384 GPUs is 1.8 h.
- A single 16k-GPU job on RSC-1 has an expected ETTR of 0.7 with a 60 min checkpoint interval;
  "Moving to a 5 minute checkpoint interval would increase expected ETTR to 0.93 ... (assuming
  checkpoint writes are non-blocking)".
- The largest job RSC-1 can run (8,000 GPUs, half the cluster) reaches ETTR 0.9 with a 30 min
  checkpoint interval and 1 min of queueing after each failure.
- Job runs of 2,048-4,096 GPUs on RSC-1 show an average (measured) ETTR over 0.9 at the
  one-hour checkpoint interval the comparison assumes, with u0 = 5 min.
- A 100,000-GPU run at RSC-2's rate (2.34 per thousand node-days) needs checkpoint intervals
  and restart overhead of about 2 min to reach ETTR 0.9.
ETTR is "the ratio of productive runtime to the available wallclock time of a job run": the
plan's goodput. The paper's E[ETTR] is first order:
    (1 - N r_f (u0 + dt/2)) / (1 + w/dt),  N nodes, r_f failures per node-day,
u0 the restart overhead, dt the interval, w the blocking write (0: non-blocking). The 0.93
pins u0 to 4.5-5.6 min at 1.8 h (5 min, the value the paper assumes for its comparison).
Read 2026-12-07 through two stored secondary copies, the English PDF not being readable here:
G. Lockwood's annotated quotes (2025-06-19) and AI闲谈's section-by-section Chinese rendering,
which agree on every figure used.

How the figures map: N r_f is the plan's job MTBF (reliability.gpu_mtbf = 8 / r_f per GPU,
cluster.nodes = N); u0 plus any queueing is reliability.restart_time; dt is
checkpoints.interval; a 1 MB synchronous save (blocking well under a second) is the
non-blocking w = 0. The plan's goodput is the exact renewal model (plan/_renewal.py), not the
paper's first order: at 60 min on 1.8 h the two differ by 3.8 points (0.714 vs 0.676), both
within the published "0.7"'s rounding (at 16,000 GPUs rather than 16,384 the plan's is
0.720). Tolerance: 2 points of efficiency against each figure;
the "over 0.9" and "needs ~2 min" statements are bounds, held as bounds.

Not found in a readable source: an efficiency figure, with its inputs, at a job MTBF of 15 min
or 24 h. The paper's "7 min interval for E[ETTR] = 0.5" at RSC-1 rates and 10^5 GPUs comes
from its Fig. 10, whose u0 and w are not in the text: not held.
"""

import pytest

from stoker.catalog import load_catalog

MIN, HOUR = 60.0, 3600.0
TOLERANCE = 0.02  # efficiency points
KOKOLIS_2024 = "arxiv.org/abs/2410.21680 (Meta, HPCA 2025), expected ETTR, Insight 10"
RSC1, RSC2 = 6.50e-3, 2.34e-3  # failures per node-day
GPUS_PER_NODE = 8

# (id, nodes, r_f, interval min, restart + queue min, published ETTR, its decimals)
FIGURES = [
    ("rsc1-16k-60min", 2048, RSC1, 60, 5, 0.70, 1),
    ("rsc1-16k-5min", 2048, RSC1, 5, 5, 0.93, 2),
    ("rsc1-8k-30min", 1000, RSC1, 30, 5 + 1, 0.90, 1),
]
# (id, nodes, r_f, interval min, restart min): the paper's ETTR is at least 0.9 here.
AT_LEAST_090 = [
    ("rsc1-2048gpu-60min", 256, RSC1, 60, 5),
    ("rsc1-4096gpu-60min", 512, RSC1, 60, 5),
    ("rsc2-100k-2min", 12_500, RSC2, 2, 2),
]


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def _checkpoints(cat, nodes: int, rate: float, interval_min: float, restart_min: float):
    """The plan for a job of ``nodes`` ND H100 v5 VMs failing ``rate`` times per node-day,
    saving 1 MB synchronously (the paper's non-blocking write) every ``interval_min``."""
    from stoker.plan import make_plan, parse_spec

    gpu_mtbf_h = GPUS_PER_NODE / rate * 24  # one node's failures shared by its 8 GPUs
    job = {
        "cluster": {"vm_size": "ND96isr_H100_v5", "nodes": nodes},
        "workload": {
            "kind": "pretrain",
            "step_time": "1 s",
            "global_batch": GPUS_PER_NODE * nodes,
            "sample_size": "1 MB",
            "dataset_size": "1 TB",
        },
        "checkpoints": {
            "mode": "sync",
            "tier": "blob",
            "size": 1e6,
            "interval": interval_min * MIN,
        },
        "reliability": {"gpu_mtbf": f"{gpu_mtbf_h} h", "restart_time": restart_min * MIN},
    }
    ck = make_plan(parse_spec(job), cat).checkpoints
    assert ck.blocking_s < 1.0, "the paper's figures assume non-blocking saves"
    assert ck.interval_s == pytest.approx(interval_min * MIN)
    assert ck.restart_s == pytest.approx(restart_min * MIN)
    return ck


def _papers_first_order(ck) -> float:
    """The paper's E[ETTR] on the plan's own inputs (N r_f = 1 / job MTBF)."""
    lost = (ck.restart_s + ck.interval_s / 2) / ck.job_mtbf_s
    return (1 - lost) / (1 + ck.blocking_s / ck.interval_s)


def test_the_plans_job_mtbf_at_16k_gpus_is_the_papers(cat):
    # "1.8 h at 16,384 GPUs": the per-node rate the figures below rest on, scaled as the plan does.
    ck = _checkpoints(cat, 2048, RSC1, 60, 5)
    assert ck.job_mtbf_s / HOUR == pytest.approx(1.8, rel=0.02), KOKOLIS_2024


@pytest.mark.parametrize(
    ("nodes", "rate", "interval_min", "restart_min", "published", "decimals"),
    [row[1:] for row in FIGURES],
    ids=[row[0] for row in FIGURES],
)
def test_the_plans_goodput_matches_metas_published_ettr(
    cat, nodes, rate, interval_min, restart_min, published, decimals
):
    ck = _checkpoints(cat, nodes, rate, interval_min, restart_min)
    # The inputs are the paper's: its own formula on them gives its figure as printed ...
    assert round(_papers_first_order(ck), decimals) == pytest.approx(published), KOKOLIS_2024
    # ... and the plan's exact renewal goodput is within 2 points of it.
    assert ck.goodput == pytest.approx(published, abs=TOLERANCE), KOKOLIS_2024


@pytest.mark.parametrize(
    ("nodes", "rate", "interval_min", "restart_min"),
    [row[1:] for row in AT_LEAST_090],
    ids=[row[0] for row in AT_LEAST_090],
)
def test_the_plans_goodput_meets_metas_at_least_090(cat, nodes, rate, interval_min, restart_min):
    # Measured runs "over 0.9" include queueing the plan does not count, and the 100k-GPU
    # "needs ~2 min" is read as 0.9 reached there: the plan must not fall below either. The
    # plan gives 0.96 and 0.92 (14.4 h and 7.2 h) and 0.94 at 100k GPUs (49 min); the paper's
    # own formula gives 0.94 there too with w = 0, so its "~2 min" rests on a w or a queue
    # time from its Fig. 10 that the text does not state.
    ck = _checkpoints(cat, nodes, rate, interval_min, restart_min)
    assert ck.goodput >= 0.90, KOKOLIS_2024


def test_where_the_interval_is_long_the_first_order_form_undershoots(cat):
    # At 60 min on a 1.8 h MTBF (dt/M = 0.55) the paper's first-order figure is 0.676 and the
    # exact one 0.714: the plan keeps the exact one (held to a Monte Carlo in
    # test_plan_renewal.py). At 5 min the first order is within 0.5 % of the exact (0.931 vs
    # 0.933), so the plan uses it and gives the paper's own figure.
    long, short = _checkpoints(cat, 2048, RSC1, 60, 5), _checkpoints(cat, 2048, RSC1, 5, 5)
    assert long.goodput - _papers_first_order(long) > 0.03
    assert short.goodput == pytest.approx(_papers_first_order(short), abs=1e-4)
