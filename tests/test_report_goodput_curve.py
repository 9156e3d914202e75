"""The report's goodput-against-interval chart draws the plan's renewal model: at a job MTBF
of 30 minutes (where the first-order form is far off) the curve passes through the plan's
goodput at the plan's interval and through the plan's goodput at its optimum."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from report_inputs import ROOT
from stoker.plan import plan_job
from stoker.report._plan_charts import goodput_curve, in_flight_s

SPEC = ROOT / "examples" / "pretrain-64vm.toml"  # 512 GPUs


def _plan(mode: str, interval: str) -> dict[str, Any]:
    spec = tomllib.loads(SPEC.read_text())
    spec["reliability"] = {"gpu_mtbf": f"{0.5 * 512}h"}  # the job fails every 30 min
    spec["checkpoints"] = {"interval": interval, "mode": mode}
    return plan_job(spec).to_dict()


def _marked(chart: Any) -> list[tuple[float, float]]:
    """The points the chart marks: (minutes, goodput %), the optimum's first."""
    return [tuple(map(float, c.get_offsets()[0])) for c in chart.fig.axes[0].collections]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_at_a_30_minute_mtbf_the_curve_is_the_plans_goodput(mode: str) -> None:
    plan = _plan(mode, "20min")  # far from the optimum, so the two points differ
    ck = plan["checkpoints"]
    assert ck["job_mtbf_s"] == pytest.approx(1800)
    assert ck["goodput_at_optimal"] - ck["goodput"] > 0.1
    chart = goodput_curve(plan)
    assert chart is not None
    (opt_min, opt_pct), (at_min, at_pct) = _marked(chart)
    # The plan's interval: its goodput lies on the curve.
    assert at_min == pytest.approx(ck["interval_s"] / 60)
    assert at_pct == pytest.approx(ck["goodput"] * 100, rel=1e-9)
    # The optimum's value comes from the curve alone, and it is the plan's own figure.
    assert opt_min == pytest.approx(ck["optimal_interval_s"] / 60)
    assert opt_pct == pytest.approx(ck["goodput_at_optimal"] * 100, rel=1e-6)
    assert f"gives {ck['goodput_at_optimal'] * 100:.1f} %" in chart.reading


def test_the_work_in_flight_is_what_the_plan_assumed() -> None:
    # A synchronous save to NVMe is safe once its copy on Blob is done: durable - write later.
    sync = _plan("sync", "20min")["checkpoints"]
    assert in_flight_s(sync) == pytest.approx(sync["durable_s"] - sync["write_s"], rel=1e-6)
    # An asynchronous one is safe when durable, counted from the end of its blocking.
    asyn = _plan("async", "20min")["checkpoints"]
    assert in_flight_s(asyn) == pytest.approx(asyn["durable_s"], rel=1e-6)


def test_the_curve_peaks_at_the_plans_optimum_when_the_floor_does_not_bind() -> None:
    plan = _plan("sync", "auto")
    ck = plan["checkpoints"]
    assert ck["interval_basis"] == "Young/Daly optimum"
    xs, ys = goodput_curve(plan).fig.axes[0].lines[0].get_data()
    peak = max(range(len(ys)), key=lambda i: ys[i])
    assert xs[peak] == pytest.approx(ck["optimal_interval_s"] / 60, rel=0.05)  # 200 log points
    assert ys[peak] == pytest.approx(ck["goodput"] * 100, rel=1e-4)
