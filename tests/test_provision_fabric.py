"""One job, one fabric (issue 52 item 1, issue 54 item 4): a scale set is one InfiniBand
partition, so a job past one is planned and provisioned only as a shape that can run, and
every shape's step is priced as the main plan prices its own, model-parallel traffic included.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

import stoker
from stoker.catalog import load_catalog
from stoker.cli import app
from stoker.errors import ProvisionError
from stoker.plan import make_plan, parse_spec
from stoker.plan.facts import FabricLayout

EXAMPLES = Path(__file__).parent.parent / "examples"
SPECS = sorted(EXAMPLES.glob("*.toml"))
NOW = dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC)
DECLARED = ("independent-jobs", "independent-replicas", "microsoft-arranged")


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def spec_of(name: str, **cluster) -> dict:
    data = copy.deepcopy(tomllib.loads((EXAMPLES / name).read_text()))
    data["cluster"].update(cluster)
    return data


def llama(**cluster) -> dict:
    return spec_of("llama3-405b-2048vm.toml", **cluster)


def moe(**cluster) -> dict:
    return spec_of("moe-3d-parallel-128vm.toml", **cluster)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_no_example_places_one_job_across_scale_sets(path, tmp_path, cat):
    """Every example: written as one scale set, or as several only for a declared shape."""
    spec = tomllib.loads(path.read_text())
    try:
        dep = stoker.provision(path, tmp_path / "out", cat, now=NOW)
    except ProvisionError as exc:  # refused: nothing written, and the refusal names the shapes
        assert str(exc).startswith("cluster.fabric:"), exc
        assert not (tmp_path / "out").exists()
        return
    sets = dep.layout.scale_sets
    fabric = spec["cluster"].get("fabric", "scale-set")
    assert len(sets) == 1 or fabric in DECLARED, (path.name, len(sets), fabric)
    template = json.loads((tmp_path / "out" / "main.json").read_text())
    vmss = [r for r in template["resources"] if r["type"].endswith("virtualMachineScaleSets")]
    assert len(vmss) == len(sets)
    assert all(r["properties"]["singlePlacementGroup"] is True for r in vmss)


def test_a_job_past_one_scale_set_is_refused_with_the_shapes_it_can_take(tmp_path, cat):
    with pytest.raises(ProvisionError) as exc:
        stoker.provision(llama(fabric="scale-set"), tmp_path / "out", cat, now=NOW)
    text = str(exc.value)
    assert "\n" not in text and text.startswith("cluster.fabric: 2048 VMs")
    assert "cannot span scale sets on InfiniBand" in text
    for shape in (
        "independent_jobs",
        "independent_replicas",
        "flat_ethernet",
        "microsoft_arranged",
    ):
        assert shape in text
    assert not (tmp_path / "out").exists()


def test_the_cli_refuses_it_in_one_line_with_exit_2(tmp_path):
    spec = tmp_path / "big.toml"
    text = (EXAMPLES / "llama3-405b-2048vm.toml").read_text()
    spec.write_text(text.replace('fabric = "microsoft-arranged"', 'fabric = "scale-set"'))
    result = CliRunner().invoke(app, ["provision", str(spec), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "cluster.fabric: 2048 VMs" in result.output
    assert not (tmp_path / "o").exists()


def test_microsoft_arranged_is_one_fabric_only_when_declared(cat):
    undeclared = make_plan(parse_spec(llama(fabric="scale-set")), cat)
    declared = make_plan(parse_spec(llama()), cat)  # the example declares it
    ic_u, ic_d = undeclared.interconnect, declared.interconnect
    assert ic_u.fabric_layout is FabricLayout.FLAT_ETHERNET
    assert [lv["network"] for lv in ic_u.levels] == ["ethernet"]
    arranged_u = next(o for o in ic_u.fabric_options if o.layout is FabricLayout.MICROSOFT_ARRANGED)
    assert arranged_u.available is False and "microsoft-arranged" in arranged_u.note
    assert ic_d.fabric_layout is FabricLayout.MICROSOFT_ARRANGED
    assert [lv["network"] for lv in ic_d.levels] == ["infiniband"]
    assert ic_d.vms_outside_fabric == 0
    arranged_d = next(o for o in ic_d.fabric_options if o.layout is FabricLayout.MICROSOFT_ARRANGED)
    assert arranged_d.available is True
    assert declared.step.total_s < undeclared.step.total_s


@pytest.mark.parametrize(
    "spec",
    [
        llama(fabric="scale-set"),
        llama(),
        llama(fabric="independent-jobs"),
        llama(fabric="independent-replicas"),
        moe(placement="scale_set"),
        moe(placement="scale_set", fabric="microsoft-arranged"),
        moe(placement="scale_set", fabric="independent-replicas"),
    ],
    ids=[
        "2048-undeclared",
        "2048-arranged",
        "2048-jobs",
        "2048-replicas",
        "moe-undeclared",
        "moe-arranged",
        "moe-replicas",
    ],
)
def test_the_option_that_is_the_plans_shape_has_the_plans_step(spec, cat):
    plan = make_plan(parse_spec(spec), cat)
    ic = plan.interconnect
    same = [o for o in ic.fabric_options if o.layout is ic.fabric_layout]
    assert len(same) == 1, (ic.fabric_layout, [o.layout for o in ic.fabric_options])
    option = same[0]
    assert option.available
    assert option.step_s == pytest.approx(plan.step.compute_s + plan.step.exposed_comm_s)
    assert option.model_parallel_s == pytest.approx(plan.step.model_parallel_s)
    assert option.comm_s == pytest.approx(ic.comm_s)


def test_every_option_carries_model_parallel_traffic(cat):
    # The MoE example gives the model's shape: tp, pp and ep traffic is modelled in each shape.
    plan = make_plan(parse_spec(moe(placement="scale_set")), cat)
    options = {o.layout: o for o in plan.interconnect.fabric_options}
    assert FabricLayout.APPROVED_LIMIT in options  # 128 VMs: one scale set on request
    for o in options.values():
        assert o.model_parallel_s > 0, o.layout
        assert o.step_s > o.model_parallel_s + (o.exposed_s or 0)  # compute is in it too
    # The whole job in one fabric (approved limit or arranged) has the same model traffic.
    one = options[FabricLayout.APPROVED_LIMIT]
    assert one.step_s == pytest.approx(options[FabricLayout.MICROSOFT_ARRANGED].step_s)


def test_independent_jobs_are_written_one_per_scale_set(tmp_path, cat):
    dep = stoker.provision(llama(fabric="independent-jobs"), tmp_path / "out", cat, now=NOW)
    assert [s.vms for s in dep.layout.scale_sets] == [300] * 6 + [248]
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "each run their own job" in readme
    plan = dep.plan
    assert plan.interconnect.fabric_layout is FabricLayout.INDEPENDENT_JOBS
    jobs = next(
        o for o in plan.interconnect.fabric_options if o.layout is FabricLayout.INDEPENDENT_JOBS
    )
    # Each job takes the spec's whole batch on one scale set's GPUs: more compute per step.
    whole = make_plan(parse_spec(llama()), cat)
    assert plan.step.compute_s > 6 * whole.step.compute_s
    assert jobs.fabrics == 7


def test_replicas_are_runnable_only_when_declared_and_say_what_they_cost(cat):
    plan = make_plan(parse_spec(llama(fabric="scale-set")), cat)
    replicas = next(
        o for o in plan.interconnect.fabric_options if o.layout is FabricLayout.INDEPENDENT_REPLICAS
    )
    assert replicas.available is False
    assert "7 models" in replicas.note and "never exchange gradients" in replicas.note
    declared = make_plan(parse_spec(llama(fabric="independent-replicas")), cat)
    assert declared.interconnect.fabric_layout is FabricLayout.INDEPENDENT_REPLICAS
    assert [lv["network"] for lv in declared.interconnect.levels] == ["infiniband"]


def test_a_job_over_100_vms_needs_the_approved_limit_declared(tmp_path, cat):
    with pytest.raises(ProvisionError, match=r"^cluster\.fabric: 128 VMs .*approved_limit"):
        stoker.provision(moe(placement="scale_set"), tmp_path / "a", cat, now=NOW)
    dep = stoker.provision(
        moe(placement="scale_set", placement_group_limit=128), tmp_path / "b", cat, now=NOW
    )
    assert [s.vms for s in dep.layout.scale_sets] == [128]
    assert dep.plan.interconnect.fabric_layout is FabricLayout.ONE_FABRIC
    with pytest.raises(ProvisionError, match=r"^cluster\.fabric_boundary_vms: scale sets of 150"):
        stoker.provision(moe(placement="scale_set", fabric_boundary_vms=150), tmp_path / "c", cat)


def test_the_placement_group_limit_is_at_most_300(cat):
    with pytest.raises(stoker.errors.SpecError, match="cluster.placement_group_limit"):
        parse_spec(moe(placement_group_limit=301))


def test_no_text_claims_traffic_crosses_scale_sets():
    root = EXAMPLES.parent
    texts = [root / "README.md", *root.glob("docs/**/*.md"), *EXAMPLES.glob("*.toml")]
    texts += [*(root / "src" / "stoker" / "plan").glob("*.py")]
    texts += [*(root / "src" / "stoker" / "provision").glob("*.py")]
    for path in texts:
        text = " ".join(path.read_text().split()).lower()
        for claim in ("falls back to the frontend ethernet", "nccl falls back", "between islands"):
            assert claim not in text, (path, claim)


def test_the_placement_group_limit_option_matches_the_spec_field(tmp_path, cat):
    path = tmp_path / "moe.toml"
    text = (EXAMPLES / "moe-3d-parallel-128vm.toml").read_text()
    path.write_text(text.replace('placement = "scale_set_on_request"', 'placement = "scale_set"'))
    by_field = stoker.plan_job(moe(placement="scale_set", placement_group_limit=128), cat)
    by_option = stoker.plan_job(path, cat, placement_group_limit=128)
    assert by_option.to_dict() == by_field.to_dict()
    assert by_option.interconnect.fabric_layout is FabricLayout.ONE_FABRIC
    runner = CliRunner()
    refused = runner.invoke(app, ["provision", str(path), "--out", str(tmp_path / "a")])
    assert refused.exit_code == 2 and "cluster.fabric: 128 VMs" in refused.output
    ok = runner.invoke(
        app,
        ["provision", str(path), "--out", str(tmp_path / "b"), "--placement-group-limit", "128"],
    )
    assert ok.exit_code == 0, ok.output
    template = json.loads((tmp_path / "b" / "main.json").read_text())
    (vmss,) = [r for r in template["resources"] if r["type"].endswith("ScaleSets")]
    assert vmss["sku"]["capacity"] == 128 and vmss["properties"]["singlePlacementGroup"]
    too_many = runner.invoke(
        app,
        ["plan", str(path), "--placement-group-limit", "301"],
    )
    assert too_many.exit_code == 2 and "--placement-group-limit 301" in too_many.output
    bad = runner.invoke(
        app, ["provision", str(path), "--out", str(tmp_path / "c"), "--placement-group-limit", "0"]
    )
    assert bad.exit_code == 2 and "placement_group_limit" in bad.output
    assert not (tmp_path / "c").exists()
