"""ARM resources for the way in (``_access.py``): Azure Bastion and its public IP, or a login
VM with its public IP and NIC, and the Blob private endpoints; plus the storage firewall's rules
for the deployer's address and the login subnet, which ``_res_storage`` puts on each account.

Every resource carries the ownership tags (``_refs.tags``) as the rest of the deployment does,
so ``stoker teardown`` proves it is stoker's before it touches it.
"""

from __future__ import annotations

from typing import Any

from ..catalog import Provisioning
from ._access import (
    BASTION_SUBNET,
    ENDPOINT_SUBNET,
    LOGIN_IMAGE,
    LOGIN_SUBNET,
    LOGIN_VM_SIZE,
    deployer_ip_value,
)
from ._cost import Line
from ._layout import Layout
from ._refs import account_name, api, rid, ssh_key_login, tags, with_skip

OS_DISK_GB = 64

_SKIP_LOGIN_EXTENSIONS = (
    "CKV_AZURE_50",
    "the VM agent stays: the login VM is the way in, and Azure's own reset-SSH-key and "
    "run-command recovery paths are extensions",
)
_WHY_NO_HOST_ENCRYPTION = (
    "encryption at host needs the EncryptionAtHost feature registered on the subscription (a "
    "deployment without it fails); the OS disk is encrypted at rest by the platform and the "
    "login VM keeps no data"
)
_SKIP_LOGIN_ENCRYPTION_AT_HOST = ("CKV_AZURE_97", _WHY_NO_HOST_ENCRYPTION)
# The check is named for Windows VMs but reads every VM: this one is Linux.
_SKIP_LOGIN_DISK_ENCRYPTION = ("CKV_AZURE_151", "a Linux VM; " + _WHY_NO_HOST_ENCRYPTION)


def bastion_name(lay: Layout) -> str:
    return f"bas-{lay.prefix}"


def login_name(lay: Layout) -> str:
    return f"vm-{lay.prefix}-login"


def _pip_name(lay: Layout, what: str) -> str:
    return f"pip-{lay.prefix}-{what}"


def _nic_name(lay: Layout) -> str:
    return f"nic-{lay.prefix}-login"


def endpoint_name(lay: Layout, role: str) -> str:
    return f"pe-{lay.prefix}-blob-{role}"


def _subnet_id(lay: Layout, name: str) -> str:
    return rid("Microsoft.Network/virtualNetworks/subnets", lay.vnet, name)


_PIP = "Standard, static"


def access_lines(lay: Layout) -> list[Line]:
    """The way in's rows of the bill. The catalog prices none of them: unknown, never $0."""
    a = lay.access
    lines: list[Line] = []
    if a.kind == "bastion":
        lines.append(
            Line("publicIPAddress", _pip_name(lay, "bastion"), "Standard, static", None, True)
        )
        size = "Standard, 2 scale units, native client tunnelling and IP connect"
        lines.append(Line("bastionHost", bastion_name(lay), size, None, True))
    elif a.kind == "login-vm":
        lines.append(
            Line("publicIPAddress", _pip_name(lay, "login"), "Standard, static", None, True)
        )
        lines.append(Line("networkInterface", _nic_name(lay), "login subnet", 0.0, True))
        size = f"{LOGIN_VM_SIZE}, SSH from the deployer's address only"
        # Teardown deallocates the scale sets, not the way in: it bills while the GPUs idle.
        lines.append(Line("virtualMachine", login_name(lay), size, None, True))
    if a.blob == "private-endpoint":
        for acct in lay.accounts:
            name = endpoint_name(lay, acct.role)
            lines.append(Line("privateEndpoint", name, "blob, endpoints subnet", None, True))
    return lines


def _public_ip(lay: Layout, facts: Provisioning, what: str, hourly: dict[str, str]) -> dict:
    name = _pip_name(lay, what)
    return {
        "type": "Microsoft.Network/publicIPAddresses",
        "apiVersion": api(facts, "Microsoft.Network"),
        "name": name,
        "location": lay.region,
        "tags": tags(lay, hourly, None),
        "sku": {"name": "Standard", "tier": "Regional"},
        "properties": {"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4"},
    }


def bastion(lay: Layout, facts: Provisioning, hourly: dict[str, str]) -> list[dict[str, Any]]:
    pip = rid("Microsoft.Network/publicIPAddresses", _pip_name(lay, "bastion"))
    host = {
        "type": "Microsoft.Network/bastionHosts",
        "apiVersion": api(facts, "Microsoft.Network"),
        "name": bastion_name(lay),
        "location": lay.region,
        "tags": tags(lay, hourly, None),
        # Standard: the native client (az network bastion ssh/tunnel) and IP connect, which
        # is how a scale-set instance is reached by its private address; Basic has neither.
        "sku": {"name": "Standard"},
        "properties": {
            "scaleUnits": 2,
            "enableTunneling": True,
            "enableIpConnect": True,
            "enableShareableLink": False,
            "ipConfigurations": [
                {
                    "name": "ipconfig0",
                    "properties": {
                        "subnet": {"id": _subnet_id(lay, BASTION_SUBNET)},
                        "publicIPAddress": {"id": pip},
                        "privateIPAllocationMethod": "Dynamic",
                    },
                }
            ],
        },
        "dependsOn": [rid("Microsoft.Network/virtualNetworks", lay.vnet), pip],
    }
    return [_public_ip(lay, facts, "bastion", hourly), host]


def login_vm(lay: Layout, facts: Provisioning, hourly: dict[str, str]) -> list[dict[str, Any]]:
    pip = rid("Microsoft.Network/publicIPAddresses", _pip_name(lay, "login"))
    nic_id = rid("Microsoft.Network/networkInterfaces", _nic_name(lay))
    ident = rid("Microsoft.ManagedIdentity/userAssignedIdentities", lay.identity)
    nic = {
        "type": "Microsoft.Network/networkInterfaces",
        "apiVersion": api(facts, "Microsoft.Network"),
        "name": _nic_name(lay),
        "location": lay.region,
        "tags": tags(lay, hourly, "0.00"),
        "properties": {
            "ipConfigurations": [
                {
                    "name": "ipconfig0",
                    "properties": {
                        "primary": True,
                        "privateIPAllocationMethod": "Dynamic",
                        "subnet": {"id": _subnet_id(lay, LOGIN_SUBNET)},
                        "publicIPAddress": {"id": pip},
                    },
                }
            ],
        },
        "dependsOn": [rid("Microsoft.Network/virtualNetworks", lay.vnet), pip],
    }
    publisher, offer, sku = LOGIN_IMAGE
    vm = {
        "type": "Microsoft.Compute/virtualMachines",
        "apiVersion": api(facts, "Microsoft.Compute"),
        "name": login_name(lay),
        "location": lay.region,
        "tags": tags(lay, hourly, None),
        # The deployment's identity: azcopy on the login VM stages into Blob with no key.
        "identity": {"type": "UserAssigned", "userAssignedIdentities": {ident: {}}},
        "properties": {
            "hardwareProfile": {"vmSize": LOGIN_VM_SIZE},
            "osProfile": {
                "computerName": login_name(lay)[:64],
                "adminUsername": lay.admin_username,
                "linuxConfiguration": ssh_key_login(lay),
            },
            "storageProfile": {
                # One VM, rebuilt rarely: the newest patched Ubuntu is worth more here than
                # the sameness the GPU scale sets need (their image is pinned).
                "imageReference": {
                    "publisher": publisher,
                    "offer": offer,
                    "sku": sku,
                    "version": "latest",
                },
                "osDisk": {
                    "createOption": "FromImage",
                    "diskSizeGB": OS_DISK_GB,
                    "managedDisk": {"storageAccountType": "StandardSSD_LRS"},
                    "deleteOption": "Delete",
                },
            },
            "networkProfile": {"networkInterfaces": [{"id": nic_id}]},
            "diagnosticsProfile": {"bootDiagnostics": {"enabled": True}},
        },
        "dependsOn": [nic_id, ident],
    }
    with_skip(
        vm, _SKIP_LOGIN_EXTENSIONS, _SKIP_LOGIN_ENCRYPTION_AT_HOST, _SKIP_LOGIN_DISK_ENCRYPTION
    )
    return [_public_ip(lay, facts, "login", hourly), nic, vm]


def private_endpoints(
    lay: Layout, facts: Provisioning, hourly: dict[str, str]
) -> list[dict[str, Any]]:
    out = []
    for acct in lay.accounts:
        account = rid("Microsoft.Storage/storageAccounts", account_name(lay, acct.role))
        out.append(
            {
                "type": "Microsoft.Network/privateEndpoints",
                "apiVersion": api(facts, "Microsoft.Network"),
                "name": endpoint_name(lay, acct.role),
                "location": lay.region,
                "tags": tags(lay, hourly, None),
                "properties": {
                    "subnet": {"id": _subnet_id(lay, ENDPOINT_SUBNET)},
                    "privateLinkServiceConnections": [
                        {
                            "name": "blob",
                            "properties": {"privateLinkServiceId": account, "groupIds": ["blob"]},
                        }
                    ],
                },
                "dependsOn": [rid("Microsoft.Network/virtualNetworks", lay.vnet), account],
            }
        )
    return out


def access_resources(
    lay: Layout, facts: Provisioning, hourly: dict[str, str]
) -> list[dict[str, Any]]:
    """The way in's resources, after the network, identity and storage they refer to."""
    out: list[dict[str, Any]] = []
    if lay.access.kind == "bastion":
        out += bastion(lay, facts, hourly)
    elif lay.access.kind == "login-vm":
        out += login_vm(lay, facts, hourly)
    if lay.access.blob == "private-endpoint":
        out += private_endpoints(lay, facts, hourly)
    return out


def storage_ip_rules(lay: Layout) -> list[dict[str, str]]:
    """The storage firewall's IP rules: the deployer's address with ``firewall-ip``."""
    if lay.access.blob != "firewall-ip":
        return []
    return [{"value": deployer_ip_value(lay.access), "action": "Allow"}]


def storage_subnet_rules(lay: Layout) -> list[dict[str, str]]:
    """The login subnet, so data staged through the login VM reaches Blob."""
    if lay.access.kind != "login-vm":
        return []
    return [{"id": _subnet_id(lay, LOGIN_SUBNET), "action": "Allow"}]
