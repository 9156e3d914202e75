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

The paper's outlook (same section) adds a figure and a bound at the short end: its failure
model projects a job MTTF of 0.23 h at 131,072 GPUs (quoted so in two public notes on the
paper and as "~14 minutes" by Clockwork's blog), and at O(10^5) GPUs on RSC-1's rate a
1-hour checkpoint interval is infeasible (AI闲谈's rendering). Its "7 min interval for
E[ETTR] = 0.5" (and "21 min" at RSC-2's rate) comes from its Fig. 10, whose u0 and w are not
in the text: no (u0, w >= 0) makes both statements hold under its own formula, so neither
is held.

At a job MTBF near 15 min the efficiency figure held is FT-HSDP's (below, Meta 2026). Near 24 h
none was found, stated in text with its inputs, in the sources readable here (searched
2026-12-07): Daly 2006 gives efficiencies only as plots and Young 1974 an interval only;
Sandia's SAND2010-8709 abstract ("more than half" of the run lost beyond 50,000 nodes) and a
CIO report ("about 35 percent" useful work at 100,000 nodes, node MTBF 5 years) omit the
checkpoint and restart times; Maeng et al. (MLSys 2021: cluster MTBF 14-30 h), ByteRobust
(SOSP 2025: ETTR 97 % over three months on 9,600 GPUs) and Llama 3 (over 90 % at a failure
every ~3 h) are measurements without an interval rule.
"""

import math

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

# Source: O. Salpekar, R. Varma, K. Yu et al. (Meta), "Training LLMs with Fault Tolerant HSDP on
# 100,000 GPUs", https://arxiv.org/abs/2602.00277 (v1 2026-01-30). Its abstract, read 2026-12-07
# at arxiv.org/html/2602.00277v1: against fully synchronous training at O(100K) GPUs, FT-HSDP
# "can reduce the stall time due to failure recovery from 10 minutes to 3 minutes, increasing
# effective training time from 44% to 80%". The inputs behind the 44%, from two secondary
# readings of the full text that agree, each read through a public notes copy (AI闲谈's digest
# of 2026-02-28, https://mp.weixin.qq.com/s/CtoxhE9rSPyqGyVGTuSIQA; Gforky Research's review
# of 2026-03-22): the 98K-GPU runs (12 replicas of 8,192 GPUs) fail every 18 min and each
# failure stalls the synchronous job 10 min, so 44% = (18 - 10) / 18 (Gforky writes it out):
# each failure charged one whole stall and nothing else.
# Mapping: 18 min is the plan's job MTBF at 98,304 GPUs on RSC-1's rate above (18.03 min); the
# stall is reliability.restart_time; a 1 MB synchronous save every 2 s (two 1 s steps) adds no lost
# work beyond it. The 44% is first order, 1 - R/M. The plan's renewal goodput on the same inputs
# is 0.573 (about e^(-R/M): training runs only while no failure struck in the last 10 min,
# and a failure during a restart starts it over), 13 points above: beyond the 2-point
# tolerance, so the figure is held to the paper's own arithmetic on the plan's inputs, and
# the plan to lie above it. The 80% is not held: (18 - 3) / 18 is 83%, so it rests on an
# accounting (the other replicas training on) the text read here does not give, and the plan
# has no replica-level recovery.
FT_HSDP = "arxiv.org/abs/2602.00277 (Meta, FT-HSDP on 100,000 GPUs): synchronous baseline"
FT_HSDP_NODES = 12 * 8192 // GPUS_PER_NODE


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


def test_the_plans_job_mtbf_at_131k_gpus_is_the_papers(cat):
    # "0.23 h at 131,072 GPUs", the paper's projection at the short end (the plan: 0.225 h).
    ck = _checkpoints(cat, 131_072 // GPUS_PER_NODE, RSC1, 60, 5)
    assert round(ck.job_mtbf_s / HOUR, 2) == pytest.approx(0.23), KOKOLIS_2024
    # A 1-hour checkpoint interval is "infeasible" there, and 7 min is what reaches 0.5: the
    # plan's goodput at 60 min is far below 0.5 (0.04), where the first-order form is negative.
    assert ck.goodput < 0.5, KOKOLIS_2024
    assert _papers_first_order(ck) < 0


def test_the_plans_job_mtbf_at_98k_gpus_is_ft_hsdps(cat):
    # "A failure every 18 min" on 12 x 8,192 GPUs: the rate Kokolis measured on RSC-1 gives it.
    ck = _checkpoints(cat, FT_HSDP_NODES, RSC1, 2 / MIN, 10)
    assert ck.job_mtbf_s / MIN == pytest.approx(18, rel=0.02), FT_HSDP


def test_ft_hsdps_44_percent_is_first_order_and_the_plan_keeps_the_exact_goodput(cat):
    ck = _checkpoints(cat, FT_HSDP_NODES, RSC1, 2 / MIN, 10)
    # The paper's arithmetic, (M - R) / M, on the plan's own job MTBF and restart gives its 44%
    # (0.445 on the plan's 18.03 min): within the 2 points.
    assert 1 - ck.restart_s / ck.job_mtbf_s == pytest.approx(0.44, abs=TOLERANCE), FT_HSDP
    # The plan's goodput is the renewal model's (held to a Monte Carlo in test_plan_renewal.py),
    # 0.57: a 10-min stall every 18 min is where the first-order charge is 13 points short.
    assert ck.goodput - 0.44 > TOLERANCE, FT_HSDP
    assert ck.goodput == pytest.approx(math.exp(-ck.restart_s / ck.job_mtbf_s), abs=0.005)
