"""Azure's limits and zones (issue 52 item 2): no resource past a documented limit unless the
spec declares the approval, one availability zone for Lustre and its clients, the HSM property
names of the API version written, an auto-export job for the checkpoints, and the roles the
file system needs made in a deployment before it."""

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
from stoker.errors import ProvisionError, SpecError
from stoker.plan import parse_spec
from stoker.provision import validate
from stoker.provision._res_lustre import hsm_settings

EXAMPLES = Path(__file__).parent.parent / "examples"
SPECS = sorted(EXAMPLES.glob("*.toml"))
NOW = dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC)
TiB = 2**40
STORAGE_CACHE = "Microsoft.StorageCache/amlFilesystems"


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("big") / "deploy"
    stoker.provision(EXAMPLES / "llama3-405b-2048vm.toml", out, now=NOW)
    return out


def llama(**sections) -> dict:
    data = copy.deepcopy(tomllib.loads((EXAMPLES / "llama3-405b-2048vm.toml").read_text()))
    for section, fields in sections.items():
        data.setdefault(section, {}).update(fields)
    return data


def resources(out: Path, suffix: str) -> list[dict]:
    template = json.loads((out / "main.json").read_text())
    return [r for r in template["resources"] if r["type"].endswith(suffix)]


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_no_example_writes_a_resource_past_a_documented_limit_undeclared(path, tmp_path, cat):
    spec = tomllib.loads(path.read_text())
    try:
        stoker.provision(path, tmp_path / "out", cat, now=NOW)
    except ProvisionError as exc:
        assert str(exc).startswith("cluster.fabric:"), exc  # the one refusal an example may show
        return
    cluster, data = spec["cluster"], spec.get("data", {})
    approved_sets = "placement_group_limit" in cluster or (
        cluster.get("placement") == "scale_set_on_request"
    )
    for vmss in resources(tmp_path / "out", "virtualMachineScaleSets"):
        vms = vmss["sku"]["capacity"]
        assert vms <= 300, (path.name, vms)
        assert vms <= cat.fabric.scale_set_vms or approved_sets, (path.name, vms)
    for fs in resources(tmp_path / "out", "amlFilesystems"):
        listed = cat.lustre[fs["sku"]["name"]].max_size / TiB
        capacity = fs["properties"]["storageCapacityTiB"]
        assert capacity <= listed or data.get("lustre_capacity_approved"), (path.name, capacity)


def test_lustre_past_its_listed_maximum_is_refused_unless_declared(tmp_path, cat):
    spec = llama(data={"lustre_capacity_approved": False})
    with pytest.raises(ProvisionError) as exc:
        stoker.provision(spec, tmp_path / "out", cat, now=NOW)
    text = str(exc.value)
    assert "\n" not in text and text.startswith("checkpoints.tier: 136 TiB")
    assert "listed maximum of 128 TiB" in text and "data.lustre_capacity_approved" in text
    assert not (tmp_path / "out").exists()
    dep = stoker.provision(llama(), tmp_path / "ok", cat, now=NOW)  # the example declares it
    assert [lu.capacity_tib for lu in dep.layout.lustres] == [136]
    assert any("lustre_capacity_approved" in note for note in dep.layout.notes)


def test_a_scale_set_past_300_is_refused_however_declared(tmp_path, cat):
    with pytest.raises(SpecError, match="cluster.placement_group_limit"):
        stoker.provision(llama(cluster={"placement_group_limit": 400}), tmp_path / "o", cat)
    spec = llama(cluster={"fabric_boundary_vms": 400, "placement": "scale_set"})
    with pytest.raises(ProvisionError, match=r"^cluster\.fabric_boundary_vms: 400 VMs"):
        stoker.provision(spec, tmp_path / "p", cat)


def test_lustre_and_its_clients_share_one_zone(big, tmp_path, cat):
    fs = resources(big, "amlFilesystems")
    sets = resources(big, "virtualMachineScaleSets")
    assert fs and sets
    assert {tuple(r["zones"]) for r in fs + sets} == {("1",)}
    stoker.provision(llama(cluster={"zone": 2}), tmp_path / "z2", cat, now=NOW)
    zones = {tuple(r["zones"]) for r in resources(tmp_path / "z2", "amlFilesystems")}
    zones |= {tuple(r["zones"]) for r in resources(tmp_path / "z2", "virtualMachineScaleSets")}
    assert zones == {("2",)}


def test_an_unknown_zone_is_one_line_and_exit_2(tmp_path):
    spec = tmp_path / "z.toml"
    text = (EXAMPLES / "pretrain-64vm.toml").read_text()
    spec.write_text(text.replace("[cluster]\n", '[cluster]\nzone = "4"\n', 1))
    with pytest.raises(SpecError, match="cluster.zone"):
        parse_spec(tomllib.loads(spec.read_text()))
    result = CliRunner().invoke(app, ["provision", str(spec), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "cluster.zone" in result.output
    assert not (tmp_path / "o").exists()


def test_hsm_prefixes_use_the_name_of_the_api_version_written(big, cat):
    fs = resources(big, "amlFilesystems")[0]
    settings = fs["properties"]["hsm"]["settings"]
    assert fs["apiVersion"] >= "2024-07-01"
    assert settings["importPrefixesInitial"] == ["/"] and "importPrefix" not in settings
    dep_layout = stoker.provision(llama(), big.parent / "again", cat, now=NOW).layout
    lu = dep_layout.lustres[0]
    assert "importPrefix" in hsm_settings(dep_layout, lu, "2023-05-01")
    assert "importPrefixesInitial" not in hsm_settings(dep_layout, lu, "2023-05-01")


def test_the_checkpoint_file_system_exports_to_blob_during_the_run(big):
    (fs,) = [r for r in resources(big, "amlFilesystems") if r["type"] == STORAGE_CACHE]
    jobs = resources(big, "autoExportJobs")
    assert len(jobs) == 1
    job = jobs[0]
    assert job["name"] == f"{fs['name']}/checkpoints"
    assert job["properties"] == {"adminStatus": "Enable", "autoExportPrefixes": ["/"]}
    assert any(fs["name"] in d for d in job["dependsOn"])


def test_roles_are_made_a_deployment_before_the_file_system(big):
    template = json.loads((big / "main.json").read_text())
    assert template["parameters"]["deployLustre"]["type"] == "bool"
    roles = [r for r in template["resources"] if r["type"].endswith("roleAssignments")]
    assert roles and all("condition" not in r for r in roles)  # in the first deployment
    for r in resources(big, "amlFilesystems") + resources(big, "autoExportJobs"):
        assert r["condition"] == "[parameters('deployLustre')]"
    for r in resources(big, "virtualMachineScaleSets"):  # they mount it: second deployment
        assert "deployLustre" in r["condition"]
    readme = (big / "README.md").read_text()
    first, second = readme.index("deployLustre=false"), readme.index("deployLustre=true")
    assert first < readme.index("sleep 300") < second
    assert "Owner or User Access Administrator" in readme
    report = validate.check(big, checkov=False)
    assert report.schema_errors == []
