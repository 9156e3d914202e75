"""stoker.simulate: agreement with the plan's closed form where its assumptions hold, and each
effect the closed form leaves out lowering goodput, attributed to its own cause."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from sim_jobs import seventy_b_job
from stoker.errors import SpecError
from stoker.plan import plan_job
from stoker.simulate import CLOSED_FORM, simulate

EXAMPLE = Path(__file__).parent.parent / "examples" / "llama3-405b-2048vm.toml"

# 512 GPUs that fail every 3.9 hours (a short per-GPU MTBF): ~120 failures in 20 days, so a
# few dozen runs pin the median.
BASE = seventy_b_job("sim-test", gpu_mtbf="2000 h")

# An image job that reads 52 GB/s (MLPerf ResNet-50 scale) from whatever tier it is given.
VISION = {
    "name": "sim-vision",
    "cluster": {"vm_size": "ND96asr_v4", "nodes": 32},
    "workload": {
        "kind": "pretrain",
        "step_time": "0.224 s",
        "global_batch": 102400,
        "sample_size": "114.7 KB",
        "dataset_size": "140 TB",
        "epochs": 40,
        "params": "25.6M",
        "overlap": 0.9,
    },
    "reliability": {"gpu_mtbf": "500 h"},
    "run": {"length": "2 d"},
}


def spec(base: dict, **sections: dict) -> dict:
    out = copy.deepcopy(base)
    for name, values in sections.items():
        out.setdefault(name, {}).update(values)
    return out


def closed(**extra: object) -> dict:
    return {**CLOSED_FORM, **extra}


def points(sim, effect: str) -> float:
    return next((m["goodput_points"] for m in sim.plan_misses if m["effect"] == effect), 0.0)


@pytest.mark.parametrize(
    "job",
    [
        BASE,
        spec(BASE, checkpoints={"mode": "sync", "tier": "blob"}),
        spec(BASE, checkpoints={"tier": "nvme", "interval": "20 min"}),
    ],
    ids=["async-auto", "sync-blob", "nvme-20min"],
)
def test_agrees_with_the_plan_within_2_percent_where_its_assumptions_hold(job: dict) -> None:
    sim = simulate(job, runs=40, knobs=CLOSED_FORM)
    plan = plan_job(job)
    assert sim.goodput["plan"] == pytest.approx(plan.checkpoints.goodput)
    assert sim.goodput["p50"] == pytest.approx(plan.checkpoints.goodput, rel=0.02)
    assert sim.goodput["p5"] <= sim.goodput["p50"] <= sim.goodput["p95"]
    assert sim.gpu_busy["p50"] == pytest.approx(plan.run.effective_training_fraction, rel=0.02)
    # failures as many as the plan expects: the job MTBF over the wall clock
    assert sim.failures["p50"] == pytest.approx(sim.failures["plan"], rel=0.1)
    for cause in ("restart_contention", "restaging", "stragglers", "hsm_first_reads"):
        assert sim.lost_hours[cause]["p95"] == 0.0, cause


def test_the_2048_vm_example_over_54_days_agrees_too() -> None:
    sim = simulate(EXAMPLE, runs=10, days=54, knobs=CLOSED_FORM)
    assert sim.gpus == 16384 and sim.days == 54
    assert sim.goodput["p50"] == pytest.approx(sim.goodput["plan"], rel=0.02)


def test_weibull_infant_mortality_fails_more_and_costs_goodput() -> None:
    exp = simulate(BASE, runs=30, knobs=CLOSED_FORM)
    young = simulate(BASE, runs=30, knobs=closed(failure_shape=0.7))
    assert young.failures["p50"] > 1.2 * exp.failures["p50"]
    assert young.goodput["p50"] < exp.goodput["p50"] - 0.01
    assert young.lost_hours["rework"]["p50"] > exp.lost_hours["rework"]["p50"]
    assert young.lost_hours["restart"]["p50"] > exp.lost_hours["restart"]["p50"]
    assert points(young, "failures") > 1.0
    assert "Weibull shape 0.7" in next(
        m["detail"] for m in young.plan_misses if m["effect"] == "failures"
    )


@pytest.mark.parametrize("kind", ["lognormal", "exponential"])
def test_stragglers_slow_every_step_and_are_named(kind: str) -> None:
    base = simulate(BASE, runs=10, knobs=CLOSED_FORM)
    slow = simulate(BASE, runs=10, knobs=closed(stragglers=kind, straggler_cv=0.02))
    lost = slow.lost_hours["stragglers"]["p50"] / (slow.days * 24)
    assert lost > 0.02  # the slowest of 512 ranks at 2 % spread: several % of each step
    assert slow.goodput["p50"] < base.goodput["p50"] - 0.02
    assert points(slow, "stragglers") == pytest.approx(lost * 100, rel=0.05)
    more = simulate(BASE, runs=10, knobs=closed(stragglers=kind, straggler_cv=0.04))
    assert more.lost_hours["stragglers"]["p50"] > slow.lost_hours["stragglers"]["p50"]


def test_every_vm_loading_at_once_lengthens_restarts() -> None:
    # DDP from Blob: each of 64 VMs reads the whole 980 GB state through one account
    job = spec(BASE, workload={"sharding": "ddp"}, checkpoints={"tier": "blob"})
    quiet = simulate(job, runs=20, knobs=CLOSED_FORM)
    busy = simulate(job, runs=20, knobs=closed(contention=True))
    assert busy.lost_hours["restart_contention"]["p50"] > 0
    assert quiet.lost_hours["restart_contention"]["p95"] == 0
    assert busy.goodput["p50"] < quiet.goodput["p50"] - 0.01
    assert points(busy, "restart_contention") > 1.0


def test_a_swapped_vm_re_stages_its_shard_of_nvme_data() -> None:
    job = spec(VISION, data={"tier": "nvme"})
    without = simulate(job, runs=20, knobs=CLOSED_FORM)
    restage = simulate(job, runs=20, knobs=closed(restaging=True))
    assert restage.lost_hours["restaging"]["p50"] > 0
    assert without.lost_hours["restaging"]["p95"] == 0
    assert restage.goodput["p50"] < without.goodput["p50"]
    assert points(restage, "restaging") > 0.5
    # no swaps, nothing to re-stage: only software failures, restarted in place
    in_place = simulate(
        job, runs=5, knobs=closed(restaging=True, gpu_failure_share=0, node_replace_share=0)
    )
    assert in_place.lost_hours["restaging"]["p95"] == 0


def test_lustre_first_reads_through_hsm_stall_the_first_epoch() -> None:
    job = spec(VISION, data={"tier": "lustre"})
    staged = simulate(job, runs=5, knobs=CLOSED_FORM)
    hsm = simulate(job, runs=5, knobs=closed(lustre_first_reads="hsm"))
    lost = hsm.lost_hours["hsm_first_reads"]["p50"]
    assert lost > 0 and staged.lost_hours["hsm_first_reads"]["p95"] == 0
    assert hsm.goodput["p50"] < staged.goodput["p50"] - 0.01
    # the first epoch only: 52 GB/s needed through a 7.5 GB/s HSM path, one epoch of 40
    assert lost < hsm.days * 24 * 0.5
    assert points(hsm, "hsm_first_reads") > 1.0


def test_saves_on_the_data_lustre_slow_its_reads() -> None:
    job = spec(VISION, workload={"params": "70B"}, data={"tier": "lustre"})
    job["checkpoints"] = {"tier": "lustre", "interval": "30 min"}
    apart = simulate(job, runs=5, knobs=CLOSED_FORM)
    shared = simulate(job, runs=5, knobs=closed(contention=True))
    assert shared.lost_hours["upload_contention"]["p50"] > 0
    assert apart.lost_hours["upload_contention"]["p95"] == 0
    assert shared.goodput["p50"] < apart.goodput["p50"]


def test_the_same_seed_gives_the_same_result_and_another_seed_another() -> None:
    def strip(sim) -> dict:
        d = sim.to_dict()
        del d["seconds"], d["events_per_second"]
        return d

    a = simulate(BASE, runs=5, seed=7)
    b = simulate(BASE, runs=5, seed=7)
    c = simulate(BASE, runs=5, seed=8)
    assert strip(a) == strip(b)
    assert a.goodput["p50"] != c.goodput["p50"]
    assert a.timeline == b.timeline and a.timeline != c.timeline


def test_the_json_has_the_agreed_keys_with_fractions_and_a_timeline() -> None:
    doc = simulate(BASE, runs=5).to_dict()
    assert doc["kind"] == "stoker.simulation/1"
    for key in (
        "spec",
        "gpus",
        "days",
        "runs",
        "seed",
        "goodput",
        "gpu_busy",
        "lost_hours",
        "timeline",
        "plan_misses",
        "events_per_second",
    ):
        assert key in doc, key
    assert set(doc["goodput"]) >= {"p5", "p50", "p95", "plan"}
    assert set(doc["gpu_busy"]) >= {"p5", "p50", "p95"}
    for q in [doc["goodput"], doc["gpu_busy"], *[v for v in doc["lost_hours"].values()]]:
        assert q["p5"] <= q["p50"] <= q["p95"]
    assert all(0 < doc["goodput"][p] < 1 for p in ("p5", "p50", "p95", "plan"))
    # time lost by cause plus useful time is the whole wall clock (run 0 of the medians is close)
    wall_h = doc["days"] * 24
    lost = sum(v["p50"] for v in doc["lost_hours"].values())
    assert lost / wall_h + doc["goodput"]["p50"] == pytest.approx(1, abs=0.01)
    events = [e["event"] for e in doc["timeline"]]
    assert events[0] == "start" and events[-1] == "end"
    assert "failure" in events and "restart" in events
    assert all(isinstance(e["t_hours"], float) for e in doc["timeline"])
    assert doc["events_per_second"] > 0
    assert all({"effect", "goodput_points"} <= set(m) for m in doc["plan_misses"])


@pytest.mark.parametrize(
    ("knobs", "key"),
    [
        ({"straggler_cv": -1}, "simulate.straggler_cv"),
        ({"failure_shape": 0}, "simulate.failure_shape"),
        ({"stragglers": "gaussian"}, "simulate.stragglers"),
        ({"contention": "maybe"}, "simulate.contention"),
        ({"stragler_cv": 0.1}, "simulate.stragler_cv"),
    ],
)
def test_a_bad_knob_is_a_spec_error_naming_it(knobs: dict, key: str) -> None:
    with pytest.raises(SpecError, match=key.replace(".", r"\.")):
        simulate(spec(BASE, simulate=knobs), runs=1)


def test_bad_runs_days_and_kinds_are_refused() -> None:
    with pytest.raises(SpecError, match="runs"):
        simulate(BASE, runs=0)
    with pytest.raises(SpecError, match="days"):
        simulate(BASE, runs=1, days=-1)
    inference = spec(BASE, workload={"kind": "inference"})
    with pytest.raises(SpecError, match="workload.kind"):
        simulate(inference, runs=1)
