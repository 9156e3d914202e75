"""``README.md`` of a deployment: what will be created, in order, with size and hourly cost,
the totals per hour, the idle bill (an idle hour and day, Lustre's idle weekend, after
teardown) and the lifecycle rule, the node set-up, and the exact commands to deploy and to
tear down."""

from __future__ import annotations

import re

from ..catalog import Provisioning
from . import _readme_access
from ._cloud_init import DOCTOR_JSON, UNITS, python_min
from ._cloud_init import render as render_cloud_init
from ._cost import Bill, idle_lines
from ._layout import Layout
from ._res_lifecycle import DEFAULT_VERSION_DAYS, RULE, longest_billed_days
from ._res_storage import SOFT_DELETE_DAYS
from ._text import sh
from .tags import TAG_DEPLOYMENT


def money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def group_create(lay: Layout) -> str:
    """``az group create`` with the ownership tags (the VM and AKS paths both start with it)."""
    tags = " ".join(
        sh(f"{k}={v}")
        for k, v in (
            (TAG_DEPLOYMENT, lay.deployment_id),
            ("stoker-plan", lay.plan_name),
            ("teardown-after", lay.teardown_after.strftime("%Y-%m-%dT%H:%M:%SZ")),
        )
    )
    where = f"--name {sh(lay.resource_group)} --location {sh(lay.region)}"
    return f"az group create {where} --tags {tags}"


def amlfs_principal(lay: Layout, facts: Provisioning) -> str:
    """The deploy's ``amlfsPrincipalId`` argument where there is Lustre: the HPC Cache resource
    provider's object id differs per tenant, so the deployer's own tenant is asked."""
    if not lay.lustres:
        return ""
    return (
        f' amlfsPrincipalId="$(az ad sp show --id {sh(facts.hpc_cache_rp_app_id)} '
        '--query id -o tsv)"'
    )


def deploy_commands(lay: Layout, facts: Provisioning) -> list[str]:
    """The deploy lines; every word stoker did not write itself is one quoted shell word."""
    rg = sh(lay.resource_group)
    extra = ""
    if not lay.ssh_public_key:
        extra += ' sshPublicKey="$(cat ~/.ssh/id_ed25519.pub)"'
    extra += amlfs_principal(lay, facts)
    extra += _readme_access.deploy_args(lay)  # the deployer's address, for the way in
    deploy = (
        f"az deployment group create --resource-group {rg} --name stoker "
        f"--template-file main.json --parameters @main.parameters.json{extra}"
    )
    if not lay.lustres:
        return [group_create(lay), deploy]
    # Lustre's roles first, the file system (and the nodes that mount it) once they propagated.
    return [
        group_create(lay),
        f"{deploy} deployLustre=false   # 1: network, storage, role assignments",
        "sleep 300   # the roles reach the Lustre resource provider within five minutes",
        f"{deploy} deployLustre=true   # 2: Managed Lustre and the scale sets",
    ]


def teardown_commands(lay: Layout) -> list[str]:
    rg = sh(lay.resource_group)
    return [
        f"stoker teardown --dry-run . --resource-group {rg}   "
        "# each step and what it saves per hour",
        f"stoker teardown --yes . --resource-group {rg}   "
        "# archive Lustre to Blob, wait, delete it; deallocate the scale sets",
    ]


def ccws_commands(lay: Layout, facts: Provisioning) -> list[str]:
    rg = sh(lay.resource_group)
    return [
        f"git clone https://github.com/Azure/cyclecloud-slurm-workspace && "
        f"git -C cyclecloud-slurm-workspace checkout {sh(facts.ccws_commit)}",
        'sed -e "s/__SUBSCRIPTION_ID__/$(az account show --query id -o tsv)/" '
        + (
            f'-e "s/__LUSTRE_MGS_ADDRESS__/$(az deployment group show -g {rg} '
            f"-n stoker --query properties.outputs.lustreMgsAddress_"
            f"{_ccws_lustre_role(lay)}"
            '.value -o tsv)/" '
            if lay.lustres
            else ""
        )
        + ("" if lay.ssh_public_key else '-e "s|__SSH_PUBLIC_KEY__|$(cat ~/.ssh/id_ed25519.pub)|" ')
        + '-e "s|__STOKER_CLUSTER_INIT_URL__|$STOKER_NODE_URL|" '
        + "ccws.parameters.json > ccws.deploy.json",
        f"az deployment sub create --name {sh('ccws-' + lay.prefix)} --location {sh(lay.region)} "
        "--template-file cyclecloud-slurm-workspace/bicep/mainTemplate.bicep "
        "--parameters @ccws.deploy.json adminPassword=... databaseAdminPassword=...",
    ]


def shell_lines(lay: Layout, facts: Provisioning) -> list[str]:
    """Every command line the README shows, in its order (tests run each through bash -n)."""
    return [
        *deploy_commands(lay, facts),
        *_readme_access.reach_commands(lay),
        *_readme_access.stage_commands(lay),
        *teardown_commands(lay),
        *_readme_access.cluster_init_commands(lay),
        *ccws_commands(lay, facts),
    ]


def cost_table(bill: Bill, note: str = "") -> list[str]:
    """What will be created, in order, with its price per hour and the total: the table both
    READMEs (VMs and AKS) open with. ``note`` stands between the table and the total."""
    out = [
        "## What will be created, in order",
        "",
        "| # | resource | name | size | per hour |",
        "|---|---|---|---|---|",
    ]
    for i, line in enumerate(bill.lines, 1):
        out.append(
            f"| {i} | {line.resource} | `{line.name}` | {line.size} | {money(line.per_hour_usd)} |"
        )
    out += ["", note, ""] if note else [""]
    unknown = f" (priced part; not in the catalog: {', '.join(bill.unknown)})"
    out.append(
        f"**Total per hour: {money(bill.per_hour_usd)}**" + (unknown if bill.unknown else "")
    )
    return out


def _code(text: str) -> str:
    """``text`` as Markdown inline code that no backtick in it can end early."""
    run = max((len(r) for r in re.findall(r"`+", text)), default=0)
    fence = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _ccws_lustre_role(lay: Layout) -> str:
    """The file system CCWS mounts: the data one when there is one (as _ccws.py picks)."""
    roles = [lu.role for lu in lay.lustres]
    return "data" if "data" in roles else roles[0]


def _lifecycle_lines(lay: Layout) -> list[str]:
    """What the storage accounts' lifecycle rule deletes, and after how long."""
    days = lay.version_days
    setting = (
        f"`checkpoints.version_days`, default {days}"
        if days == DEFAULT_VERSION_DAYS
        else f"`checkpoints.version_days` = {days}; the default is {DEFAULT_VERSION_DAYS}"
    )
    return [
        "Blob versioning keeps each overwritten or deleted blob (a checkpoint the retention "
        "drops) as a previous version, billed like the blob. Each storage account's lifecycle "
        f"rule `{RULE}` deletes previous versions {days} days after they were made ({setting}); "
        f"soft delete keeps them {SOFT_DELETE_DAYS} more days, so a dropped checkpoint stays "
        f"billed at most {longest_billed_days(days)} days. "
        "The rule never deletes a current blob: data, checkpoints and archives stay until you "
        "delete them."
    ]


def _node_lines(lay: Layout) -> list[str]:
    """The node set-up: systemd units that run at every boot, their logs in the journal."""
    mounts = ", ".join(
        [f"Lustre at `{lu.mount_path}`" for lu in lay.lustres]
        + [f"the {v.kind} volume at `{v.mount_path}`" for v in lay.volumes]
    )
    units = " ".join(f"`{u}`" for u in UNITS)
    return [
        "cloud-init only writes and enables stoker's systemd units; they run at every boot "
        "(after a reboot or a deallocate-and-start too): `stoker-scratch` assembles (on new "
        f"disks, creates) the local NVMe disks as RAID0 at `{lay.scratch_path}`, "
        f"`stoker-mounts` mounts {mounts or 'no shared file system'}, `stoker-install` "
        f"installs {_code(lay.install)} with the image's python3 (Python {python_min()} or "
        "later; the pinned image's is checked before pip runs), `stoker-health` runs "
        "azurehpc-health-checks and `stoker doctor --json` (the result in "
        f"`{DOCTOR_JSON}`; again every hour by `stoker-health.timer`; a failing node drains "
        "itself), and `stoker-node-ready` lets slurmd start only once all of them passed.",
        "",
        f"Units: {units}. Their logs are in the journal, not a file: "
        "`journalctl -b -u 'stoker-*'` (one unit: `journalctl -u stoker-install`); "
        "`systemctl list-units 'stoker-*'` shows which one failed.",
        "",
        f"The nodes run {_code('pip install ' + sh(lay.install))}: where your stoker comes from "
        "elsewhere (a wheel in Blob, a private index), provision again with `--install`.",
    ]


def render(lay: Layout, facts: Provisioning, bill: Bill) -> str:
    out = [
        f"# Deployment for plan {_code(lay.plan_name)}",
        "",
        f"Written by `stoker provision` from the same plan as `stoker plan` (region "
        f"`{lay.region}`, resource group {_code(lay.resource_group)}). Tagged `teardown-after` "
        f"{lay.teardown_after:%Y-%m-%d %H:%M} UTC.",
        "",
    ]
    roles = (
        "Role assignments (free): the GPU VMs' identity gets Storage Blob Data Contributor on "
        "each account"
        + (
            "; the HPC Cache Resource Provider gets Storage Account Contributor and Storage Blob "
            "Data Contributor on the Lustre-linked account."
            if lay.lustres
            else "."
        )
    )
    out += cost_table(bill, note=roles)
    out += [
        "",
        f"**Per idle day, everything left up: {money(bill.per_hour_usd * 24)}**",
        "",
        *idle_lines(bill),
        "",
        *_lifecycle_lines(lay),
        "",
    ]
    out += [
        "## Deploy",
        "",
        "The deployer needs Owner or User Access Administrator on the resource group "
        "(Contributor cannot create the role assignments).",
        "",
        "```sh",
        *deploy_commands(lay, facts),
        "```",
        "",
    ]
    if lay.lustres:
        out += [
            "Managed Lustre's Blob integration (HSM) needs its resource provider's service "
            "principal to hold two roles on the storage account before the file system is "
            "created; its object id differs per tenant, hence the `az ad sp show` above. "
            "Microsoft's prerequisites also ask for storage-account key access on that account "
            "(AMLFS makes SAS tokens on it), so the account holding the Lustre-linked containers "
            "(`sl...`) allows shared-key access and the main account (`st...`) does not. "
            "Role assignments take up to five minutes to reach the resource provider, and a "
            "file system created before then fails (pre-validation cannot tell): hence two "
            "deployments, the roles first (`deployLustre=false`), the file system after. "
            f"The file system and the scale sets share availability zone {lay.zone}.",
            "",
        ]
    out += _readme_access.render(lay)  # getting in, staging data into Blob
    out += [
        "## On the nodes",
        "",
        *_node_lines(lay),
        "",
        "## Tear down",
        "",
        "```sh",
        *teardown_commands(lay),
        "```",
        "",
        "Blob is kept. To remove everything once the archive is safe: "
        f"{_code('az group delete --name ' + sh(lay.resource_group))}.",
        "",
        "## Slurm instead (CycleCloud Workspace for Slurm)",
        "",
        f"`ccws.parameters.json` targets CCWS {facts.ccws_release} (commit "
        f"`{facts.ccws_commit[:7]}`). Deploy `main.json` with `deployScaleSets=false`, then:",
        "",
        *_readme_access.ccws_sections(lay, facts, render_cloud_init(lay)),
        "### The CCWS deployment",
        "",
        "```sh",
        *ccws_commands(lay, facts),
        "```",
        "",
    ]
    if lay.notes:
        out += ["## Notes", "", *(f"- {note}" for note in lay.notes), ""]
    return "\n".join(out)
