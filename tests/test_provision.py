"""``stoker provision``: the plan as a deployment. The numbers agree with ``stoker plan``, the
resources carry what InfiniBand, Lustre and a hardened Blob need, and every refusal names its
field, exits 2 and writes nothing."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import stoker
from lustre_spec import LUSTRE_DATA
from stoker.catalog import load_catalog
from stoker.cli import app
from stoker.errors import ProvisionError
from stoker.plan import plan_job
from stoker.provision._layout_checks import check_lustre

EXAMPLES = Path(__file__).parent.parent / "examples"
SPECS = sorted(EXAMPLES.glob("*.toml"))
BIG = EXAMPLES / "llama3-405b-2048vm.toml"
NOW = dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> tuple[stoker.Deployment, dict]:
    out = tmp_path_factory.mktemp("big")
    d = stoker.provision(BIG, out, now=NOW)
    return d, json.loads((out / "main.json").read_text())


def _of(template: dict, kind: str) -> list[dict]:
    return [r for r in template["resources"] if r["type"] == kind]


def _plan_per_hour(plan) -> float:
    """The plan's own cost per hour, from its cost lines: the GPU line is priced per VM-hour,
    every other line is one resource held for its hours."""
    total = 0.0
    for item in plan.cost.items:
        if item.usd is None:
            continue
        rate = item.usd / item.hours
        total += rate * plan.nodes if item.item.startswith("GPU VMs") else rate
    return total


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_readme_cost_per_hour_equals_the_plans(spec, tmp_path):
    # The plan prices what the job needs; the way in (a Bastion and its IP) is the
    # deployment's own, priced on top (tests/test_provision_access.py).
    d = stoker.provision(spec, tmp_path / "out", now=NOW, access="none")
    readme = (tmp_path / "out" / "README.md").read_text()
    shown = re.search(r"\*\*Total per hour: \$([\d,]+\.\d\d)\*\*", readme)
    assert shown, readme
    expected = round(_plan_per_hour(plan_job(spec)), 2)
    assert float(shown.group(1).replace(",", "")) == expected
    summary = json.loads((tmp_path / "out" / "stoker-deployment.json").read_text())
    assert summary["cost_per_hour_usd"] == expected
    assert d.plan.cost.items == plan_job(spec).cost.items  # the very plan `stoker plan` makes


def test_scale_sets_split_at_the_fabric_boundary(big):
    d, template = big
    sets = _of(template, "Microsoft.Compute/virtualMachineScaleSets")
    assert [s["sku"]["capacity"] for s in sets] == [300] * 6 + [248]
    for s in sets:
        assert s["sku"]["name"] == "Standard_ND96isr_H100_v5"
        props = s["properties"]
        assert props["singlePlacementGroup"] is True
        assert props["platformFaultDomainCount"] == 1
        assert props["orchestrationMode"] == "Uniform"
        profile = props["virtualMachineProfile"]
        nic = profile["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]
        assert nic["enableAcceleratedNetworking"] is True
        assert "publicIPAddressConfiguration" not in nic["ipConfigurations"][0]["properties"]
        linux = profile["osProfile"]["linuxConfiguration"]
        assert linux["disablePasswordAuthentication"] is True
        assert "adminPassword" not in profile["osProfile"]
        assert profile["storageProfile"]["imageReference"]["offer"] == "ubuntu-hpc"
        assert s["identity"]["type"] == "UserAssigned"
    readme = (d.out / "README.md").read_text()
    assert "form one InfiniBand fabric only as arranged with Microsoft" in readme


def test_network_avoids_the_rdma_range_and_sizes_the_lustre_subnet(big):
    import ipaddress

    _, template = big
    (vnet,) = _of(template, "Microsoft.Network/virtualNetworks")
    rdma = ipaddress.ip_network("172.16.0.0/16")
    subnets = {
        s["name"]: ipaddress.ip_network(s["properties"]["addressPrefix"])
        for s in vnet["properties"]["subnets"]
    }
    assert not any(net.overlaps(rdma) for net in subnets.values())
    assert subnets["compute"].num_addresses - 5 >= 2048
    assert subnets["lustre-0"].prefixlen == 24  # 100 TiB: /24 per Microsoft's table
    nets = list(subnets.values())
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])


def test_lustre_has_blob_integration_and_the_plans_size(big):
    d, template = big
    (fs,) = _of(template, "Microsoft.StorageCache/amlFilesystems")
    volume = d.plan.checkpoints.volume
    assert fs["sku"]["name"] == "AMLFS-Durable-Premium-500"
    # sized by the write curve: writes get ~71 % of the rating at this size (plan/lustre.py)
    assert fs["properties"]["storageCapacityTiB"] == round(volume.size_bytes / 2**40) == 136
    hsm = fs["properties"]["hsm"]["settings"]
    assert "'checkpoints'" in hsm["container"] and "'lustre-logs'" in hsm["loggingContainer"]
    assert fs["properties"]["maintenanceWindow"] == {
        "dayOfWeek": "Saturday",
        "timeOfDayUTC": "23:00",
    }
    params = json.loads((d.out / "main.json").read_text())["parameters"]
    assert "az ad sp show" in params["amlfsPrincipalId"]["metadata"]["description"]


def test_storage_is_hardened_and_only_the_lustre_account_allows_shared_keys(big):
    _, template = big
    accounts = _of(template, "Microsoft.Storage/storageAccounts")
    assert len(accounts) == 2
    for a in accounts:
        p = a["properties"]
        assert p["supportsHttpsTrafficOnly"] and p["minimumTlsVersion"] == "TLS1_2"
        assert p["allowBlobPublicAccess"] is False
        assert p["encryption"]["requireInfrastructureEncryption"] is True
        assert p["networkAcls"]["defaultAction"] == "Deny"
        assert p["allowSharedKeyAccess"] is a["name"].startswith("sl")
    containers = {
        c["name"].split("/")[-1]
        for c in _of(template, "Microsoft.Storage/storageAccounts/blobServices/containers")
    }
    assert {"data", "checkpoints", "models", "lustre-logs"} <= containers
    for svc in _of(template, "Microsoft.Storage/storageAccounts/blobServices"):
        assert svc["properties"]["isVersioningEnabled"] is True
        assert svc["properties"]["deleteRetentionPolicy"]["enabled"] is True
    roles = _of(template, "Microsoft.Authorization/roleAssignments")
    assert {r["properties"]["principalId"] for r in roles} >= {"[parameters('amlfsPrincipalId')]"}


def test_every_resource_is_tagged_with_plan_cost_and_teardown_time(big):
    d, template = big
    total = f"{d.per_hour_usd:.2f}"
    sets = _of(template, "Microsoft.Compute/virtualMachineScaleSets")
    assert sets[0]["tags"]["stoker-usd-per-hour"] == f"{300 * 98.32:.2f}"  # its own, per hour
    for r in template["resources"]:
        if "tags" not in r:
            assert r["type"].count("/") > 1 or r["type"].endswith("roleAssignments"), r["type"]
            continue
        assert r["tags"]["stoker-plan"] == "llama3-405b-scale"
        assert r["tags"]["stoker-plan-usd-per-hour"] == total
        own = r["tags"]["stoker-usd-per-hour"]
        assert own == "unknown" or float(own) >= 0
        teardown = dt.datetime.fromisoformat(r["tags"]["teardown-after"].replace("Z", "+00:00"))
        assert teardown - NOW >= dt.timedelta(seconds=d.plan.run.wall_s)


def test_cloud_init_scratch_lustre_doctor_and_its_mgs_filled_by_arm(big):
    d, template = big
    text = (d.out / "cloud-init.yaml").read_text()
    assert text.startswith("#cloud-config")
    # The set-up itself runs as boot units (tests/test_node_setup.py, test_node_units.py).
    assert "mdadm --create" in text and "STOKER_SCRATCH=/mnt/nvme\n" in text
    assert "__LUSTRE_MGS_CHECKPOINTS__@tcp:/lustrefs /lustre/checkpoints lustre " in text
    assert "STOKER_DOCTOR_JSON=/var/log/stoker-doctor.json" in text
    assert f"STOKER_INSTALL=stoker=={stoker.__version__}\n" in text  # pinned, this version
    assert template["variables"]["cloudInit"] == text
    custom = _of(template, "Microsoft.Compute/virtualMachineScaleSets")[0]["properties"][
        "virtualMachineProfile"
    ]["osProfile"]["customData"]
    assert "'__LUSTRE_MGS_CHECKPOINTS__'" in custom and ".clientInfo.mgsAddress" in custom


def test_data_on_lustre_imports_the_source_prefix(tmp_path):
    spec = tmp_path / "job.toml"
    spec.write_text(LUSTRE_DATA)
    d = stoker.provision(spec, tmp_path / "out", now=NOW)
    template = json.loads((tmp_path / "out" / "main.json").read_text())
    (fs,) = _of(template, "Microsoft.StorageCache/amlFilesystems")
    assert fs["properties"]["hsm"]["settings"]["importPrefixesInitial"] == ["/tokens/v1"]
    assert "'data'" in fs["properties"]["hsm"]["settings"]["container"]
    assert [lu.role for lu in d.layout.lustres] == ["data"]
    ccws = json.loads((tmp_path / "out" / "ccws.parameters.json").read_text())["parameters"]
    assert ccws["additionalFilesystem"]["value"]["type"] == "aml-existing"
    assert ccws["gpu"]["value"] == {
        "sku": "Standard_ND96isr_H100_v5",
        "osImage": "cycle.image.ubuntu24",
        "maxNodes": 64,
    }
    # Every node array on Ubuntu 24.04 (python3 3.12 runs stoker's set-up; 22.04's 3.10 does not).
    assert {v["value"]["osImage"] for v in ccws.values() if "osImage" in str(v)} == {
        "cycle.image.ubuntu24"
    }


def test_no_lustre_means_one_account_without_shared_keys(tmp_path):
    stoker.provision(EXAMPLES / "finetune-1vm.toml", tmp_path / "out", now=NOW)
    template = json.loads((tmp_path / "out" / "main.json").read_text())
    assert not _of(template, "Microsoft.StorageCache/amlFilesystems")
    (account,) = _of(template, "Microsoft.Storage/storageAccounts")
    assert account["properties"]["allowSharedKeyAccess"] is False
    assert "amlfsPrincipalId" not in template["parameters"]


def test_provision_of_2048_vms_is_fast(tmp_path):
    stoker.provision(BIG, tmp_path / "warm")  # imports and catalog load, once
    started = time.perf_counter()
    d = stoker.provision(BIG, tmp_path / "out")
    assert time.perf_counter() - started < 1.0
    assert d.elapsed_s < 1.0


# ------------------------------------------------------------------------------ refusals

runner = CliRunner()


def _refused(tmp_path, args: list[str], field: str, spec: Path | str = BIG) -> None:
    out = tmp_path / "deploy"
    result = runner.invoke(app, ["provision", str(spec), "--out", str(out), *args])
    assert result.exit_code == 2, (result.output, result.exception)
    assert field in result.output, result.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--address-space", "172.16.0.0/16"], "address_space: 172.16.0.0/16 overlaps"),
        (["--address-space", "10.0.0.0/24"], "address_space: 10.0.0.0/24 is too small"),
        (["--address-space", "8.8.0.0/16"], "address_space"),
        (["--name", "Bad_Name"], "name"),
        (["--resource-group", "rg with spaces"], "resource_group"),
        (["--admin-username", "root"], "admin_username"),
    ],
)
def test_refusals_name_the_field_and_write_nothing(tmp_path, args, field):
    _refused(tmp_path, args, field)


def test_refuses_a_region_name_azure_does_not_use(tmp_path):
    spec = tmp_path / "job.toml"
    spec.write_text(BIG.read_text().replace('region = "eastus"', 'region = "East US"'))
    _refused(tmp_path, [], "cluster.region", spec)


def test_refuses_a_vm_size_the_catalog_says_the_region_lacks(tmp_path):
    override = tmp_path / "regions.toml"
    override.write_text('[vm.ND96isr_H100_v5]\nregions = ["westus3", "southcentralus"]\n')
    _refused(tmp_path, ["--catalog", str(override)], "cluster.region")
    ok = runner.invoke(
        app, ["provision", str(BIG), "--out", str(tmp_path / "ok"), "--catalog", str(override)]
    )
    assert ok.exit_code == 2  # still eastus: refused; the same override with the region passes
    override.write_text('[vm.ND96isr_H100_v5]\nregions = ["eastus"]\n')
    ok = runner.invoke(
        app, ["provision", str(BIG), "--out", str(tmp_path / "ok2"), "--catalog", str(override)]
    )
    assert ok.exit_code == 0, ok.output


def test_refuses_a_scale_set_larger_than_a_placement_group(tmp_path):
    spec = tmp_path / "job.toml"
    spec.write_text(
        BIG.read_text().replace('placement = "scale_set_on_request"', "fabric_boundary_vms = 500")
    )
    _refused(tmp_path, [], "cluster.fabric_boundary_vms", spec)


def test_refuses_an_out_path_that_is_a_file_or_holds_other_files(tmp_path):
    (tmp_path / "deploy").write_text("x")
    result = runner.invoke(app, ["provision", str(BIG), "--out", str(tmp_path / "deploy")])
    assert result.exit_code == 2 and "--out" in result.output
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    result = runner.invoke(app, ["provision", str(BIG), "--out", str(busy)])
    assert result.exit_code == 2 and "notes.txt" in result.output
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"]


def test_refuses_a_private_key(tmp_path):
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n")
    _refused(tmp_path, ["--ssh-key", str(key)], "private key")


@pytest.mark.parametrize(
    ("tib", "message"),
    [(6, "not a multiple of its 4 TiB step"), (2, "not a multiple"), (4096, "exceeds")],
)
def test_lustre_capacity_steps_and_ceiling(tib, message):
    with pytest.raises(ProvisionError, match=message) as info:
        check_lustre("checkpoints.tier", "AMLFS-Durable-Premium-500", tib, load_catalog())
    assert str(info.value).startswith("checkpoints.tier:")
    check_lustre("checkpoints.tier", "AMLFS-Durable-Premium-500", 100, load_catalog())


def test_cli_json_summary_and_ssh_key(tmp_path):
    key = tmp_path / "id.pub"
    key.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample test@host\n")
    out = tmp_path / "deploy"
    result = runner.invoke(
        app,
        [
            "provision",
            str(EXAMPLES / "pretrain-64vm.toml"),
            "--out",
            str(out),
            "--json",
            "--ssh-key",
            str(key),
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["schema"] == "stoker.deployment/1"
    assert summary["files"] == [
        "main.json",
        "main.parameters.json",
        "cloud-init.yaml",
        "ccws.parameters.json",
        "README.md",
        "stoker-deployment.json",
    ]
    assert [s["vms"] for s in summary["scale_sets"]] == [64]
    params = json.loads((out / "main.parameters.json").read_text())["parameters"]
    assert params["sshPublicKey"]["value"].startswith("ssh-ed25519 ")
    readme = (out / "README.md").read_text()
    assert "az deployment group create --resource-group rg-pretrain-70b-64vm" in readme
    assert "sshPublicKey=" not in readme.split("## Deploy")[1].split("```")[1]


def _spec_on(tmp_path: Path, vm_size: str) -> Path:
    spec = tmp_path / "job.toml"
    spec.write_text(
        (EXAMPLES / "pretrain-64vm.toml").read_text().replace("ND96isr_H100_v5", vm_size)
    )
    return spec


def test_mi300x_gets_the_rocm_image(tmp_path):
    spec = _spec_on(tmp_path, "ND96isr_MI300X_v5")
    stoker.provision(spec, tmp_path / "out", now=NOW)
    template = json.loads((tmp_path / "out" / "main.json").read_text())
    image = _of(template, "Microsoft.Compute/virtualMachineScaleSets")[0]["properties"][
        "virtualMachineProfile"
    ]["storageProfile"]["imageReference"]
    assert image["sku"] == "2404-rocm"


def test_refuses_a_size_with_no_known_image(tmp_path):
    _refused(tmp_path, [], "cluster.vm_size", _spec_on(tmp_path, "ND128isr_NDR_GB200_v6"))


VOLUME_SPEC = """
name = "{name}"
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


def _volume_deploy(tmp_path: Path, tier: str) -> tuple[stoker.Deployment, dict]:
    spec = tmp_path / "job.toml"
    spec.write_text(VOLUME_SPEC.format(name=f"{tier}-data", tier=tier))
    d = stoker.provision(spec, tmp_path / "out", now=NOW)
    return d, json.loads((tmp_path / "out" / "main.json").read_text())


def test_netapp_volume_where_the_plan_chose_it(tmp_path):
    d, template = _volume_deploy(tmp_path, "netapp")
    (pool,) = _of(template, "Microsoft.NetApp/netAppAccounts/capacityPools")
    (vol,) = _of(template, "Microsoft.NetApp/netAppAccounts/capacityPools/volumes")
    chosen = d.plan.data.chosen
    assert chosen.tier == "netapp"
    props = vol["properties"]
    assert props["usageThreshold"] >= chosen.size_bytes
    assert pool["properties"]["size"] >= props["usageThreshold"]
    assert pool["properties"]["size"] % 2**40 == 0
    assert props["serviceLevel"] == pool["properties"]["serviceLevel"] == "Ultra"
    assert props["isLargeVolume"] is True  # >= 50 TiB: the figures the plan assumed
    assert props["protocolTypes"] == ["NFSv4.1"]
    assert "'netapp')]" in props["subnetId"]
    assert props["exportPolicy"]["rules"][0]["allowedClients"] == d.layout.compute_subnet.cidr
    text = (tmp_path / "out" / "cloud-init.yaml").read_text()
    assert "__NETAPP_IP_DATA__:/data /mnt/data" in text
    custom = _of(template, "Microsoft.Compute/virtualMachineScaleSets")[0]["properties"][
        "virtualMachineProfile"
    ]["osProfile"]["customData"]
    assert "'__NETAPP_IP_DATA__'" in custom and "mountTargets[0].ipAddress" in custom


def test_files_share_where_the_plan_chose_it(tmp_path):
    d, template = _volume_deploy(tmp_path, "files")
    accounts = {a["name"][:2]: a for a in _of(template, "Microsoft.Storage/storageAccounts")}
    assert set(accounts) == {"st", "sf"}
    files = accounts["sf"]
    assert files["kind"] == "FileStorage" and files["sku"]["name"] == "Premium_LRS"
    # NFS needs secure transfer off: that account alone, and only the compute subnet gets in.
    assert files["properties"]["supportsHttpsTrafficOnly"] is False
    assert accounts["st"]["properties"]["supportsHttpsTrafficOnly"] is True
    assert len(files["properties"]["networkAcls"]["virtualNetworkRules"]) == 1
    (share,) = _of(template, "Microsoft.Storage/storageAccounts/fileServices/shares")
    assert share["properties"]["enabledProtocols"] == "NFS"
    assert share["properties"]["shareQuota"] * 2**30 >= d.plan.data.chosen.size_bytes
    text = (tmp_path / "out" / "cloud-init.yaml").read_text()
    assert f"{files['name']}.file.core.windows.net:/{files['name']}/data /mnt/data" in text


def test_cli_check_validates_what_it_wrote(tmp_path):
    out = tmp_path / "deploy"
    args = ["provision", str(EXAMPLES / "finetune-1vm.toml"), "--out", str(out), "--check"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    check = json.loads(result.stdout)["check"]
    assert check["schema_errors"] == [] and check["checkov_failed"] == []
    assert check["resources"] == len(json.loads((out / "main.json").read_text())["resources"])


def test_readme_says_when_a_limit_needs_a_support_request(big):
    d, _ = big
    notes = (d.out / "README.md").read_text().split("## Notes", 1)[1]
    assert "Scale sets of up to 300 VMs" in notes and "support request" in notes


def test_short_names_still_make_a_valid_ccws_cluster_name(tmp_path):
    stoker.provision(EXAMPLES / "finetune-1vm.toml", tmp_path / "out", now=NOW, name="ab")
    from stoker.provision.validate import ccws_errors

    params = json.loads((tmp_path / "out" / "ccws.parameters.json").read_text())
    assert ccws_errors(params) == []


def test_an_out_folder_that_cannot_be_written_is_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    out = blocker / "deploy"  # its parent is a file: no user can make it
    result = runner.invoke(app, ["provision", str(BIG), "--out", str(out)])
    assert result.exit_code == 2, (result.output, result.exception)
    assert f"--out {out}: cannot write the deployment there" in result.output
    assert "Traceback" not in result.output and blocker.read_text() == "x"
