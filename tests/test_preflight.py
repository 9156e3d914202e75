"""stoker.preflight against the loopback ARM (tests/arm_server.py with tests/preflight_arm.py's
routes, answering in the REST API specifications' shapes): quota exhausted, a SKU restricted in
a region or zone, missing rights, terms not accepted, a validation error, the what-if summary;
the 2,048-VM example finding every failure class, each in one line, in under 5 s; offline and
credential-less runs that say what they could not check; read-only calls only."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError

from arm_server import ArmServer
from preflight_arm import (
    CONTRIBUTOR,
    H100_FAMILY,
    Azure,
    install,
    location_restriction,
    lustre_sku,
    storage_sku,
    usage,
    vm_sku,
    zone_restriction,
)
from stoker.errors import PreflightError
from stoker.operate import preflight
from stoker.provision import provision

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TOKEN = "fake-token-must-not-show-0123456789"
CCWS_URN = "azurecyclecloud:azure-cyclecloud:cyclecloud8-gen2"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAItest"


class FakeCredential:
    def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
        return AccessToken(TOKEN, int(time.time()) + 3600)


class NoCredential:
    def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
        raise ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token")


@pytest.fixture(autouse=True)
def no_env_subscription(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("deployments")
    out = {}
    for name, spec in (("64", "pretrain-64vm.toml"), ("2048", "llama3-405b-2048vm.toml")):
        out[name] = provision(EXAMPLES / spec, root / name).out
    return out


@pytest.fixture
def deploy64(folders: dict[str, Path], tmp_path: Path) -> Path:
    return Path(shutil.copytree(folders["64"], tmp_path / "d64"))


def group_of(folder: Path) -> str:
    return json.loads((folder / "stoker-deployment.json").read_text())["resource_group"]


@pytest.fixture
def azure() -> tuple[ArmServer, Azure]:
    with ArmServer() as arm:
        az = Azure()
        az.accepted[CCWS_URN] = True
        install(arm, az)
        yield arm, az


def required(folder: Path) -> dict[str, str]:
    """A value for each template parameter without a default (the key, an IP, an object id)."""
    declared = json.loads((folder / "main.json").read_text())["parameters"]
    given = {k: f"value-of-{k}" for k, v in declared.items() if "defaultValue" not in v}
    return given | ({"sshPublicKey": SSH_KEY} if "sshPublicKey" in given else {})


def run(arm: ArmServer, folder: Path, **kw: object):
    kw.setdefault("parameters", required(folder))
    kw.setdefault("credential", FakeCredential())
    return preflight(
        folder, subscription=arm.subscription, base_url=arm.url, polling_interval_s=0.01, **kw
    )  # type: ignore[arg-type]


def lines(report, kind: str, status: str | None = None) -> list[str]:
    return [c.line for c in report.checks if c.kind == kind and status in (None, c.status)]


def test_all_fine_passes_and_only_reads(azure, deploy64: Path) -> None:
    arm, az = azure
    arm.add_group(group_of(deploy64))
    az.changes = [("Create", "Microsoft.Network/virtualNetworks")] * 4 + [
        ("Create", "Microsoft.Compute/virtualMachineScaleSets")
    ]
    report = run(arm, deploy64)
    assert report.ok and report.queried_azure, [c.line for c in report.failed]
    assert not report.unchecked
    for kind in ("quota", "sku", "storage-sku", "rights", "terms", "validate", "what-if"):
        assert lines(report, kind, "ok"), kind
    assert lines(report, "what-if") == [f"what-if in {group_of(deploy64)}: 5 create"]
    # Read-only: GETs, and the two POSTs that change nothing.
    posts = {r.path.rsplit("/", 1)[-1] for r in arm.requests("POST")}
    assert posts == {"validate", "whatif"}
    assert not [r for r in arm.state.log if r.method in ("PUT", "PATCH", "DELETE")]
    assert all(r.authorized for r in arm.state.log)
    # validate got the template provision wrote and the parameters given
    sent = az.bodies["validate"]["properties"]
    assert sent["template"] == json.loads((deploy64 / "main.json").read_text())
    assert sent["parameters"]["sshPublicKey"] == {"value": SSH_KEY}
    assert not lines(report, "parameters")


def test_quota_exhausted_names_the_family_and_the_figures(azure, deploy64: Path) -> None:
    arm, az = azure
    arm.add_group(group_of(deploy64))
    az.usages = [
        usage("cores", "Total Regional vCPUs", 1_000, 500_000),
        usage(H100_FAMILY, "Standard NDSH100v5 Family vCPUs", 904, 1_000),
    ]
    report = run(arm, deploy64)
    assert not report.ok
    (line,) = lines(report, "quota", "failed")
    assert H100_FAMILY in line and "needs 6,144, 96 free (904 used of 1,000)" in line
    assert "raise the limit to 7,048" in line
    assert lines(report, "quota", "ok") == [
        "vCPU quota, regional total (cores) in eastus: needs 6,144, 499,000 free "
        "(1,000 used of 500,000)"
    ]


def test_regional_total_counts_too(azure, deploy64: Path) -> None:
    arm, az = azure
    az.usages[0] = usage("cores", "Total Regional vCPUs", 0, 6_000)
    report = run(arm, deploy64)
    (line,) = lines(report, "quota", "failed")
    assert "regional total (cores)" in line and "needs 6,144, 6,000 free" in line


def test_sku_restricted_in_the_region(azure, deploy64: Path) -> None:
    arm, az = azure
    az.vm_skus = [
        vm_sku(
            "Standard_ND96isr_H100_v5", H100_FAMILY, restrictions=[location_restriction("eastus")]
        )
    ]
    report = run(arm, deploy64)
    (line,) = lines(report, "sku", "failed")
    assert "Standard_ND96isr_H100_v5 is restricted in eastus (NotAvailableForSubscription)" in line


def test_sku_missing_from_the_region_leaves_quota_unchecked(azure, deploy64: Path) -> None:
    arm, az = azure
    az.vm_skus = [vm_sku("Standard_D4as_v5", "standardDASv5Family")]
    report = run(arm, deploy64)
    assert lines(report, "sku", "failed") == [
        "Standard_ND96isr_H100_v5 is not offered in eastus (Resource SKUs): pick another "
        "region or size"
    ]
    assert any("quota family is unknown" in x for x in lines(report, "quota", "unchecked"))


def zones_of(folder: Path, rtype: str) -> list[str]:
    template = json.loads((folder / "main.json").read_text())
    return sorted(
        {z for r in template["resources"] if r["type"] == rtype for z in r.get("zones") or []}
    )


def test_zone_restriction_fails_where_the_zone_is_used(azure, folders: dict[str, Path]) -> None:
    """A restriction in the zone the template pins (AMLFS: zone 1 where it pins none) fails;
    one in a zone the deployment does not use does not."""
    arm, az = azure
    folder = folders["2048"]
    lustre_zone = (zones_of(folder, "Microsoft.StorageCache/amlFilesystems") or ["1"])[0]
    vm_zones = zones_of(folder, "Microsoft.Compute/virtualMachineScaleSets")
    other = next(z for z in ("1", "2", "3") if z not in vm_zones)
    az.lustre_skus = [
        lustre_sku(
            "AMLFS-Durable-Premium-500", restrictions=[zone_restriction("eastus", [lustre_zone])]
        )
    ]
    az.vm_skus = [
        vm_sku(
            "Standard_ND96isr_H100_v5",
            H100_FAMILY,
            restrictions=[zone_restriction("eastus", [other])],
        )
    ]
    report = run(arm, folder)
    (line,) = lines(report, "lustre-sku", "failed")
    assert f"AMLFS-Durable-Premium-500 is restricted in zone {lustre_zone} of eastus" in line
    assert "NotAvailableForSubscription" in line
    assert not lines(report, "sku", "failed") and not lines(report, "sku", "warning")
    assert lines(report, "sku", "ok")


def test_zone_restriction_without_a_pinned_zone_is_a_warning(
    azure, folders: dict[str, Path], tmp_path: Path
) -> None:
    arm, az = azure
    folder = Path(shutil.copytree(folders["64"], tmp_path / "d"))
    template = json.loads((folder / "main.json").read_text())
    for r in template["resources"]:
        if r["type"] == "Microsoft.Compute/virtualMachineScaleSets":
            r.pop("zones", None)
    (folder / "main.json").write_text(json.dumps(template))
    az.vm_skus = [
        vm_sku(
            "Standard_ND96isr_H100_v5",
            H100_FAMILY,
            restrictions=[zone_restriction("eastus", ["2"])],
        )
    ]
    report = run(arm, folder)
    assert not lines(report, "sku", "failed")
    (warn,) = lines(report, "sku", "warning")
    assert "restricted in zone 2 of eastus" in warn and "pins no zone" in warn


def test_missing_rights_and_a_group_not_there_yet(azure, deploy64: Path) -> None:
    """Contributor cannot create role assignments; before the group exists the subscription's
    permissions are asked, and validate / what-if say they were not run."""
    arm, az = azure
    az.permissions = [CONTRIBUTOR]
    report = run(arm, deploy64)
    (line,) = lines(report, "rights", "failed")
    assert "may not create role assignments on the subscription" in line
    assert "Owner or User Access Administrator" in line
    assert arm.requests("GET", "/providers/microsoft.authorization/permissions")[-1].path == (
        f"/subscriptions/{arm.subscription}/providers/microsoft.authorization/permissions"
    )
    (skipped,) = lines(report, "validate", "unchecked")
    assert f"resource group {group_of(deploy64)} does not exist yet" in skipped
    assert lines(report, "what-if", "unchecked")
    assert not arm.requests("POST")


def test_wildcard_rights_pass_and_not_actions_win(azure, deploy64: Path) -> None:
    arm, az = azure
    arm.add_group(group_of(deploy64))
    az.permissions = [
        {"actions": ["Microsoft.Resources/deployments/*"], "notActions": []},
        {"actions": ["Microsoft.Authorization/roleAssignments/*"], "notActions": []},
    ]
    assert lines(run(arm, deploy64), "rights", "ok") == [
        f"rights: may deploy and create role assignments on resource group {group_of(deploy64)}"
    ]
    az.permissions = [{"actions": ["*"], "notActions": ["Microsoft.Authorization/*"]}]
    assert lines(run(arm, deploy64), "rights", "failed")


def test_a_reader_may_neither_deploy_nor_assign_roles_in_one_line(azure, deploy64: Path) -> None:
    arm, az = azure
    az.permissions = [{"actions": ["*/read"], "notActions": []}]
    (line,) = lines(run(arm, deploy64), "rights", "failed")
    assert line == (
        "rights: may not deploy nor create role assignments on the subscription "
        "(Microsoft.Resources/deployments/write, Microsoft.Authorization/roleAssignments/write); "
        "ask for Owner or User Access Administrator there"
    )


def test_a_storage_sku_restricted_in_the_region(azure, deploy64: Path) -> None:
    arm, az = azure
    template = json.loads((deploy64 / "main.json").read_text())
    used = {r["sku"]["name"] for r in template["resources"]
            if r["type"] == "Microsoft.Storage/storageAccounts"}  # fmt: skip
    name = sorted(used)[0]
    az.storage_skus = [storage_sku(name, restrictions=[location_restriction("eastus")])]
    (line,) = lines(run(arm, deploy64), "storage-sku", "failed")
    assert line.startswith(f"storage {name} is restricted in eastus (NotAvailableForSubscription)")


def test_terms_not_accepted(azure, deploy64: Path) -> None:
    arm, az = azure
    az.accepted[CCWS_URN] = False
    report = run(arm, deploy64)
    (line,) = lines(report, "terms", "failed")
    assert f"`az vm image terms accept --urn {CCWS_URN}:latest`" in line


def test_validation_error_is_one_line_with_the_cause(azure, deploy64: Path) -> None:
    arm, az = azure
    arm.add_group(group_of(deploy64))
    az.validate_error = {
        "code": "InvalidTemplateDeployment",
        "message": "The template deployment 'stoker' is not valid according to the validation "
        "procedure.",
        "details": [
            {
                "code": "SkuNotAvailable",
                "message": "The requested VM size is not available in location 'eastus'.",
            }
        ],
    }
    report = run(arm, deploy64)
    (line,) = lines(report, "validate", "failed")
    assert "\n" not in line
    assert line.startswith(
        f"ARM validation of the template in {group_of(deploy64)}: InvalidTemplateDeployment: "
    )
    assert "(SkuNotAvailable: The requested VM size is not available" in line


def test_what_if_summary_counts_each_change_type(azure, deploy64: Path) -> None:
    arm, az = azure
    arm.add_group(group_of(deploy64))
    az.changes = [("Create", "a")] * 3 + [("Modify", "b")] * 2 + [("NoChange", "c")]
    az.changes += [("Delete", "d")]
    report = run(arm, deploy64)
    (check,) = [c for c in report.checks if c.kind == "what-if"]
    assert check.status == "warning"
    assert check.line.endswith(": 3 create, 2 modify, 1 delete, 1 unchanged")
    assert check.found["changes"] == {"create": 3, "modify": 2, "delete": 1, "unchanged": 1}


def test_the_2048_vm_example_finds_every_failure_class_in_one_line_each(
    azure, folders: dict[str, Path]
) -> None:
    arm, az = azure
    folder = folders["2048"]
    arm.add_group(group_of(folder))
    az.usages[1] = usage(H100_FAMILY, "Standard NDSH100v5 Family vCPUs", 0, 10_000)
    az.lustre_skus = [
        lustre_sku("AMLFS-Durable-Premium-500", restrictions=[zone_restriction("eastus", ["1"])])
    ]
    az.permissions = [CONTRIBUTOR]
    az.accepted[CCWS_URN] = False
    az.validate_error = {"code": "InvalidTemplateDeployment", "message": "quota exceeded"}
    started = time.monotonic()
    report = run(arm, folder)
    assert time.monotonic() - started < 5.0
    failed = {c.kind: c.line for c in report.failed}
    assert sorted(failed) == ["lustre-sku", "quota", "rights", "terms", "validate"]
    assert len(report.failed) == 5  # one line each
    assert all("\n" not in line for line in failed.values())
    assert "needs 196,608, 10,000 free" in failed["quota"]
    # the catalog's own limits ride along: placement groups above 100, Lustre above 128 TiB
    assert lines(report, "placement", "warning") and lines(report, "lustre-size", "warning")


def test_offline_lists_what_it_could_not_check(azure, folders: dict[str, Path]) -> None:
    arm, _ = azure
    report = run(arm, folders["2048"], offline=True)
    assert not arm.state.log  # nothing asked
    assert not report.queried_azure
    kinds = [c.kind for c in report.unchecked]
    assert kinds == [
        "sku", "quota", "lustre-sku", "storage-sku", "rights", "terms", "validate", "what-if"
    ]  # fmt: skip
    assert all(
        c.line.startswith("not checked: ") and "(--offline)" in c.line for c in report.unchecked
    )
    (need,) = lines(report, "vcpus", "ok")
    assert need.startswith("needs 196,608 vCPUs of the ND H100 v5 family in eastus")


def test_no_subscription_is_offline_and_says_why(folders: dict[str, Path]) -> None:
    report = preflight(folders["64"], parameters=required(folders["64"]))
    assert report.ok and len(report.unchecked) == 8
    assert all("no subscription" in c.line for c in report.unchecked)


def test_no_credential_leaves_every_live_check_unchecked(azure, deploy64: Path) -> None:
    arm, _ = azure
    report = run(arm, deploy64, credential=NoCredential())
    assert report.ok  # nothing failed, and nothing is claimed to have passed
    assert [c.kind for c in report.unchecked] == [
        "sku",
        "quota",
        "lustre-sku",
        "storage-sku",
        "rights",
        "terms",
        "validate",
        "what-if",
    ]
    first, *rest = report.unchecked
    assert "no Azure credential signed in (DefaultAzureCredential failed" in first.line
    assert "run `az login`" in first.line
    assert all(c.line.endswith("(as above)") for c in rest)
    assert not arm.state.log


def test_the_token_never_shows(azure, deploy64: Path) -> None:
    arm, az = azure
    az.validate_error = {"code": "Bad", "message": "nope"}
    arm.add_group(group_of(deploy64))
    text = json.dumps(run(arm, deploy64).to_dict())
    assert TOKEN not in text and "Bearer" not in text


def test_a_spec_is_provisioned_into_a_temporary_folder(tmp_path: Path) -> None:
    report = preflight(EXAMPLES / "pretrain-64vm.toml", offline=True)
    assert report.deployment.endswith("pretrain-64vm.toml")
    assert lines(report, "vcpus")[0].startswith("needs 6,144 vCPUs")


def test_bad_input_is_one_line(tmp_path: Path, deploy64: Path) -> None:
    with pytest.raises(PreflightError, match="neither a folder"):
        preflight(tmp_path / "missing")
    with pytest.raises(PreflightError, match="no main.json and stoker-deployment.json"):
        preflight(tmp_path)
    with pytest.raises(PreflightError, match="--parameter nope: the template has no such"):
        preflight(deploy64, parameters={"nope": "x"}, offline=True)
    (deploy64 / "main.json").write_text("{not json")
    with pytest.raises(PreflightError, match="main.json"):
        preflight(deploy64, offline=True)
    with pytest.raises(PreflightError, match="offline"):
        preflight(deploy64, offline="no")  # type: ignore[arg-type]


def test_an_aks_deployment_counts_its_node_pools(azure, tmp_path: Path) -> None:
    """``--target aks``: the GPU and system pools need quota and SKUs as scale sets do; a size
    the catalog lacks takes its vCPUs from Azure's SKU list."""
    arm, az = azure
    folder = provision(EXAMPLES / "pretrain-64vm.toml", tmp_path / "aks", target="aks").out
    template = json.loads((folder / "main.json").read_text())
    (aks,) = [r for r in template["resources"]
              if r["type"] == "Microsoft.ContainerService/managedClusters"]  # fmt: skip
    pools = aks["properties"]["agentPoolProfiles"]
    other = [p for p in pools if p["vmSize"] != "Standard_ND96isr_H100_v5"]
    for p in other:
        sku = vm_sku(p["vmSize"], "standardOtherFamily")
        sku["capabilities"] = [{"name": "vCPUs", "value": "8"}]
        az.vm_skus.append(sku)
    az.usages.append(usage("standardOtherFamily", "Other", 0, 100))
    report = run(arm, folder)
    assert not report.failed, [c.line for c in report.failed]
    gpus = sum(p["count"] for p in pools if p["vmSize"] == "Standard_ND96isr_H100_v5")
    total = gpus * 96 + sum(p["count"] * 8 for p in other)
    (family,) = [x for x in lines(report, "quota") if H100_FAMILY in x]
    assert f"needs {gpus * 96:,}," in family
    (cores,) = [x for x in lines(report, "quota") if "(cores)" in x]
    assert f"needs {total:,}," in cores


def test_a_call_this_identity_may_not_make_is_unchecked_not_passed(azure, deploy64: Path) -> None:
    arm, az = azure
    az.forbidden = {"terms", "usages"}
    report = run(arm, deploy64)
    assert report.ok
    (terms,) = lines(report, "terms", "unchecked")
    assert "AuthorizationFailed: the client may not read terms" in terms
    (quota,) = lines(report, "quota", "unchecked")
    assert quota.startswith("vCPU quota in eastus: AuthorizationFailed")
    assert lines(report, "sku", "ok") and lines(report, "rights", "ok")  # the rest went on


def test_parameters_take_the_template_s_types(azure, deploy64: Path) -> None:
    arm, az = azure
    arm.add_group(group_of(deploy64))
    run(arm, deploy64, parameters=required(deploy64) | {"deployScaleSets": "false"})
    assert az.bodies["validate"]["properties"]["parameters"]["deployScaleSets"] == {"value": False}
    with pytest.raises(
        PreflightError, match="--parameter deployScaleSets: the template wants a bool"
    ):
        preflight(deploy64, parameters={"deployScaleSets": "maybe"}, offline=True)
