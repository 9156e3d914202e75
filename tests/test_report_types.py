"""The report's inputs are typed by the formats' owners: stoker.plan.plan_json mirrors what a
Plan writes, stoker.simulate.simulation_json what a Simulation writes, and
stoker.measure.measured what a measured record holds. A key added to (or renamed in) a writer
and not to its TypedDict fails here, as does a key the report reads that no writer writes."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path

import pytest

from stoker.measure.measured import SOURCES, Measured, MeasuredJson, read_measured
from stoker.plan import Plan, PlanJson, plan_job, result
from stoker.plan import plan_json as pj
from stoker.report import report
from stoker.simulate import SimulationJson, simulate
from stoker.simulate import simulation_json as sj

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "pretrain-64vm.toml"

# (the plan's dataclass, its TypedDict): key for key, besides what the CLI adds beside a plan
MIRRORS = [
    (result.Plan, pj.PlanJson, {"simulation"}),  # stoker plan --simulate --json
    (result.DataPlan, pj.DataJson, set()),
    (result.TierChoice, pj.TierChoiceJson, set()),
    (result.CheckpointPlan, pj.CheckpointsJson, set()),
    (result.StepPlan, pj.StepJson, set()),
    (result.RunPlan, pj.RunJson, set()),
    (result.CostPlan, pj.CostJson, set()),
    (result.CostItem, pj.CostItemJson, set()),
    (result.InferencePlan, pj.InferenceJson, set()),
]


@pytest.mark.parametrize(
    ("cls", "typed", "added"), MIRRORS, ids=lambda x: getattr(x, "__name__", "")
)
def test_the_plans_typed_dicts_mirror_its_dataclasses(
    cls: type, typed: type, added: set[str]
) -> None:
    fields = {f.name for f in dataclasses.fields(cls)}
    assert set(typing.get_type_hints(typed)) == fields | added


def test_a_written_plan_has_the_typed_keys_at_every_level() -> None:
    doc = plan_job(EXAMPLE).to_dict()
    assert set(doc) <= set(typing.get_type_hints(PlanJson))
    for key, typed in (
        ("data", pj.DataJson),
        ("checkpoints", pj.CheckpointsJson),
        ("step", pj.StepJson),
        ("run", pj.RunJson),
        ("cost", pj.CostJson),
    ):
        assert doc[key] is not None, key
        assert set(doc[key]) == set(typing.get_type_hints(typed)), key
    assert set(doc["data"]["chosen"]) == set(typing.get_type_hints(pj.TierChoiceJson))
    assert all(set(i) == set(typing.get_type_hints(pj.CostItemJson)) for i in doc["cost"]["items"])


def test_a_written_simulation_has_exactly_the_typed_keys() -> None:
    doc = simulate(EXAMPLE, runs=3).to_dict()
    assert set(doc) == set(typing.get_type_hints(SimulationJson))
    for key in ("goodput", "gpu_busy", "failures"):
        assert set(doc[key]) == set(typing.get_type_hints(sj.SpreadJson)), key
    spread = set(typing.get_type_hints(sj.SpreadJson)) - {"plan"}
    assert all(set(s) == spread for s in doc["lost_hours"].values())
    assert all(set(m) == set(typing.get_type_hints(sj.PlanMissJson)) for m in doc["plan_misses"])
    assert all(set(e) <= set(typing.get_type_hints(sj.TimelineEventJson)) for e in doc["timeline"])


def test_a_measured_record_is_its_typed_dict_and_reads_back(tmp_path: Path) -> None:
    m = Measured("stage", "a -> b")
    m.add("throughput_bps", "bytes/s", 1.0, 5e8)
    doc = m.to_dict()
    assert set(doc) == set(typing.get_type_hints(MeasuredJson))
    assert SOURCES == typing.get_args(typing.get_type_hints(Measured)["source"])
    back = read_measured(m.save_json(tmp_path / "m.json"))
    assert (back.source, back.series["throughput_bps"].values) == ("stage", [5e8])


def test_reports_inputs_are_typed_not_any() -> None:
    hints = inspect.signature(report).parameters
    for name in ("plan", "simulation", "measured"):
        assert "Any" not in str(hints[name].annotation).split("[")[0], name
    assert "PlanInput" in str(hints["plan"].annotation)


def test_each_form_of_a_plan_makes_the_same_plan_section(tmp_path: Path) -> None:
    """A Plan, its dict, its JSON file and the job spec: each is a PlanInput."""
    import json

    plan = plan_job(EXAMPLE)
    assert isinstance(plan, Plan)
    as_file = tmp_path / "plan.json"
    as_file.write_text(json.dumps(plan.to_dict()))
    charts = []
    for i, given in enumerate((plan, plan.to_dict(), as_file, EXAMPLE)):
        charts.append(report(tmp_path / f"r{i}.html", plan=given).charts)
    assert charts[0] and all(c == charts[0] for c in charts)
