"""A careless or hostile user's specs, measured files and commands against `stoker plan`,
`stoker provision` and `stoker catalog`: each case is refused in one line naming the field (exit 2)
or planned with its unknowns marked, never a traceback and never a half-written folder."""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stoker.catalog import load_catalog
from stoker.cli import app
from stoker.errors import ProvisionError, SpecError
from stoker.plan import parse_spec, plan_job
from stoker.plan.render import compare_rows
from stoker.provision import provision

EXAMPLES = Path(__file__).parent.parent / "examples"
MOE = tomllib.loads((EXAMPLES / "moe-3d-parallel-128vm.toml").read_text())
VISION = tomllib.loads((EXAMPLES / "vision-32vm.toml").read_text())
LLAMA = tomllib.loads((EXAMPLES / "llama3-405b-2048vm.toml").read_text())


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def _with(base: dict, section: str, **fields: object) -> dict:
    spec = copy.deepcopy(base)
    spec.setdefault(section, {}).update(fields)
    return spec


def _refusal(spec: dict, cat=None) -> str:
    with pytest.raises(SpecError) as exc:
        plan_job(spec, cat) if cat is not None else parse_spec(spec)
    return str(exc.value)


@pytest.mark.parametrize(
    "field",
    ["au_target", "layers", "hidden_size", "micro_batch", "ep", "experts_per_token", "tp"],
)
def test_a_boolean_is_not_read_as_one(field):
    # pydantic's lax mode reads TOML's `true` as 1: one layer, an AU target of 100 %.
    message = _refusal(_with(MOE, "workload", **{field: True}))
    assert f"workload.{field}: true is a boolean" in message


@pytest.mark.parametrize("section,field", [("cluster", "nodes"), ("cluster", "price_per_hour")])
def test_a_boolean_size_or_price_is_refused(section, field):
    assert f"{section}.{field}: true is a boolean" in _refusal(_with(MOE, section, **{field: True}))


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nan_and_inf_are_refused_by_field(value):
    # inf was caught only after planning, as "plan.cost.price_per_vm_hour_usd comes out as inf".
    message = _refusal(_with(MOE, "cluster", price_per_hour=value))
    assert "cluster.price_per_hour: Input should be a finite number" in message


def test_au_target_as_a_percentage_says_how_to_write_it():
    message = _refusal(_with(MOE, "workload", au_target="90%"))
    assert "workload.au_target: write the share as a number from 0 to 1 (0.9 for 90 %)" in message


@pytest.mark.parametrize(
    "field,value,bound",
    [
        ("layers", 10**30, "10000"),
        ("hidden_size", 10**30, "1000000"),
        ("experts_per_token", 10**9, "256"),
    ],
)
def test_a_huge_model_shape_is_a_typo(field, value, bound):
    message = _refusal(_with(MOE, "workload", **{field: value}))
    assert f"workload.{field}: Input should be less than or equal to {bound}" in message


def test_a_width_that_does_not_split_over_tp_is_refused():
    message = _refusal(_with(MOE, "workload", hidden_size=1))  # tp = 2
    assert "hidden_size = 1 does not split over tp = 2 GPUs" in message
    parse_spec(_with(MOE, "workload", hidden_size=2))  # a multiple of tp plans


def test_a_micro_batch_larger_than_the_batch_is_refused():
    message = _refusal(_with(MOE, "workload", micro_batch=4096))  # global_batch 2048
    assert "micro_batch = 4096 is more samples than global_batch = 2048" in message


def test_expert_parallel_past_the_gpus_names_the_product(cat):
    message = _refusal(_with(MOE, "workload", ep=1024), cat)
    assert "workload.ep: tp x pp x ep = 2 x 4 x 1024 = 8192 exceeds the job's 1024 GPUs" in message


@pytest.mark.parametrize(
    "written,meant",
    [
        ("ND96isr_H100_v6", "ND96isr_H100_v5"),
        ("Standard ND96isr_H100_v5", "ND96isr_H100_v5"),
        ("Standard-ND96isr_H200_v5", "ND96isr_H200_v5"),
    ],
)
def test_an_unknown_vm_size_names_the_closest(cat, written, meant):
    message = _refusal(_with(MOE, "cluster", vm_size=written), cat)
    assert f"unknown VM size {written!r}; did you mean {meant}" in message


def test_an_empty_vm_size_says_it_is_empty(cat):
    assert "cluster.vm_size: empty; give a VM size" in _refusal(
        _with(MOE, "cluster", vm_size=""), cat
    )


@pytest.mark.parametrize(
    "written", ["standard_nd96isr_h200_v5", "Standard_ND96isr_H200_v5  ", "ND96ISR_H200_V5"]
)
def test_provision_takes_the_vm_size_in_any_case(cat, tmp_path, written):
    # The plan accepted these; provision looked the raw string up in the catalog (KeyError).
    d = provision(_with(MOE, "cluster", vm_size=written), tmp_path / "out", cat)
    assert {s.vm_size for s in d.layout.scale_sets} == {"ND96isr_H200_v5"}
    template = json.loads((tmp_path / "out" / "main.json").read_text())
    sizes = {
        r["sku"]["name"]
        for r in template["resources"]
        if r["type"] == "Microsoft.Compute/virtualMachineScaleSets"
    }
    assert sizes == {"Standard_ND96isr_H200_v5"}


def test_provision_refuses_more_resources_than_one_arm_template_holds(cat, tmp_path):
    spec = copy.deepcopy(LLAMA)
    spec["cluster"].pop("gpus")
    spec["cluster"].update(nodes=900, fabric_boundary_vms=1)  # 900 scale sets of one VM
    with pytest.raises(ProvisionError) as exc:
        provision(spec, tmp_path / "out", cat)
    assert "cluster.fabric_boundary_vms: 900 VMs in scale sets of 1" in str(exc.value)
    assert "a template holds at most 800" in str(exc.value)
    assert not (tmp_path / "out").exists()  # nothing written half


def _mi300x_on_nvme() -> dict:
    # ND MI300X v5 publishes no NVMe read rate: the data stall is unknown.
    spec = _with(VISION, "cluster", vm_size="ND96isr_MI300X_v5", nodes=32)
    spec["data"]["tier"] = "nvme"
    return spec


def test_compare_marks_what_an_unknown_stall_bounds(cat):
    unknown, known = plan_job(_mi300x_on_nvme(), cat), plan_job(VISION, cat)
    rows = {row[0]: row[1:] for row in compare_rows([unknown, known])}
    assert rows["data stall"][0] == "unknown"
    assert rows["step"][0].startswith(">= ") and not rows["step"][1].startswith(">=")
    assert rows["GPU busy"][0].startswith("<= ") and not rows["GPU busy"][1].startswith("<=")
    assert rows["wall clock"][0].startswith(">= ") and rows["cost"][0].startswith(">= $")
    assert rows["useful share of wall clock"][0].startswith("<= ")


def test_unknown_stall_is_null_in_json_and_bounds_in_markdown(tmp_path):
    import tomli_w

    spec = tmp_path / "mi.toml"
    spec.write_text(tomli_w.dumps(_mi300x_on_nvme()))
    runner = CliRunner()
    out = runner.invoke(app, ["plan", str(spec), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["step"]["data_stall_s"] is None and doc["data"]["au"] is None
    md = runner.invoke(app, ["plan", str(spec), "--markdown"]).output
    assert "in at least " in md and "- **cost**: at least $" in md and "| unknown |" in md
    both = runner.invoke(
        app, ["plan", str(spec), str(EXAMPLES / "vision-32vm.toml"), "--compare", "--markdown"]
    )
    assert "| data stall | unknown | 0 s |" in both.output
    assert "| GPU busy | <= " in both.output


def _measured(tmp_path: Path, content: str) -> Path:
    path = tmp_path / "measured.json"
    path.write_text(content)
    return path


def test_a_measured_rate_near_zero_is_refused_not_a_crash(cat, tmp_path):
    # 1e-300 MB/s planned steps of 1e300 s: zero steps fit run.length, and a ZeroDivisionError.
    row = '{"nvme": [{"test": "seq-read", "cache": "cold", "mb_per_s": 1e-300}]}'
    with pytest.raises(SpecError, match="below 1 MB/s"):
        plan_job(_mi300x_on_nvme(), cat, measured=_measured(tmp_path, row))


def test_a_catalog_rate_near_zero_is_an_error_not_a_crash(tmp_path):
    override = tmp_path / "slow.toml"
    override.write_text("[vm.ND96isr_MI300X_v5]\nnvme_read = 1e-300\n")
    with pytest.raises(SpecError):
        plan_job(_mi300x_on_nvme(), [override])


@pytest.mark.parametrize("vm", ["Standard_ND96isr_MI300X_v5 ", "standard_nd96isr_mi300x_v5", None])
def test_the_measured_vm_is_read_as_the_spec_is(cat, tmp_path, vm):
    path = _measured(tmp_path, json.dumps({"vm": vm, "nvme": {"read": "20 GB/s"}}))
    plan = plan_job(_mi300x_on_nvme(), cat, measured=path)
    assert plan.step.data_stall_s is not None  # the measured rate made the stall known


@pytest.mark.parametrize(
    "content,words",
    [
        ('{"vm": "", "nvme": {"read": "20 GB/s"}}', "vm: '' is not a VM size name"),
        (
            '{"rows": [{"size": 8, "busbw": 1e9}], "world_size": "8"}',
            "world_size '8' is not a number of ranks",
        ),
    ],
)
def test_a_malformed_measured_file_says_what_is_wrong(cat, tmp_path, content, words):
    with pytest.raises(SpecError, match="--measured") as exc:
        plan_job(_mi300x_on_nvme(), cat, measured=_measured(tmp_path, content))
    assert words in str(exc.value)


def test_plan_cli_exits_2_with_one_line_on_a_measured_file_of_another_vm(tmp_path):
    spec = tmp_path / "moe.toml"
    spec.write_text((EXAMPLES / "moe-3d-parallel-128vm.toml").read_text())
    other = _measured(tmp_path, '{"vm": "ND96isr_H100_v5", "nvme": {"read": "20 GB/s"}}')
    out = CliRunner().invoke(app, ["plan", str(spec), "--measured", str(other)])
    assert out.exit_code == 2
    assert out.output.strip().count("\n") == 0
    assert "was taken on ND96isr_H100_v5; the job runs on ND96isr_H200_v5" in out.output


@pytest.mark.parametrize(
    "entry", ["Standard_ND96isr_H100_v5", "standard_nd96isr_h100_v5", "vm.nd96isr_h100_v5"]
)
def test_catalog_entry_in_any_spelling(entry):
    out = CliRunner().invoke(app, ["catalog", "--entry", entry, "--json"])
    assert out.exit_code == 0, out.output
    entries = {row["entry"] for row in json.loads(out.output)["figures"]}
    assert entries == {"vm.ND96isr_H100_v5"}


def test_catalog_entry_section_in_any_case_and_a_typo_names_the_closest():
    runner = CliRunner()
    out = runner.invoke(app, ["catalog", "--entry", "Lustre", "--json"])
    assert out.exit_code == 0, out.output
    assert all(row["entry"].startswith("lustre") for row in json.loads(out.output)["figures"])
    typo = runner.invoke(app, ["catalog", "--entry", "ND96isr_H10_v5"])
    assert typo.exit_code == 2
    assert "did you mean vm.ND96isr_H100_v5" in typo.output


def test_a_lustre_sku_in_any_case_and_a_typo_names_the_closest(cat):
    lower = _with(LLAMA, "data", lustre_sku="amlfs-durable-premium-125", tier="lustre")
    assert plan_job(lower, cat).data.chosen.sku == "AMLFS-Durable-Premium-125"
    typo = _with(LLAMA, "data", lustre_sku="AMLFS-Premium-125", tier="lustre")
    assert "did you mean AMLFS-Durable-Premium-125" in _refusal(typo, cat)


def test_a_boolean_for_the_simulate_table_is_refused_as_not_a_table():
    assert "simulate: Input should be a valid dictionary" in _refusal({**MOE, "simulate": True})


@pytest.mark.parametrize(
    "cluster",
    [
        {"nodes": 250, "fabric_boundary_vms": 100},  # islands of 100, 100 and 50 VMs
        {"nodes": 250, "fabric_boundary_vms": 100, "vm_size": "NC96ads_A100_v4"},  # no IB
        {"nodes": 128, "vm_size": "standard_nd96isr_h100_v5"},
    ],
)
def test_provision_past_the_fabric_boundary_validates_strictly(cat, tmp_path, cluster):
    from stoker.provision import validate

    spec = copy.deepcopy(LLAMA)
    spec["cluster"].pop("gpus")
    spec["cluster"].update(cluster)
    d = provision(spec, tmp_path / "out", cat)
    sizes = [s.vms for s in d.layout.scale_sets]
    assert sum(sizes) == cluster["nodes"] and max(sizes) <= cluster.get("fabric_boundary_vms", 300)
    report = validate.check(tmp_path / "out", checkov=False)
    assert report.schema_errors == [] and report.resources > 8


@pytest.mark.parametrize(
    "section,field,value,bound",
    [
        ("checkpoints", "bytes_per_param", 1e300, "1000"),  # was an OverflowError, exit 1
        ("data", "blob_accounts", 10**30, "500"),
        ("cluster", "fabric_boundary_vms", 10**30, "100000"),
        ("workload", "tp", 10**30, "1000000"),
    ],
)
def test_a_huge_count_is_refused_by_field(section, field, value, bound):
    message = _refusal(_with(MOE, section, **{field: value}))
    assert f"{section}.{field}: Input should be less than or equal to {bound}" in message


def test_arithmetic_out_of_range_is_a_spec_error_not_a_traceback(cat):
    # keep x size overflows to inf, and the Lustre size's rounding raised OverflowError.
    spec = copy.deepcopy(LLAMA)
    spec["checkpoints"].update(size="1e300 B", keep=10**9)
    assert "out of range" in _refusal(spec, cat)


def test_provision_of_a_run_past_the_year_9999_says_so(cat, tmp_path):
    # The teardown-after tag's date overflowed: OverflowError, exit 1.
    spec = copy.deepcopy(LLAMA)
    spec["run"] = {"steps": 10**15}
    with pytest.raises(ProvisionError, match="past any date the teardown-after tag can hold"):
        provision(spec, tmp_path / "out", cat)
    assert not (tmp_path / "out").exists()


def test_a_shape_given_in_part_says_what_is_unused(cat):
    spec = copy.deepcopy(MOE)
    del spec["workload"]["layers"], spec["workload"]["hidden_size"]
    note = plan_job(spec, cat).interconnect.model_parallel.note
    assert "workload.experts_per_token and workload.micro_batch are unused without them" in note
    del spec["workload"]["experts_per_token"]
    note = plan_job(spec, cat).interconnect.model_parallel.note
    assert note.endswith("workload.micro_batch is unused without them")
