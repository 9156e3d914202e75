"""Young/Daly and goodput against worked numbers and the Llama 3 run."""

import math

import pytest

from stoker.plan import reliability as rel

HOUR = 3600.0


def test_job_mtbf_from_llama3_figures():
    # "The Llama 3 Herd of Models", https://arxiv.org/abs/2407.21783 (2024-07-23), section 3.3.4:
    # 16,384 GPUs x 54 days x 24 h / 419 unexpected interruptions = 50,677 GPU-hours. Exact.
    gpu_mtbf = 16384 * 54 * 24 / 419 * HOUR
    assert rel.job_mtbf(gpu_mtbf, 16384) / HOUR == pytest.approx(54 * 24 / 419)  # ~3.09 h


def test_young_worked_example():
    # C = 60 s, M = 3 h: sqrt(2 x 60 x 10800) = 1138.4 s
    assert rel.young_interval(60, 3 * HOUR) == pytest.approx(math.sqrt(2 * 60 * 10800))


def test_daly_is_close_to_young_for_small_c_and_bounded_for_large():
    young = rel.young_interval(10, 10 * HOUR)
    daly = rel.daly_interval(10, 10 * HOUR)
    assert daly < young and daly == pytest.approx(young - 10, rel=0.01)
    assert rel.daly_interval(3 * HOUR, 1 * HOUR) == 1 * HOUR


def test_the_optimum_minimises_waste():
    c, m, r = 30.0, 3 * HOUR, 600.0
    best = rel.daly_interval(c, m)
    w = rel.waste_fraction(best, c, m, r)
    assert w < rel.waste_fraction(best / 2, c, m, r)
    assert w < rel.waste_fraction(best * 2, c, m, r)


def test_waste_worked_example():
    # T = 20 min, C = 10 s, M = 3 h, R = 10 min: 10/1200 + (600 + 600)/10800
    assert rel.waste_fraction(1200, 10, 3 * HOUR, 600) == pytest.approx(10 / 1200 + 1200 / 10800)


def test_async_floor():
    assert rel.best_interval(0.01, 3 * HOUR, floor_s=120) == 120
    assert rel.best_interval(60, 3 * HOUR, floor_s=1) == pytest.approx(
        rel.daly_interval(60, 3 * HOUR)
    )
