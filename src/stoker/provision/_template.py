"""``main.json`` and ``main.parameters.json``: the ARM deployment, resources in creation order.

A plain array-of-resources template (no languageVersion 2.0, which the published root schema
rejects), literal values wherever the plan knows them so the schemas can check them, and
expressions only for what Azure decides at deploy time: globally unique storage names, role
assignment GUIDs, resource ids, the identity's principal and the Lustre MGS addresses.
"""

from __future__ import annotations

from typing import Any

from ..catalog import Provisioning
from ._access import DEPLOYER_PARAM
from ._cloud_init import render as render_cloud_init
from ._cost import Bill, Line, tag_costs
from ._layout import Layout
from ._refs import account_name
from ._res_access import access_lines, access_resources
from ._res_compute import identity, role_assignments, vmss
from ._res_lifecycle import lifecycle
from ._res_lustre import lustre_resources
from ._res_network import nat_name, network, nsg_name, pip_name
from ._res_storage import storage
from ._res_volumes import volume_resources
from ._text import arm_literal

TEMPLATE_SCHEMA = "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#"
PARAMETERS_SCHEMA = (
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#"
)


def network_lines(lay: Layout) -> list[Line]:
    """Network resources for the bill: free, except the NAT gateway and its public IP, which
    the catalog does not price (so the README says unknown rather than $0)."""
    return [
        Line("networkSecurityGroup", nsg_name(lay), "VNet in, Internet denied", 0.0, True),
        Line("publicIPAddress", pip_name(lay), "Standard, static, NAT only", None, True),
        Line("natGateway", nat_name(lay), "outbound for the nodes", None, True),
        Line("virtualNetwork", lay.vnet, _subnets_text(lay), 0.0, True),
        *access_lines(lay),
    ]


def _subnets_text(lay: Layout) -> str:
    parts = [f"{lay.address_space}: compute {lay.compute_subnet.cidr}"]
    parts += [f"{lu.subnet.name} {lu.subnet.cidr}" for lu in lay.lustres]
    parts += [f"cyclecloud {lay.cyclecloud_subnet.cidr}", f"netapp {lay.netapp_subnet.cidr}"]
    parts += [f"{sub.name} {sub.cidr}" for sub in lay.access.subnets]
    return ", ".join(parts)


def _param(type_: str, description: str, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "metadata": {"description": description}, **extra}


def template(lay: Layout, facts: Provisioning, bill: Bill) -> dict[str, Any]:
    hourly = bill.tag_values()

    def price(name: str) -> str | None:
        value = hourly.get(name)
        return None if value in (None, "unknown") else value

    params: dict[str, Any] = {
        "sshPublicKey": _param(
            "string", "OpenSSH public key for the admin user (password login is disabled)"
        ),
        "deployScaleSets": _param(
            "bool",
            "false to deploy storage, network and Lustre only (CycleCloud Workspace for Slurm "
            "then makes the nodes: ccws.parameters.json)",
            defaultValue=True,
        ),
    }
    if lay.access.needs_deployer_ip and not lay.access.deployer_ip:
        params[DEPLOYER_PARAM] = _param(
            "string",
            "your public IPv4 address, let through the storage firewall (blob access "
            "firewall-ip) and to the login VM's SSH: curl -fsS https://ifconfig.me",
        )
    if lay.lustres:
        params["amlfsPrincipalId"] = _param(
            "string",
            "object id of the 'HPC Cache Resource Provider' service principal in this tenant: "
            f"az ad sp show --id {facts.hpc_cache_rp_app_id} --query id -o tsv",
        )
        # Its roles take up to five minutes to reach the resource provider, and a file system
        # created before then fails: deploy once with false (the roles), then again with true.
        params["deployLustre"] = _param(
            "bool",
            "false for the first deployment (network, storage and the role assignments); true "
            "for the second, at least five minutes later (Managed Lustre and the scale sets)",
            defaultValue=True,
        )
    from ._cost import account_label

    resources: list[dict[str, Any]] = network(lay, facts, hourly)
    resources += access_resources(lay, facts, hourly)  # as the bill lists them; dependsOn orders
    resources.append(identity(lay, facts, hourly))
    prices = {a.role: price(account_label(lay, a.role)) for a in lay.accounts}
    resources += storage(lay, facts, hourly, prices)
    resources += lifecycle(lay, facts)
    resources += role_assignments(lay, facts)
    lustre_prices = {lu.name: price(lu.name) for lu in lay.lustres}
    resources += lustre_resources(lay, facts, lustre_prices, hourly)
    resources += volume_resources(lay, facts, hourly)
    resources += [vmss(lay, s, facts, price(s.name), hourly) for s in lay.scale_sets]
    tag_costs(resources, hourly)  # the NAT gateway, public IPs and stopped scale sets' disks
    outputs: dict[str, Any] = {
        "identityClientId": {
            "type": "string",
            "value": (
                "[reference(resourceId('Microsoft.ManagedIdentity/userAssignedIdentities', "
                f"'{lay.identity}'), '{facts.api_versions['Microsoft.ManagedIdentity']}')"
                ".clientId]"
            ),
        },
    }
    for a in lay.accounts:
        outputs[f"storageAccount_{a.role}"] = {
            "type": "string",
            "value": account_name(lay, a.role),
        }
    for lu in lay.lustres:
        outputs[f"lustreMgsAddress_{lu.role}"] = {
            "condition": "[parameters('deployLustre')]",
            "type": "string",
            "value": (
                "[reference(resourceId('Microsoft.StorageCache/amlFilesystems', "
                f"'{lu.name}'), '{facts.api_versions['Microsoft.StorageCache']}')"
                ".clientInfo.mgsAddress]"
            ),
        }
    return {
        "$schema": TEMPLATE_SCHEMA,
        "contentVersion": "1.0.0.0",
        "metadata": {
            "generator": "stoker provision",
            "plan": arm_literal(lay.plan_name),
            "costPerHourUsd": hourly["total"],
            "teardownAfter": lay.teardown_after.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "parameters": params,
        "variables": {"cloudInit": render_cloud_init(lay)},
        "resources": resources,
        "outputs": outputs,
    }


def parameters(lay: Layout) -> dict[str, Any]:
    """The parameters file; values not known here (the SSH key unless given, the tenant's
    AMLFS principal) are passed on the deploy command line, as the README shows."""
    values: dict[str, Any] = {"deployScaleSets": {"value": True}}
    if lay.ssh_public_key:
        values["sshPublicKey"] = {"value": lay.ssh_public_key}
    return {"$schema": PARAMETERS_SCHEMA, "contentVersion": "1.0.0.0", "parameters": values}
