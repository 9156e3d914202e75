"""Azure's naming rules for every resource name stoker derives, checked before anything is
written: a name Azure refuses fails twenty minutes into a deployment, after other resources
already bill.

Rules from Microsoft's "Naming rules and restrictions for Azure resources" page, per type.
"""

from __future__ import annotations

import re

from ..errors import ProvisionError
from ._layout import Layout
from ._refs import account_name
from ._res_network import nat_name, nsg_name, pip_name
from ._text import shown

# type -> (pattern the whole name must match, what the rule says in words)
_NETWORK = (r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])?", "1-80 alphanumerics, _ . -")
RULES: dict[str, tuple[str, str]] = {
    "Microsoft.Network/networkSecurityGroups": _NETWORK,
    "Microsoft.Network/natGateways": _NETWORK,
    "Microsoft.Network/publicIPAddresses": _NETWORK,
    "Microsoft.Network/virtualNetworks": (
        r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}[A-Za-z0-9_]",
        "2-64 alphanumerics, _ . -",
    ),
    "Microsoft.ManagedIdentity/userAssignedIdentities": (
        r"[A-Za-z0-9][A-Za-z0-9_-]{2,127}",
        "3-128 alphanumerics, _ -, starting with a letter or digit",
    ),
    "Microsoft.Storage/storageAccounts": (r"[a-z0-9]{3,24}", "3-24 lowercase letters or digits"),
    "Microsoft.StorageCache/amlFilesystems": (
        r"[A-Za-z0-9][A-Za-z0-9_-]{0,78}[A-Za-z0-9]",
        "2-80 alphanumerics, _ -, starting and ending with a letter or digit",
    ),
    "Microsoft.NetApp/netAppAccounts": (
        r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}",
        "1-128 alphanumerics, _ -, starting with a letter or digit",
    ),
    "Microsoft.NetApp/netAppAccounts/capacityPools": (
        r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}",
        "1-64 alphanumerics, _ -, starting with a letter or digit",
    ),
    "Microsoft.NetApp/netAppAccounts/capacityPools/volumes": (
        r"[A-Za-z][A-Za-z0-9_-]{0,63}",
        "1-64 alphanumerics, _ -, starting with a letter",
    ),
    "Microsoft.Compute/virtualMachineScaleSets": (
        r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,62}[A-Za-z0-9_])?",
        "1-64 alphanumerics, _ . -, not ending in . or -",
    ),
}


def derived_names(lay: Layout) -> list[tuple[str, str]]:
    """(ARM type, name) of every resource whose name stoker makes from the plan or --name;
    a child's name is its own last segment."""
    names = [
        ("Microsoft.Network/networkSecurityGroups", nsg_name(lay)),
        ("Microsoft.Network/natGateways", nat_name(lay)),
        ("Microsoft.Network/publicIPAddresses", pip_name(lay)),
        ("Microsoft.Network/virtualNetworks", lay.vnet),
        ("Microsoft.ManagedIdentity/userAssignedIdentities", lay.identity),
    ]
    roles = [a.role for a in lay.accounts]
    if any(v.kind == "files" for v in lay.volumes):
        roles.append("files")
    names += [("Microsoft.Storage/storageAccounts", account_name(lay, r)) for r in roles]
    names += [("Microsoft.StorageCache/amlFilesystems", lu.name) for lu in lay.lustres]
    names += [("Microsoft.Compute/virtualMachineScaleSets", s.name) for s in lay.scale_sets]
    for v in lay.volumes:
        if v.kind == "netapp":
            names += [
                ("Microsoft.NetApp/netAppAccounts", lay.netapp_account),
                ("Microsoft.NetApp/netAppAccounts/capacityPools", f"pool-{v.role}"),
                ("Microsoft.NetApp/netAppAccounts/capacityPools/volumes", v.role),
            ]
    return names


def check_names(lay: Layout) -> None:
    """Refuse (naming ``name``, the option that shapes them) a derived name Azure would."""
    for kind, name in derived_names(lay):
        pattern, words = RULES[kind]
        if not re.fullmatch(pattern, name):
            raise ProvisionError(
                f"name: {shown(name)} is no valid {kind.rsplit('/', 1)[-1]} name ({words}); "
                "pass --name with 2-20 lowercase letters, digits or hyphens"
            )
