"""The README's way in: how to reach a node, how to stage data into Blob from outside, and what
the CycleCloud Workspace for Slurm path needs besides its parameters file (the marketplace
terms, stoker's node set-up as a cluster-init project, how CycleCloud splits node arrays into
scale sets). Every command is one line that ``bash -n`` parses, with each word stoker did not
write itself quoted (``_text.sh``)."""

from __future__ import annotations

import re

from ..catalog import Provisioning
from . import _ccws_init
from ._access import DEPLOYER_PARAM
from ._ccws import MAX_NODES, gpu_nodes
from ._layout import Layout
from ._refs import account_name
from ._res_access import bastion_name, endpoint_name, login_name
from ._text import sh

CCWS_TERMS_URN = "azurecyclecloud:azure-cyclecloud:cyclecloud8-gen2:latest"
# CycleCloud's default scale-set size for a node array (cyclecloud-slurm's HPCMaxScalesetSize,
# 100 in CCWS's initial_params.json).
CCWS_SCALESET_VMS = 100
MY_IP = "$(curl -fsS https://ifconfig.me)"


def deploy_args(lay: Layout) -> str:
    """What the deploy line adds for the way in: the deployer's address when not given."""
    if lay.access.needs_deployer_ip and not lay.access.deployer_ip:
        return f' {DEPLOYER_PARAM}="{MY_IP}"'
    return ""


def _first_node_ip(lay: Layout) -> str:
    rg = sh(lay.resource_group)
    vmss = sh(lay.scale_sets[0].name)
    return (
        f"NODE_IP=$(az vmss nic list --resource-group {rg} --vmss-name {vmss} "
        "--query '[0].ipConfigurations[0].privateIPAddress' -o tsv)"
    )


def reach_commands(lay: Layout) -> list[str]:
    rg = sh(lay.resource_group)
    user = sh(lay.admin_username)
    if lay.access.kind == "bastion":
        bas = sh(bastion_name(lay))
        return [
            _first_node_ip(lay),
            f"az network bastion ssh --name {bas} --resource-group {rg} "
            f'--target-ip-address "$NODE_IP" --auth-type ssh-key --username {user} '
            "--ssh-key ~/.ssh/id_ed25519",
            f"az network bastion tunnel --name {bas} --resource-group {rg} "
            '--target-ip-address "$NODE_IP" --resource-port 22 --port 2222 &   '
            "# then: scp -P 2222 FILE " + f"{lay.admin_username}@127.0.0.1:",
        ]
    if lay.access.kind == "login-vm":
        vm = sh(login_name(lay))
        return [
            f"LOGIN_IP=$(az vm show --show-details --resource-group {rg} --name {vm} "
            "--query publicIps -o tsv)",
            _first_node_ip(lay),
            f'ssh -A -J {user}@"$LOGIN_IP" {user}@"$NODE_IP"',
        ]
    return []


def stage_commands(lay: Layout) -> list[str]:
    rg = sh(lay.resource_group)
    acct = sh(account_name(lay, "main"))
    url = f"https://{account_name(lay, 'main')}.blob.core.windows.net/data/"
    me = "$(az ad signed-in-user show --query id -o tsv)"
    scope = f"$(az storage account show --resource-group {rg} --name {acct} --query id -o tsv)"
    role = (
        f'az role assignment create --assignee "{me}" '
        f'--role "Storage Blob Data Contributor" --scope "{scope}"'
    )
    copy = f"azcopy login && azcopy copy ./my-data {sh(url)} --recursive"
    if lay.access.blob == "firewall-ip":
        return [
            role,
            copy,
            f"az storage account network-rule add --resource-group {rg} --account-name {acct} "
            f'--ip-address "{MY_IP}"   # when your address changed',
        ]
    if lay.access.blob == "private-endpoint":
        pe = sh(endpoint_name(lay, "main"))
        return [
            f"az network private-endpoint show --resource-group {rg} --name {pe} "
            "--query 'customDnsConfigs[0].ipAddresses[0]' -o tsv   "
            f"# map {account_name(lay, 'main')}.blob.core.windows.net to this address",
            role,
            copy,
        ]
    return []


def render(lay: Layout) -> list[str]:
    """The ``## Getting in`` and ``## Staging data into Blob`` sections."""
    a = lay.access
    out = ["## Getting in", ""]
    if a.kind == "bastion":
        out += [
            f"`{bastion_name(lay)}` (Azure Bastion, Standard) is the way in: the nodes have no "
            "public address and the NSG denies the Internet. Its native client (`az network "
            "bastion`, the Azure CLI's `bastion` extension, installed on first use) opens SSH "
            "to a node by its private address, or a local tunnel for scp and rsync. You need "
            "Reader on the Bastion, the scale set and its NICs. Bastion bills every hour it "
            f"exists: `az network bastion delete --name {bastion_name(lay)} --resource-group "
            f"{lay.resource_group}` between sessions (redeploying main.json brings it back).",
        ]
    elif a.kind == "login-vm":
        out += [
            f"`{login_name(lay)}` is the way in: the only public SSH in the deployment, open "
            "to "
            + (f"`{a.deployer_ip}`" if a.deployer_ip else "the address you deploy from")
            + " only; hop through it to a node (`-J`). It holds the deployment's identity, "
            "so `azcopy login --identity` on it writes to Blob.",
        ]
    else:
        out += [
            "No way in was created (`--access none`): reach the VNet through your own VPN, "
            "ExpressRoute or peering, then SSH to a node's private address.",
        ]
    if reach_commands(lay):
        out += ["", "```sh", *reach_commands(lay), "```"]
    out += ["", "## Staging data into Blob", ""]
    if a.blob == "firewall-ip":
        who = f"`{a.deployer_ip}`" if a.deployer_ip else "the address you deployed from"
        out.append(
            f"The storage firewall admits the VNet's subnets and {who} (`--blob-access "
            "firewall-ip`). Data-plane access is by Entra ID: give yourself Storage Blob Data "
            "Contributor on the account, then copy with azcopy:"
        )
    elif a.blob == "private-endpoint":
        out.append(
            "The accounts have blob private endpoints in the `endpoints` subnet "
            "(`--blob-access private-endpoint`); the firewall stays closed to the Internet. "
            "From a network joined to the VNet (VPN, ExpressRoute, peering), resolve the "
            "account's blob name to the endpoint's address (a `privatelink.blob.core.windows."
            "net` private DNS zone linked to your network, or a hosts entry: no zone is "
            "created here), then copy as usual:"
        )
    else:
        out.append(
            "The storage firewall admits only the VNet (`--blob-access none`): stage from a "
            "node (`azcopy login --identity`, or `stoker stage`), having copied the data "
            "there through the way in above."
        )
    if stage_commands(lay):
        out += ["", "```sh", *stage_commands(lay), "```"]
    return [*out, ""]


def _fence(text: str) -> str:
    run = max((len(r) for r in re.findall(r"`+", text)), default=0)
    return "`" * max(3, run + 1)


def cluster_init_commands(lay: Layout) -> list[str]:
    """Cut the node set-up out of this README, fill in what ARM decided, publish it."""
    from ._cloud_init import nfs_placeholder, placeholder
    from ._res_volumes import pool_name, volume_name

    rg = sh(lay.resource_group)
    fills = []
    for lu in lay.lustres:
        fills.append(
            f'-e "s/{placeholder(lu)}/$(az deployment group show --resource-group {rg} '
            f'--name stoker --query properties.outputs.lustreMgsAddress_{lu.role}.value -o tsv)/"'
        )
    for v in lay.volumes:
        if v.kind == "netapp":
            account, pool = pool_name(lay, v).split("/")
            fills.append(
                f'-e "s/{nfs_placeholder(v)}/$(az netappfiles volume show --resource-group {rg} '
                f"--account-name {sh(account)} --pool-name {sh(pool)} "
                f"--name {sh(volume_name(lay, v).split('/')[-1])} "
                "--query 'mountTargets[0].ipAddress' -o tsv)/\""
            )
    script = f"{_ccws_init.SCRIPT_DIR}/{_ccws_init.SCRIPT}"
    project = _ccws_init.PROJECT
    return [
        f"az vm image terms accept --urn {CCWS_TERMS_URN}   # once per subscription",
        f"mkdir -p {_ccws_init.SCRIPT_DIR}",
        "printf '%s\\n' "
        + " ".join(sh(line) for line in _ccws_init.PROJECT_INI.splitlines())
        + f" > {_ccws_init.PROJECT}/project.ini",
        f"{_ccws_init.CUT} | sed {' '.join(fills)} > {script}"
        if fills
        else f"{_ccws_init.CUT} > {script}",
        f"bash -n {script}",
        f"(cd {project} && git init -q && git add . && git commit -qm {project}"
        f" && gh repo create {project} --public --source . --push"
        f" && gh release create v{_ccws_init.PROJECT_VERSION} --notes {project})",
        f"STOKER_NODE_URL=https://github.com/$(gh api user --jq .login)/{_ccws_init.PROJECT}"
        f"/releases/tag/v{_ccws_init.PROJECT_VERSION}",
    ]


def ccws_sections(lay: Layout, facts: Provisioning, cloud_init: str) -> list[str]:
    """The CCWS notes and stoker's node set-up as the cluster-init script."""
    body = _ccws_init.script(cloud_init)
    fence = _fence(body)
    out = [
        "### Before the CCWS deployment",
        "",
        "CycleCloud's VM image has a marketplace plan: accept its terms once per subscription. "
        "CCWS takes node set-up only as cluster-init projects (`clusterInitSpecs`), and "
        f"release {facts.ccws_release} fetches them only from a GitHub release URL: these "
        f"lines make stoker's node set-up a project (`{_ccws_init.PROJECT}`, the script "
        "below, cut out of this README with the addresses ARM gave filled in), publish it and "
        f"set `STOKER_NODE_URL`, which the commands under it put in the parameters. The "
        "repository is public (CycleCloud fetches it without credentials), so it must hold no "
        "secret: if your `--install` requirement carries a token (a SAS URL), provision again "
        "with one that does not before publishing.",
        "",
        "```sh",
        *cluster_init_commands(lay),
        "```",
        "",
        f"CycleCloud puts a node array's VMs in scale sets of at most `HPCMaxScalesetSize` "
        f"({CCWS_SCALESET_VMS} in CCWS's defaults), and InfiniBand does not cross scale sets: "
        f"one job must fit one of them. The GPU partition holds {gpu_nodes(lay)} nodes",
    ]
    if lay.nodes > MAX_NODES:
        out[-1] += (
            f", the most the CCWS form takes ({MAX_NODES}), not the plan's {lay.nodes}: deploy "
            "this plan with main.json, not CCWS"
        )
    if gpu_nodes(lay) > CCWS_SCALESET_VMS:
        out[-1] += (
            f"; a job of more than {CCWS_SCALESET_VMS} needs the placement-group limit raised "
            "by support request and `HPCMaxScalesetSize` set to it in the cluster's settings "
            "(CycleCloud UI, or `cyclecloud import_cluster` with the parameter) before nodes "
            "start"
        )
    out[-1] += "."
    if lay.access.kind != "none":
        out[-1] += (
            " The way in above serves the CCWS nodes too: give the login node's private address "
            "(CycleCloud lists it) where the commands take a scale-set instance's."
        )
    out += [
        "",
        f"`{_ccws_init.SCRIPT_DIR}/{_ccws_init.SCRIPT}`:",
        "",
        f"{fence}bash",
        body.rstrip("\n"),
        fence,
        "",
    ]
    return out
