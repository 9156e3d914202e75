"""ARM resources for compute: the VMs' managed identity, role assignments (Managed Lustre's
file systems are _res_lustre.py), and the GPU scale sets.

Scale sets: Uniform orchestration (InfiniBand is documented for Uniform with a single placement
group), ``singlePlacementGroup: true`` while the set fits one placement group (100 VMs, or the
limit a support request approved: the layout's ``placement_group_limit``), one fault domain,
accelerated networking, terminate notifications (a node is told before it is deleted, so
``stoker guard`` can checkpoint), the Azure HPC image at a pinned version (every scale-out gets
the same driver and NCCL), the user-assigned identity, SSH keys only, no public IP, in the
Lustre file system's availability zone. A scale set is one InfiniBand partition: one job never
spans two of them.
"""

from __future__ import annotations

from typing import Any

from ..catalog import Provisioning
from ..errors import ProvisionError
from ._cloud_init import nfs_placeholder, placeholder
from ._layout import Layout, ScaleSet
from ._refs import account_name, api, rid, ssh_key_login, tags, with_skip
from ._res_network import nsg_name
from ._res_storage import subnet_id
from ._res_volumes import volume_id, volume_ids

OS_DISK_GB = 256
# One placement group holds 100 VMs unless a support request raised it (setup-infiniband).
PLACEMENT_GROUP_DEFAULT = 100
# How long a VM being deleted waits for its terminate event to be approved: the longest Azure
# allows is 15 minutes; 10 leaves guard time to write a checkpoint and approve the event.
TERMINATE_NOT_BEFORE = "PT10M"

_SKIP_AUTO_OS_UPGRADE = (
    "CKV_AZURE_95",
    "automatic OS image upgrades reimage nodes while a training job runs on them; the cluster "
    "lives for one run on the pinned HPC image and is torn down after it",
)
_SKIP_ENCRYPTION_AT_HOST = (
    "CKV_AZURE_97",
    "encryption at host needs the EncryptionAtHost feature registered on the subscription and "
    "is not listed for ND GPU sizes; the OS disk is encrypted at rest by the platform and the "
    "NVMe scratch is ephemeral",
)


def identity(lay: Layout, facts: Provisioning, hourly: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "Microsoft.ManagedIdentity/userAssignedIdentities",
        "apiVersion": api(facts, "Microsoft.ManagedIdentity"),
        "name": lay.identity,
        "location": lay.region,
        "tags": tags(lay, hourly, "0"),
        "properties": {},
    }


def role_id(lay: Layout, account: str, key: str) -> str:
    """The id of a role assignment scoped to a storage account (an extension resource)."""
    name = account_name(lay, account)
    acct = rid("Microsoft.Storage/storageAccounts", name)[1:-1]
    return (
        f"[extensionResourceId({acct}, 'Microsoft.Authorization/roleAssignments', "
        f"guid(resourceGroup().id, '{name}', '{key}'))]"
    )


def _role(
    lay: Layout,
    facts: Provisioning,
    role_role: str,
    account: str,
    principal: str,
    role_id: str,
    key: str,
) -> dict[str, Any]:
    name = account_name(lay, account)
    return {
        "type": "Microsoft.Authorization/roleAssignments",
        "apiVersion": api(facts, "Microsoft.Authorization"),
        "name": f"[guid(resourceGroup().id, '{name}', '{key}')]",
        "scope": f"Microsoft.Storage/storageAccounts/{name}",
        "properties": {
            "roleDefinitionId": (
                f"[subscriptionResourceId('Microsoft.Authorization/roleDefinitions', '{role_id}')]"
            ),
            "principalId": principal,
            "principalType": "ServicePrincipal",
            "description": role_role,
        },
        "dependsOn": [
            rid("Microsoft.Storage/storageAccounts", name),
            rid("Microsoft.ManagedIdentity/userAssignedIdentities", lay.identity),
        ],
    }


def role_assignments(lay: Layout, facts: Provisioning) -> list[dict[str, Any]]:
    vm_principal = (
        f"[reference({rid('Microsoft.ManagedIdentity/userAssignedIdentities', lay.identity)[1:-1]}"
        f", '{api(facts, 'Microsoft.ManagedIdentity')}').principalId]"
    )
    out = []
    for acct in lay.accounts:
        out.append(
            _role(
                lay,
                facts,
                "GPU VMs read and write Blob through their identity",
                acct.role,
                vm_principal,
                facts.role_blob_data_contributor,
                "vm-blob",
            )
        )
    if any(a.role == "hsm" for a in lay.accounts):
        rp = "[parameters('amlfsPrincipalId')]"
        out.append(
            _role(
                lay,
                facts,
                "AMLFS (HPC Cache Resource Provider) manages the account",
                "hsm",
                rp,
                facts.role_account_contributor,
                "amlfs-account",
            )
        )
        out.append(
            _role(
                lay,
                facts,
                "AMLFS (HPC Cache Resource Provider) imports and archives",
                "hsm",
                rp,
                facts.role_blob_data_contributor,
                "amlfs-blob",
            )
        )
    return out


def custom_data(lay: Layout, facts: Provisioning) -> str:
    """base64 of cloud-init with each Lustre's MGS address put in by ARM at deploy time."""
    text = "variables('cloudInit')"
    for lu in lay.lustres:
        ref = rid("Microsoft.StorageCache/amlFilesystems", lu.name)[1:-1]
        mgs = f"reference({ref}, '{api(facts, 'Microsoft.StorageCache')}').clientInfo.mgsAddress"
        text = f"replace({text}, '{placeholder(lu)}', {mgs})"
    for v in lay.volumes:
        if v.kind == "netapp":
            ref = volume_id(lay, v)[1:-1]
            ip = f"reference({ref}, '{api(facts, 'Microsoft.NetApp')}').mountTargets[0].ipAddress"
            text = f"replace({text}, '{nfs_placeholder(v)}', {ip})"
    return f"[base64({text})]"


def image(facts: Provisioning, vm_size: str) -> dict[str, str]:
    """The scale set's image reference; refuses an unpinned one (``latest`` lets a scale-out
    land on another driver and NCCL than the nodes it joins)."""
    urn = facts.hpc_images[vm_size]
    publisher, offer, sku, version = urn.split(":")
    if version.lower() == "latest":
        raise ProvisionError(
            f"catalog provision.hpc_images.{vm_size}: {urn} is not pinned; give a version "
            "(az vm image list --publisher microsoft-dsvm --offer ubuntu-hpc --all)"
        )
    return {"publisher": publisher, "offer": offer, "sku": sku, "version": version}


def single_placement_group(lay: Layout, s: ScaleSet) -> bool:
    """True while the set fits one placement group (InfiniBand needs it); a larger set is a
    large scale set, which the layout only makes for sizes without InfiniBand."""
    limit = lay.placement_group_limit or PLACEMENT_GROUP_DEFAULT
    return s.vms <= limit


def vmss(
    lay: Layout, s: ScaleSet, facts: Provisioning, price: str | None, hourly: dict[str, str]
) -> dict[str, Any]:
    ident = rid("Microsoft.ManagedIdentity/userAssignedIdentities", lay.identity)
    nic = {
        "name": "nic0",
        "properties": {
            "primary": True,
            "enableAcceleratedNetworking": True,
            "networkSecurityGroup": {
                "id": rid("Microsoft.Network/networkSecurityGroups", nsg_name(lay))
            },
            "ipConfigurations": [
                {
                    "name": "ipconfig0",
                    "properties": {"primary": True, "subnet": {"id": subnet_id(lay, "compute")}},
                }
            ],
        },
    }
    res = {
        # With Lustre, the nodes come in the second deployment, with the file system they mount.
        "condition": (
            "[and(parameters('deployScaleSets'), parameters('deployLustre'))]"
            if lay.lustres
            else "[parameters('deployScaleSets')]"
        ),
        "type": "Microsoft.Compute/virtualMachineScaleSets",
        "apiVersion": api(facts, "Microsoft.Compute"),
        "name": s.name,
        "location": lay.region,
        "tags": tags(lay, hourly, price),
        "sku": {"name": f"Standard_{s.vm_size}", "tier": "Standard", "capacity": s.vms},
        "zones": [lay.zone],
        "identity": {"type": "UserAssigned", "userAssignedIdentities": {ident: {}}},
        "properties": {
            "orchestrationMode": "Uniform",
            "singlePlacementGroup": single_placement_group(lay, s),
            "platformFaultDomainCount": 1,
            "overprovision": False,
            "upgradePolicy": {"mode": "Manual"},
            "virtualMachineProfile": {
                "osProfile": {
                    "computerNamePrefix": s.name.removeprefix("vmss-")[:40],
                    "adminUsername": lay.admin_username,
                    "customData": custom_data(lay, facts),
                    "allowExtensionOperations": True,
                    "linuxConfiguration": ssh_key_login(lay),
                },
                "storageProfile": {
                    "imageReference": image(facts, s.vm_size),
                    "osDisk": {
                        "createOption": "FromImage",
                        "caching": "ReadWrite",
                        "diskSizeGB": OS_DISK_GB,
                        "managedDisk": {"storageAccountType": "Premium_LRS"},
                    },
                },
                "networkProfile": {"networkInterfaceConfigurations": [nic]},
                "diagnosticsProfile": {"bootDiagnostics": {"enabled": True}},
                "scheduledEventsProfile": {
                    "terminateNotificationProfile": {
                        "enable": True,
                        "notBeforeTimeout": TERMINATE_NOT_BEFORE,
                    }
                },
            },
        },
        "dependsOn": [
            rid("Microsoft.Network/virtualNetworks", lay.vnet),
            ident,
            *(rid("Microsoft.StorageCache/amlFilesystems", lu.name) for lu in lay.lustres),
            *volume_ids(lay),
            *(role_id(lay, a.role, "vm-blob") for a in lay.accounts),
        ],
    }
    return with_skip(res, _SKIP_ENCRYPTION_AT_HOST, _SKIP_AUTO_OS_UPGRADE)
