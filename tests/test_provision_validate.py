"""Offline validation of what ``stoker provision`` writes: every ARM resource against the
official schema for its type and apiVersion in strict mode, the CCWS parameters against their
schema, and checkov with zero failed checks. Each check is also shown to fail on a broken
template, so a pass means something."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path

import pytest

import stoker
from stoker.provision import validate

pytest.importorskip("jsonschema")

EXAMPLES = Path(__file__).parent.parent / "examples"
SPECS = sorted(EXAMPLES.glob("*.toml"))
BIG = EXAMPLES / "llama3-405b-2048vm.toml"
NOW = dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("big") / "deploy"
    stoker.provision(BIG, out, now=NOW)
    return out


def _template(out: Path) -> dict:
    return json.loads((out / "main.json").read_text())


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_every_example_validates_strictly(spec, tmp_path):
    stoker.provision(spec, tmp_path / "out", now=NOW)
    report = validate.check(tmp_path / "out", checkov=False)
    assert report.schema_errors == []
    template = _template(tmp_path / "out")
    assert report.resources == len(template["resources"]) > 8


def test_strict_mode_catches_a_misspelled_property_the_published_schema_lets_through(big):
    template = _template(big)
    vmss = next(r for r in template["resources"] if r["type"].endswith("ScaleSets"))
    vmss["properties"]["singlePlacementGroupp"] = vmss["properties"].pop("singlePlacementGroup")
    _, loose = validate.schema_errors(template, strict=False)
    _, strict = validate.schema_errors(template, strict=True)
    assert loose == []  # why strict mode exists
    assert any("singlePlacementGroupp" in e for e in strict), strict


def test_deep_misspelling_and_wrong_types_are_caught(big):
    template = _template(big)
    vmss = next(r for r in template["resources"] if r["type"].endswith("ScaleSets"))
    nic = vmss["properties"]["virtualMachineProfile"]["networkProfile"][
        "networkInterfaceConfigurations"
    ][0]["properties"]
    nic["enableAcceleratedNetworkin"] = nic.pop("enableAcceleratedNetworking")
    fs = next(r for r in template["resources"] if r["type"].endswith("amlFilesystems"))
    fs["properties"]["storageCapacityTiB"] = "100"
    account = next(r for r in template["resources"] if r["type"].endswith("storageAccounts"))
    account["properties"]["minimumTlsVersion"] = "TLS1.2"
    _, errors = validate.schema_errors(template)
    text = "\n".join(errors)
    assert "enableAcceleratedNetworkin" in text
    assert "storageCapacityTiB" in text
    assert "minimumTlsVersion" in text


def test_unknown_api_version_has_no_local_schema(big):
    template = _template(big)
    template["resources"][0]["apiVersion"] = "2099-01-01"
    _, errors = validate.schema_errors(template)
    assert any("no local schema" in e for e in errors)


def test_ccws_parameters_validate_and_a_typo_fails(big):
    params = json.loads((big / "ccws.parameters.json").read_text())
    assert validate.ccws_errors(params) == []
    assert params["parameters"]["projectVersion"]["value"] == "2026.07.02"
    broken = copy.deepcopy(params)
    broken["parameters"]["gpu"]["value"]["maxNode"] = 1
    assert validate.ccws_errors(broken)
    broken = copy.deepcopy(params)
    broken["parameters"]["adminSshPublicKey"] = {"value": "ssh-ed25519 AAAA"}  # pre-2026.07
    assert validate.ccws_errors(broken)


def test_parameters_files_validate(big):
    report = validate.check(big, checkov=False)
    assert report.ok and report.schema_errors == []


CHECKOV = validate.find_checkov()
needs_checkov = pytest.mark.skipif(CHECKOV is None, reason="checkov not installed: make checkov")


@needs_checkov
def test_checkov_finds_no_failed_check_and_every_skip_has_a_reason(big):
    report = validate.check(big)
    assert report.checkov_failed == []
    assert report.checkov_passed and report.checkov_passed > 20
    for skip in report.checkov_skipped:
        reason = skip.split(":", 1)[1].strip()
        assert len(reason) > 40, skip


@needs_checkov
def test_checkov_fails_a_weakened_storage_account(big, tmp_path):
    template = _template(big)
    account = next(r for r in template["resources"] if r["type"].endswith("storageAccounts"))
    account["properties"]["supportsHttpsTrafficOnly"] = False
    account["properties"]["minimumTlsVersion"] = "TLS1_0"
    path = tmp_path / "main.json"
    path.write_text(json.dumps(template))
    _, failed, _ = validate.run_checkov(path, CHECKOV)
    assert any(f.startswith("CKV_AZURE_44") for f in failed), failed  # TLS
    assert any(f.startswith("CKV_AZURE_3 ") for f in failed), failed  # HTTPS only


VOLUMES = """
name = "{tier}-data"
[cluster]
vm_size = "ND96isr_H100_v5"
nodes = 16
[workload]
kind = "pretrain"
params = "8B"
tokens_per_s_per_gpu = 5000
seq_len = 4096
global_batch = 256
dataset_size = "60 TB"
[data]
source = "az://d/x"
tier = "{tier}"
[run]
length = "24 h"
"""


@pytest.mark.parametrize("tier", ["netapp", "files", "lustre"])
def test_volumes_validate_and_pass_checkov(tier, tmp_path):
    spec = tmp_path / "job.toml"
    spec.write_text(VOLUMES.format(tier=tier))
    stoker.provision(spec, tmp_path / "out", now=NOW)
    report = validate.check(tmp_path / "out", checkov=CHECKOV or False)
    assert report.schema_errors == []
    assert report.checkov_failed == []


def test_child_names_are_checked_by_their_last_segment(tmp_path):
    spec = tmp_path / "job.toml"
    spec.write_text(VOLUMES.format(tier="netapp"))
    stoker.provision(spec, tmp_path / "out", now=NOW)
    template = _template(tmp_path / "out")
    pool = next(r for r in template["resources"] if r["type"].endswith("capacityPools"))
    pool["name"] = pool["name"] + "/bad name!"
    _, errors = validate.schema_errors(template)
    assert any("capacityPools" in e and "name" in e for e in errors), errors


def test_the_demos_validate_script(big):
    import subprocess
    import sys

    script = EXAMPLES / "validate_deploy.py"
    done = subprocess.run([sys.executable, str(script), str(big)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "vmss-llama3-405b-scale-06" in done.stdout
    assert f"{len(_template(big)['resources'])} ARM resources, 0 errors" in done.stdout
    broken = _template(big)
    broken["resources"][0]["properties"]["securityRulez"] = []
    (big.parent / "broken").mkdir(exist_ok=True)
    for name in ("main.parameters.json", "ccws.parameters.json", "stoker-deployment.json"):
        (big.parent / "broken" / name).write_text((big / name).read_text())
    (big.parent / "broken" / "main.json").write_text(json.dumps(broken))
    done = subprocess.run(
        [sys.executable, str(script), str(big.parent / "broken")], capture_output=True, text=True
    )
    assert done.returncode == 1 and "securityRulez" in done.stderr
