"""``main.json`` for ``--target aks``: the VM path's network, identity, storage accounts and
Managed Lustre (the same writers, so the same names, tags and escaping), with the scale sets
replaced by one AKS cluster whose GPU node pools are the plan's VMs, one pool per fabric.

InfiniBand on AKS follows Azure/ai-infrastructure-on-azure (infrastructure_references/aks):
the AKSInfinibandSupport feature, GPU pools with ``gpuProfile.driver: None`` (the NVIDIA GPU
Operator installs the driver) and the NVIDIA Network Operator exposing the HCAs to pods as
``rdma/ib``. The Files share for the model cache is not in the template: the Azure Files CSI
driver makes it from the StorageClass (``storage.yaml``), tagged as every resource here is.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...catalog import Catalog, Provisioning
from .._cost import Bill, Line, bill, vmss_per_hour
from .._layout import Layout
from .._refs import api, rid, tags, with_skip
from .._res_storage import subnet_id
from .._template import network_lines, template
from ._pools import (
    AKS_API,
    DNS_SERVICE_IP,
    POD_CIDR,
    SERVICE_CIDR,
    SYSTEM_NODES,
    SYSTEM_VM_SIZE,
    Cluster,
    Pool,
)

MANAGED_CLUSTERS = "Microsoft.ContainerService/managedClusters"
# Built-in role "Network Contributor" (learn.microsoft.com/azure/role-based-access-control/
# built-in-roles/networking): AKS's identity joins nodes to a subnet it did not make.
NETWORK_CONTRIBUTOR = "4d97b98b-1d4f-4787-a291-c67834d212e7"
GPU_TAINT = "nvidia.com/gpu=present:NoSchedule"
POOL_LABEL = "stoker.io/pool"

_SKIPS = (
    (
        "CKV_AZURE_6",
        "the user's own IP is unknown here; add apiServerAccessProfile.authorizedIPRanges "
        "to main.json where the API server must be restricted",
    ),
    (
        "CKV_AZURE_141",
        "local accounts let az aks get-credentials work without an Entra ID admin group, "
        "which stoker cannot know",
    ),
    (
        "CKV_AZURE_171",
        "automatic upgrades drain and reimage nodes while a job runs on them; the cluster "
        "lives for one run (upgradeChannel none, as the scale sets' manual upgrade policy)",
    ),
    (
        "CKV_AZURE_226",
        "ephemeral OS disks live on the temp disk the ND sizes use for scratch",
    ),
    (
        "CKV_AZURE_227",
        "encryption at host needs the EncryptionAtHost feature on the subscription and is not "
        "listed for ND GPU sizes (as for the VM scale sets)",
    ),
    (
        "CKV_AZURE_4",
        "Azure Monitor needs a Log Analytics workspace the user owns; stoker's exporter "
        "and ledger measure the run",
    ),
    (
        "CKV_AZURE_172",
        "no Secrets Store CSI driver is enabled, so there is nothing to rotate",
    ),
)


def aks_layout(lay: Layout) -> Layout:
    """The VM path's layout less what AKS makes itself: scale sets (node pools) and Files
    shares (the CSI driver)."""
    return dataclasses.replace(
        lay, scale_sets=(), volumes=tuple(v for v in lay.volumes if v.kind != "files")
    )


def aks_bill(lay: Layout, c: Cluster, cat: Catalog | None = None) -> Bill:
    """The VM path's lines for what stays, then the cluster, its pools and the share."""
    base = aks_layout(lay)
    lines = list(bill(base, network_lines(base), cat).lines)  # priced as the VM path's
    lines.append(
        Line(
            "managedCluster",
            c.name,
            f"AKS Standard tier, Kubernetes {c.kubernetes_version}",
            None,
            True,  # billed per cluster-hour, GPU pools at 0 or not
        )  # fmt: skip
    )
    # The system pool runs on while the GPU pools are at 0: billed idle.
    lines.append(Line("agentPool", f"{c.name}/system", f"{SYSTEM_NODES} x {SYSTEM_VM_SIZE}",
                      None, True))  # fmt: skip
    for p in c.pools:
        size = f"{p.nodes} x {p.vm_size} (VMs {p.first_vm}-{p.first_vm + p.nodes - 1})"
        lines.append(Line("agentPool", f"{c.name}/{p.name}", size, vmss_per_hour(lay, p.nodes),
                          False))  # fmt: skip
    if c.model_cache is not None:
        v = c.model_cache
        lines.append(
            Line(
                "fileShare",
                "model-cache",
                f"premium NFS {v.size_gib:,} GiB (Files CSI driver)",
                v.price_per_hour,
                True,
            )  # fmt: skip
        )
    return Bill(tuple(lines))


def _pool(lay: Layout, p: Pool, hourly: dict[str, str], price: str | None) -> dict[str, Any]:
    return {
        "name": p.name,
        "mode": "User",
        "count": p.nodes,
        "vmSize": f"Standard_{p.vm_size}",
        "osType": "Linux",
        "osSKU": "Ubuntu",
        "type": "VirtualMachineScaleSets",
        "vnetSubnetID": subnet_id(lay, "compute"),
        "osDiskSizeGB": 256,
        "osDiskType": "Managed",
        "maxPods": 110,
        "gpuProfile": {"driver": "None"},  # the GPU Operator's driver (ai-infrastructure-on-azure)
        "nodeLabels": {POOL_LABEL: p.name},
        "nodeTaints": [GPU_TAINT],
        "tags": tags(lay, hourly, price),
    }


def _system_pool(lay: Layout, hourly: dict[str, str]) -> dict[str, Any]:
    return {
        "name": "system",
        "mode": "System",
        "count": SYSTEM_NODES,
        "vmSize": SYSTEM_VM_SIZE,
        "osType": "Linux",
        "osSKU": "Ubuntu",
        "type": "VirtualMachineScaleSets",
        "vnetSubnetID": subnet_id(lay, "compute"),
        "maxPods": 110,
        "nodeLabels": {POOL_LABEL: "system"},
        "tags": tags(lay, hourly, None),
    }


def _network_role(lay: Layout, facts: Provisioning) -> dict[str, Any]:
    ident = rid("Microsoft.ManagedIdentity/userAssignedIdentities", lay.identity)
    return {
        "type": "Microsoft.Authorization/roleAssignments",
        "apiVersion": api(facts, "Microsoft.Authorization"),
        "name": f"[guid(resourceGroup().id, '{lay.vnet}', 'aks-network')]",
        "scope": f"Microsoft.Network/virtualNetworks/{lay.vnet}",
        "properties": {
            "roleDefinitionId": (
                "[subscriptionResourceId('Microsoft.Authorization/roleDefinitions', "
                f"'{NETWORK_CONTRIBUTOR}')]"
            ),
            "principalId": f"[reference({ident[1:-1]}, "
            f"'{api(facts, 'Microsoft.ManagedIdentity')}').principalId]",
            "principalType": "ServicePrincipal",
            "description": "AKS joins its nodes to the compute subnet",
        },
        "dependsOn": [rid("Microsoft.Network/virtualNetworks", lay.vnet), ident],
    }


def _role_id(lay: Layout) -> str:
    vnet = rid("Microsoft.Network/virtualNetworks", lay.vnet)[1:-1]
    return (
        f"[extensionResourceId({vnet}, 'Microsoft.Authorization/roleAssignments', "
        f"guid(resourceGroup().id, '{lay.vnet}', 'aks-network'))]"
    )


def managed_cluster(
    lay: Layout, c: Cluster, facts: Provisioning, hourly: dict[str, str]
) -> dict[str, Any]:
    ident = rid("Microsoft.ManagedIdentity/userAssignedIdentities", lay.identity)

    def price(name: str) -> str | None:
        value = hourly.get(name)
        return None if value in (None, "unknown") else value

    pools = [_system_pool(lay, hourly)]
    pools += [_pool(lay, p, hourly, price(f"{c.name}/{p.name}")) for p in c.pools]
    res = {
        "type": MANAGED_CLUSTERS,
        "apiVersion": AKS_API,
        "name": c.name,
        "location": lay.region,
        "tags": tags(lay, hourly, price(c.name)),
        "sku": {"name": "Base", "tier": "Standard"},
        "identity": {"type": "UserAssigned", "userAssignedIdentities": {ident: {}}},
        "properties": {
            "kubernetesVersion": c.kubernetes_version,
            "dnsPrefix": lay.prefix,
            "enableRBAC": True,
            "disableLocalAccounts": False,
            "agentPoolProfiles": pools,
            "addonProfiles": {"kubeDashboard": {"enabled": False}},
            "networkProfile": {
                "networkPlugin": "azure",
                "networkPluginMode": "overlay",
                "networkPolicy": "azure",
                "podCidr": POD_CIDR,
                "serviceCidr": SERVICE_CIDR,
                "dnsServiceIP": DNS_SERVICE_IP,
                "outboundType": "userAssignedNATGateway",
                "loadBalancerSku": "standard",
            },
            "storageProfile": {
                "fileCSIDriver": {"enabled": True},
                "blobCSIDriver": {"enabled": True},
                "diskCSIDriver": {"enabled": True},
            },
            "autoUpgradeProfile": {"upgradeChannel": "none", "nodeOSUpgradeChannel": "None"},
        },
        "dependsOn": [
            rid("Microsoft.Network/virtualNetworks", lay.vnet),
            ident,
            _role_id(lay),
            *(rid("Microsoft.StorageCache/amlFilesystems", lu.name) for lu in lay.lustres),
        ],
    }
    return with_skip(res, *_SKIPS)


def aks_template(lay: Layout, c: Cluster, facts: Provisioning, the_bill: Bill) -> dict[str, Any]:
    """The VM path's template for what stays, the cluster in place of the scale sets."""
    base = aks_layout(lay)
    main = template(base, facts, the_bill)
    main["parameters"].pop("deployScaleSets", None)
    main["parameters"].pop("sshPublicKey", None)  # AKS nodes take no SSH key from stoker
    main.pop("variables", None)  # cloud-init is the VM path's
    main["metadata"]["target"] = "aks"
    hourly = the_bill.tag_values()
    main["resources"] += [_network_role(lay, facts), managed_cluster(lay, c, facts, hourly)]
    main["outputs"]["aksName"] = {"type": "string", "value": c.name}
    return main


def aks_parameters(lay: Layout) -> dict[str, Any]:
    from .._template import PARAMETERS_SCHEMA

    return {"$schema": PARAMETERS_SCHEMA, "contentVersion": "1.0.0.0", "parameters": {}}
