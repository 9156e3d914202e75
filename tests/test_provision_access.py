"""The way in (``--access``, ``--blob-access``, ``--deployer-ip``): Azure Bastion by default, a
login VM or nothing; the Blob account reachable from outside through an IP rule or a private
endpoint. Each deployment is checked against the strict ARM schemas and checkov, every resource
carries the ownership tag teardown reads, and the README's commands parse and pass their words
through as written."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import re
import subprocess
from pathlib import Path

import pytest

import stoker
from stoker.errors import ProvisionError
from stoker.provision import validate
from stoker.provision.tags import TAG_DEPLOYMENT

EXAMPLES = Path(__file__).parent.parent / "examples"
SMALL = EXAMPLES / "pretrain-64vm.toml"
NOW = dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC)
CHECKOV = validate.find_checkov()


def _deploy(tmp_path: Path, **opts) -> tuple[stoker.Deployment, dict, str]:
    out = tmp_path / "out"
    d = stoker.provision(SMALL, out, now=NOW, **opts)
    return d, json.loads((out / "main.json").read_text()), (out / "README.md").read_text()


def _of(template: dict, type_: str) -> list[dict]:
    return [r for r in template["resources"] if r["type"] == type_]


def _subnets(template: dict) -> dict[str, dict]:
    (vnet,) = _of(template, "Microsoft.Network/virtualNetworks")
    return {s["name"]: s["properties"] for s in vnet["properties"]["subnets"]}


def _account(template: dict) -> dict:
    return _of(template, "Microsoft.Storage/storageAccounts")[0]


def _valid(out: Path) -> None:
    # make test installs checkov (Makefile); without it this check cannot be made.
    assert CHECKOV, "checkov not installed: make checkov"
    report = validate.check(out, checkov=CHECKOV)
    assert report.schema_errors == []
    assert report.checkov_failed == []


def _owned(d: stoker.Deployment, template: dict) -> None:
    """Every top-level resource (child resources and role assignments carry no tags) has the
    tag teardown proves ownership by, with this deployment's id."""
    for r in template["resources"]:
        if r["type"].count("/") == 1 and r["type"] != "Microsoft.Authorization/roleAssignments":
            assert r["tags"][TAG_DEPLOYMENT] == d.layout.deployment_id, r["name"]


def _sh_blocks(readme: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", readme, flags=re.S)


def test_bastion_is_the_default_and_the_deployment_validates(tmp_path):
    d, template, readme = _deploy(tmp_path)
    (host,) = _of(template, "Microsoft.Network/bastionHosts")
    assert host["sku"] == {"name": "Standard"}
    assert host["properties"]["enableTunneling"] is True
    assert host["properties"]["enableIpConnect"] is True
    (ipconf,) = host["properties"]["ipConfigurations"]
    assert "AzureBastionSubnet" in ipconf["properties"]["subnet"]["id"]
    pips = {p["name"] for p in _of(template, "Microsoft.Network/publicIPAddresses")}
    assert pips == {"pip-pretrain-70b-64vm-nat", "pip-pretrain-70b-64vm-bastion"}
    bastion = _subnets(template)["AzureBastionSubnet"]
    # /26 at least; no NSG (Bastion's own rules would be needed) and no NAT gateway.
    assert ipaddress.ip_network(bastion["addressPrefix"]).prefixlen <= 26
    assert "networkSecurityGroup" not in bastion and "natGateway" not in bastion
    assert not _of(template, "Microsoft.Compute/virtualMachines")
    # No VM anywhere has a public address: the NSG still denies the Internet.
    (nsg,) = _of(template, "Microsoft.Network/networkSecurityGroups")
    assert [r["name"] for r in nsg["properties"]["securityRules"]] == [
        "allow-vnet-in",
        "deny-internet-in",
        "allow-azurecloud-out",
    ]
    _owned(d, template)
    assert [line.name for line in d.bill.lines if line.resource == "bastionHost"] == [
        "bas-pretrain-70b-64vm"
    ]
    assert "## Getting in" in readme and "az network bastion ssh --name bas-pretrain" in readme
    _valid(tmp_path / "out")


def test_the_default_blob_access_lets_the_deployers_address_through(tmp_path):
    d, template, readme = _deploy(tmp_path)
    acls = _account(template)["properties"]["networkAcls"]
    assert acls["defaultAction"] == "Deny"
    assert acls["ipRules"] == [{"value": "[parameters('deployerIp')]", "action": "Allow"}]
    assert template["parameters"]["deployerIp"]["type"] == "string"
    deploy = [line for line in _sh_blocks(readme)[0].splitlines() if "deployment group" in line]
    assert deploy and all('deployerIp="$(curl -fsS https://ifconfig.me)"' in x for x in deploy)
    # The deploy line hands az the address as one parameter (curl and az stubbed).
    stub = 'curl() { printf 20.1.2.3; }; az() { printf "%s\\0" "$@"; }; '
    ran = subprocess.run(["bash", "-c", stub + deploy[-1]], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert "deployerIp=20.1.2.3" in ran.stdout.split("\0")


def test_a_given_deployer_ip_is_written_literally_and_checked(tmp_path):
    _, template, readme = _deploy(tmp_path, deployer_ip="20.1.2.3/32")
    acls = _account(template)["properties"]["networkAcls"]
    assert acls["ipRules"] == [{"value": "20.1.2.3", "action": "Allow"}]  # /32: one address
    assert "deployerIp" not in template["parameters"]
    assert "deployerIp=" not in readme
    for bad, why in (
        ("10.1.2.3", "public"),
        ("20.1.2.0/31", "/8 to /30"),
        ("not-an-ip", "not an IPv4"),
    ):
        with pytest.raises(ProvisionError, match=rf"^deployer_ip: .*{why}"):
            stoker.provision(SMALL, tmp_path / "bad", deployer_ip=bad)
        assert not (tmp_path / "bad").exists()  # refused before anything is written


def test_login_vm_admits_ssh_from_the_deployer_only(tmp_path):
    d, template, readme = _deploy(tmp_path, access="login-vm", deployer_ip="20.1.2.3")
    assert not _of(template, "Microsoft.Network/bastionHosts")
    (vm,) = _of(template, "Microsoft.Compute/virtualMachines")
    linux = vm["properties"]["osProfile"]["linuxConfiguration"]
    assert linux["disablePasswordAuthentication"] is True
    assert "adminPassword" not in vm["properties"]["osProfile"]
    (nic,) = _of(template, "Microsoft.Network/networkInterfaces")
    conf = nic["properties"]["ipConfigurations"][0]["properties"]
    assert "'login')" in conf["subnet"]["id"] and "pip-pretrain-70b-64vm-login" in str(conf)
    login = _subnets(template)["login"]["addressPrefix"]
    (nsg,) = _of(template, "Microsoft.Network/networkSecurityGroups")
    rules = {r["name"]: r["properties"] for r in nsg["properties"]["securityRules"]}
    ssh = rules["allow-ssh-deployer-to-login"]
    assert (ssh["sourceAddressPrefix"], ssh["destinationAddressPrefix"]) == ("20.1.2.3", login)
    assert (ssh["destinationPortRange"], ssh["protocol"], ssh["access"]) == ("22", "Tcp", "Allow")
    assert ssh["priority"] < rules["deny-internet-in"]["priority"]
    # Staging through the login VM reaches Blob: its subnet is in the firewall's rules.
    vnet_rules = _account(template)["properties"]["networkAcls"]["virtualNetworkRules"]
    assert any("'login')" in r["id"] for r in vnet_rules)
    _owned(d, template)
    # Teardown deallocates the scale sets only: the login VM is billed while the GPUs idle.
    (line,) = [x for x in d.bill.lines if x.resource == "virtualMachine"]
    assert line.while_idle and line.per_hour_usd is None
    assert "ssh -A -J" in readme
    _valid(tmp_path / "out")


def test_private_endpoints_and_no_way_in(tmp_path):
    d, template, readme = _deploy(tmp_path, access="none", blob_access="private-endpoint")
    assert not _of(template, "Microsoft.Network/bastionHosts")
    assert not _of(template, "Microsoft.Compute/virtualMachines")
    pips = [p["name"] for p in _of(template, "Microsoft.Network/publicIPAddresses")]
    assert pips == ["pip-pretrain-70b-64vm-nat"]
    (pe,) = _of(template, "Microsoft.Network/privateEndpoints")
    link = pe["properties"]["privateLinkServiceConnections"][0]["properties"]
    assert link["groupIds"] == ["blob"]
    assert _account(template)["name"] in link["privateLinkServiceId"]
    assert "'endpoints')" in pe["properties"]["subnet"]["id"]
    assert _account(template)["properties"]["networkAcls"]["ipRules"] == []
    assert "deployerIp" not in template["parameters"]
    assert "--access none" in readme and "az network private-endpoint show" in readme
    _owned(d, template)
    _valid(tmp_path / "out")


def test_nothing_with_none_and_none(tmp_path):
    _, template, readme = _deploy(tmp_path, access="none", blob_access="none")
    names = set(_subnets(template))
    assert names == {"compute", "cyclecloud", "netapp"}
    for type_ in ("bastionHosts", "privateEndpoints", "networkInterfaces"):
        assert not _of(template, f"Microsoft.Network/{type_}")
    assert "deployerIp" not in template["parameters"]
    assert "stage from a node" in readme


@pytest.mark.parametrize(
    "opts", [{}, {"access": "login-vm", "blob_access": "private-endpoint"}], ids=["bastion", "vm"]
)
def test_the_way_ins_subnets_fit_the_address_space_without_overlap(tmp_path, opts):
    _, template, _ = _deploy(tmp_path, address_space="10.4.0.0/22", **opts)
    nets = [ipaddress.ip_network(s["addressPrefix"]) for s in _subnets(template).values()]
    space = ipaddress.ip_network("10.4.0.0/22")
    assert all(n.subnet_of(space) for n in nets)
    for i, a in enumerate(nets):
        assert not any(a.overlaps(b) for b in nets[i + 1 :]), nets


def test_every_readme_command_parses_for_each_way_in(tmp_path):
    for i, opts in enumerate(
        [{}, {"access": "login-vm"}, {"access": "none", "blob_access": "private-endpoint"}]
    ):
        out = tmp_path / str(i)
        stoker.provision(SMALL, out, now=NOW, resource_group="rg(a)b", **opts)
        for block in _sh_blocks((out / "README.md").read_text()):
            parsed = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
            assert parsed.returncode == 0, (parsed.stderr, block)


def test_the_cli_takes_the_way_in_and_refuses_a_bad_one_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from stoker.cli import app

    runner = CliRunner()
    out = tmp_path / "out"
    ok = runner.invoke(
        app,
        ["provision", str(SMALL), "--out", str(out), "--access", "login-vm", "--json"]
        + ["--blob-access", "private-endpoint", "--deployer-ip", "20.1.2.3"],
    )
    assert ok.exit_code == 0, ok.output
    types = {r["type"] for r in json.loads(ok.stdout)["resources"]}
    assert {"Microsoft.Compute/virtualMachines", "Microsoft.Network/privateEndpoints"} <= types
    bad = runner.invoke(
        app, ["provision", str(SMALL), "--out", str(tmp_path / "x"), "--deployer-ip", "10.0.0.1"]
    )
    assert bad.exit_code == 2
    assert len(bad.output.strip().splitlines()) == 1 and "deployer_ip" in bad.output
    wrong = runner.invoke(
        app, ["provision", str(SMALL), "--out", str(tmp_path / "y"), "--access", "vpn"]
    )
    assert wrong.exit_code == 2 and "vpn" in wrong.output


def test_the_way_in_is_priced_on_top_of_the_plan(tmp_path):
    with_bastion, _, readme = _deploy(tmp_path)
    bare = stoker.provision(SMALL, tmp_path / "bare", now=NOW, access="none")
    names = {line.name for line in bare.bill.lines}
    extra = [line for line in with_bastion.bill.lines if line.name not in names]
    assert {line.name for line in extra} == {
        "pip-pretrain-70b-64vm-bastion",
        "bas-pretrain-70b-64vm",
    }
    priced = sum(line.per_hour_usd or 0.0 for line in extra)
    assert with_bastion.bill.per_hour_usd == pytest.approx(bare.bill.per_hour_usd + priced)
    # Bastion has no price in the catalog: unknown, never $0, and named as unpriced.
    (host,) = [line for line in extra if line.resource == "bastionHost"]
    assert host.per_hour_usd is None and host.while_idle
    assert "bas-pretrain-70b-64vm" in with_bastion.bill.unknown
    assert "| bastionHost | `bas-pretrain-70b-64vm` |" in readme and "unknown |" in readme


def test_the_spec_chooses_the_way_in_and_the_option_overrides_it(tmp_path):
    spec = tmp_path / "job.toml"
    text = SMALL.read_text()
    assert "[cluster]\n" in text
    spec.write_text(
        text.replace("[cluster]\n", '[cluster]\naccess = "login-vm"\nblob_access = "none"\n', 1)
    )
    d = stoker.provision(spec, tmp_path / "a", now=NOW)
    assert (d.layout.access.kind, d.layout.access.blob) == ("login-vm", "none")
    d = stoker.provision(spec, tmp_path / "b", now=NOW, access="bastion")
    assert (d.layout.access.kind, d.layout.access.blob) == ("bastion", "none")
    spec.write_text(text.replace("[cluster]\n", '[cluster]\naccess = "vpn"\n', 1))
    with pytest.raises(stoker.errors.SpecError, match="cluster.access"):
        stoker.provision(spec, tmp_path / "c", now=NOW)
