"""ARM resources for Blob: hardened storage accounts, their blob service (soft delete,
versioning) and containers.

Every account: HTTPS only, TLS 1.2, no public blob access, Entra ID by default, infrastructure
encryption, firewall default deny with the VNet's subnets and trusted Azure services let in.
Shared-key access is off everywhere except the one account Managed Lustre's Blob integration
(HSM) is linked to: AMLFS makes SAS tokens on it, and Microsoft's prerequisites ask for key
access there (docs/provision.md). That account holds only the containers Lustre imports from
and archives to, and its logging container.
"""

from __future__ import annotations

from typing import Any

from ..catalog import Provisioning
from ._layout import Account, Layout
from ._refs import account_name, api, rid, tags, with_skip
from ._res_access import storage_ip_rules, storage_subnet_rules

SOFT_DELETE_DAYS = 14

_SKIP_LRS = (
    "CKV_AZURE_206",
    "LRS on purpose: the plan prices Blob at the LRS rate, the data is re-creatable from its "
    "source and the checkpoints are versioned with soft delete; pass a ZRS sku by hand for "
    "zone failure",
)
_SKIP_PUBLIC = (
    "CKV_AZURE_59",
    "the firewall denies by default and admits only the VNet's compute and Lustre subnets "
    "(service endpoints) and trusted Azure services; 'Disabled' would also shut those out and "
    "require private endpoints and DNS zones",
)
_SKIP_SHARED_KEY = (
    "CKV2_AZURE_40",
    "AMLFS Blob integration (HSM) creates SAS tokens on this account and its prerequisites "
    "require key access; this account holds only the Lustre-linked containers",
)


def subnet_id(lay: Layout, name: str) -> str:
    return rid("Microsoft.Network/virtualNetworks/subnets", lay.vnet, name)


def account(
    lay: Layout, acct: Account, facts: Provisioning, price: str | None, hourly: dict[str, str]
) -> dict[str, Any]:
    rules = [{"id": subnet_id(lay, "compute"), "action": "Allow"}]
    rules += [{"id": subnet_id(lay, lu.subnet.name), "action": "Allow"} for lu in lay.lustres]
    rules += storage_subnet_rules(lay)  # the way in's (_res_access)
    res: dict[str, Any] = {
        "type": "Microsoft.Storage/storageAccounts",
        "apiVersion": api(facts, "Microsoft.Storage"),
        "name": account_name(lay, acct.role),
        "location": lay.region,
        "tags": tags(lay, hourly, price),
        "sku": {"name": "Standard_LRS"},
        "kind": "StorageV2",
        "properties": {
            "accessTier": "Hot",
            "supportsHttpsTrafficOnly": True,
            "minimumTlsVersion": "TLS1_2",
            "allowBlobPublicAccess": False,
            "allowSharedKeyAccess": acct.shared_key,
            "defaultToOAuthAuthentication": True,
            "allowCrossTenantReplication": False,
            "publicNetworkAccess": "Enabled",
            "networkAcls": {
                "defaultAction": "Deny",
                "bypass": "AzureServices",
                "virtualNetworkRules": rules,
                "ipRules": storage_ip_rules(lay),
            },
            "encryption": {
                "keySource": "Microsoft.Storage",
                "requireInfrastructureEncryption": True,
                "services": {
                    "blob": {"enabled": True, "keyType": "Account"},
                    "file": {"enabled": True, "keyType": "Account"},
                    "queue": {"enabled": True, "keyType": "Account"},
                    "table": {"enabled": True, "keyType": "Account"},
                },
            },
        },
        "dependsOn": [rid("Microsoft.Network/virtualNetworks", lay.vnet)],
    }
    skips = [_SKIP_LRS, _SKIP_PUBLIC]
    if acct.shared_key:
        skips.append(_SKIP_SHARED_KEY)
    return with_skip(res, *skips)


def blob_service(lay: Layout, acct: Account, facts: Provisioning) -> dict[str, Any]:
    retention = {"enabled": True, "days": SOFT_DELETE_DAYS}
    return {
        "type": "Microsoft.Storage/storageAccounts/blobServices",
        "apiVersion": api(facts, "Microsoft.Storage"),
        "name": f"{account_name(lay, acct.role)}/default",
        "properties": {
            "deleteRetentionPolicy": {**retention, "allowPermanentDelete": False},
            "containerDeleteRetentionPolicy": retention,
            "isVersioningEnabled": True,
        },
        "dependsOn": [rid("Microsoft.Storage/storageAccounts", account_name(lay, acct.role))],
    }


def container(lay: Layout, acct: Account, name: str, facts: Provisioning) -> dict[str, Any]:
    account = account_name(lay, acct.role)
    return {
        "type": "Microsoft.Storage/storageAccounts/blobServices/containers",
        "apiVersion": api(facts, "Microsoft.Storage"),
        "name": f"{account}/default/{name}",
        "properties": {"publicAccess": "None"},
        "dependsOn": [rid("Microsoft.Storage/storageAccounts/blobServices", account, "default")],
    }


def container_id(lay: Layout, acct: Account, name: str) -> str:
    return rid(
        "Microsoft.Storage/storageAccounts/blobServices/containers",
        account_name(lay, acct.role),
        "default",
        name,
    )


def storage(
    lay: Layout, facts: Provisioning, hourly: dict[str, str], prices: dict[str, str | None]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for acct in lay.accounts:
        out.append(account(lay, acct, facts, prices.get(acct.role), hourly))
        out.append(blob_service(lay, acct, facts))
        out += [container(lay, acct, name, facts) for name in acct.containers]
    return out
