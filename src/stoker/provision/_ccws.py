"""``ccws.parameters.json``: the same cluster for CycleCloud Workspace for Slurm (CCWS).

Pinned to the CCWS release whose parameter types the schema was taken from (catalog
``provision.ccws_release``). A Lustre that CCWS creates has no Blob integration (and it cannot
be added later), so stoker's template creates the AMLFS with HSM and CCWS mounts it as an
existing file system (``aml-existing``) in stoker's VNet (``network.type = existing``).

Two values exist only after ``main.json`` is deployed: the subscription id in the VNet's id and
the MGS address of the Lustre. The file holds ``__SUBSCRIPTION_ID__`` and
``__LUSTRE_MGS_ADDRESS__`` for them and the README's commands fill both in with ``sed``, as
they fill ``__STOKER_CLUSTER_INIT_URL__``: where the user published stoker's node set-up
(``_ccws_init.py``), which reaches the GPU nodes through ``clusterInitSpecs``.

What CCWS is told follows what it reads: the ownership tags go under every resource type its
``getTags()`` looks up and under ``'Node Array'``, which ``ccw.bicep`` hands to CycleCloud as
the node arrays' ``NodeTags`` (the GPU VMs teardown must find); the GPU partition's
``maxNodes`` stays within the CCWS form's 0..1000.
"""

from __future__ import annotations

from typing import Any

from ..catalog import Provisioning
from ._ccws_init import URL_PLACEHOLDER
from ._layout import Layout
from .tags import TAG_AFTER, TAG_DEPLOYMENT, TAG_PLAN

SUBSCRIPTION = "__SUBSCRIPTION_ID__"
MGS = "__LUSTRE_MGS_ADDRESS__"
# Ubuntu 24.04 (a choice CCWS's portal form offers): cluster-init installs stoker with the
# image's python3, 3.12 there; ubuntu22's is 3.10, older than stoker runs on.
OS_IMAGE = "cycle.image.ubuntu24"
SCHEDULER_SKU = "Standard_D4as_v5"
LOGIN_SKU = "Standard_D2as_v5"
# The resource types CCWS's getTags() reads tags for (its types.bicep, resource_tags_t); the
# node arrays' VMs are Microsoft.Compute/virtualMachines.
TAGGED = (
    "Resource group",
    "Microsoft.Compute/virtualMachines",
    "Microsoft.Network/networkInterfaces",
    "Microsoft.Network/networkSecurityGroups",
    "Microsoft.Network/natGateways",
    "Microsoft.Network/virtualNetworks",
    "Microsoft.Network/bastionHosts",
    "Microsoft.ManagedIdentity/userAssignedIdentities",
    "Microsoft.Storage/storageAccounts",
    "Microsoft.NetApp/netAppAccounts",
    "Microsoft.DBforMySQL/flexibleServers",
    "Microsoft.StorageCache/amlFileSystems",
    # Not a resource type: ccw.bicep's nodeArrayTags output, which create_cc_param.py makes
    # the cluster's NodeTags; the GPU VMs CycleCloud creates carry these.
    "Node Array",
)
# The CCWS portal form's bounds on a partition's maxNodes (uiDefinitions).
MAX_NODES = 1000
ANF_HOME_TIB = 2  # /shared (home) on NetApp Premium, the ai-infrastructure example's default


def _v(value: Any) -> dict[str, Any]:
    return {"value": value}


def gpu_nodes(lay: Layout) -> int:
    """The GPU partition's maxNodes: the job's VMs, within the form's 0..1000 (the README
    says when the job is larger than CCWS can carry)."""
    return max(0, min(lay.nodes, MAX_NODES))


def parameters(lay: Layout, facts: Provisioning) -> dict[str, Any]:
    vnet_id = (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{lay.resource_group}"
        f"/providers/Microsoft.Network/virtualNetworks/{lay.vnet}"
    )
    # The data file system when there is one, else the checkpoint one, at /data.
    lustre = next((lu for lu in lay.lustres if lu.role == "data"), None) or next(
        iter(lay.lustres), None
    )
    additional: dict[str, Any] = {"type": "disabled"}
    if lustre is not None:
        additional = {
            "type": "aml-existing",
            "ipAddress": MGS,
            "mountPath": lustre.mount_path,
            "mountOptions": "noatime,flock",
        }
    # What teardown finds CCWS's resources by (the same id as main.json's), on every resource
    # type CCWS tags. A parameters file is not evaluated by ARM: the plan's name goes in as is.
    tags = {
        TAG_DEPLOYMENT: lay.deployment_id,
        TAG_PLAN: lay.plan_name,
        TAG_AFTER: lay.teardown_after.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    params = {
        "location": _v(lay.region),
        "resourceGroup": _v(lay.resource_group),
        "adminUsername": _v(lay.admin_username),
        "key": _v({"type": "entered", "value": lay.ssh_public_key or "__SSH_PUBLIC_KEY__"}),
        "ccVMName": _v(f"ccw-{lay.prefix}"[:64]),
        "ccVMSize": _v(SCHEDULER_SKU),
        "clusterName": _v(lay.prefix if len(lay.prefix) >= 3 else f"{lay.prefix}-ccw"),
        "projectVersion": _v(facts.ccws_release),
        "schedFilesystem": _v({"type": "nfs-new", "nfsCapacityInGb": 100}),
        "sharedFilesystem": _v(
            {"type": "anf-new", "anfServiceLevel": "Premium", "anfCapacityInTiB": ANF_HOME_TIB}
        ),
        "additionalFilesystem": _v(additional),
        "network": _v(
            {
                "type": "existing",
                "name": lay.vnet,
                "id": vnet_id,
                "cyclecloudSubnet": "cyclecloud",
                "computeSubnet": "compute",
                "netappSubnet": "netapp",
                "lustreSubnet": lustre.subnet.name if lustre else None,
            }
        ),
        "storagePrivateDnsZone": _v({"type": "new"}),
        "schedulerNode": _v({"sku": SCHEDULER_SKU, "osImage": OS_IMAGE}),
        "loginNodes": _v({"sku": LOGIN_SKU, "osImage": OS_IMAGE, "initialNodes": 1, "maxNodes": 1}),
        "htc": _v({"sku": "Standard_F2s_v2", "osImage": OS_IMAGE, "maxNodes": 0, "useSpot": False}),
        "hpc": _v({"sku": "Standard_HB176rs_v4", "osImage": OS_IMAGE, "maxNodes": 0}),
        "gpu": _v(
            {"sku": f"Standard_{lay.vm_size}", "osImage": OS_IMAGE, "maxNodes": gpu_nodes(lay)}
        ),
        # stoker's node set-up on the GPU nodes; CCWS adds its own spec before it.
        "clusterInitSpecs": _v(
            [
                {
                    "type": "gitHubReleaseURL",
                    "gitHubReleaseURL": URL_PLACEHOLDER,
                    "spec": "default",
                    "target": ["gpu"],
                }
            ]
        ),
        "slurmSettings": _v(
            {"startCluster": True, "version": "25.11.5", "healthCheckEnabled": True}
        ),
        "tags": _v({kind: dict(tags) for kind in TAGGED}),
    }
    return {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#",
        "contentVersion": "1.0.0.0",
        "parameters": params,
    }
