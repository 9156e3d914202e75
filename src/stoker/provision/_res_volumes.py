"""ARM resources for the NFS volumes the plan chose.

Azure NetApp Files: one account, a capacity pool per volume (whole TiB, the volume's service
level) and the volume in the delegated ``netapp`` subnet, NFSv4.1, exported to the compute
subnet only. Azure Files: one premium FileStorage account with an NFS share per volume, reached
through the compute subnet's service endpoint; NFS shares need secure transfer off (no TLS on
NFS), so that account alone has it off and admits no network but the compute subnet.
"""

from __future__ import annotations

from typing import Any

from ..catalog import Provisioning
from ._layout import Layout
from ._refs import account_name, api, rid, tags, with_skip
from ._res_storage import subnet_id
from ._volume_plan import GiB, TiB, Volume

SHARE_SOFT_DELETE_DAYS = 7

_SKIP_NFS_HTTPS = (
    "CKV_AZURE_3",
    "Azure Files NFS shares require secure transfer off (NFS carries no TLS); this account "
    "holds only NFS shares and its firewall admits the compute subnet alone",
)
_SKIP_LRS = (
    "CKV_AZURE_206",
    "LRS: the share is a cache of data whose copy of record is in Blob",
)
_SKIP_PUBLIC = (
    "CKV_AZURE_59",
    "the firewall denies by default and admits only the compute subnet (service endpoint); "
    "'Disabled' would require a private endpoint and a DNS zone",
)


def pool_name(lay: Layout, v: Volume) -> str:
    return f"{lay.netapp_account}/pool-{v.role}"


def volume_name(lay: Layout, v: Volume) -> str:
    return f"{pool_name(lay, v)}/{v.role}"


def volume_id(lay: Layout, v: Volume) -> str:
    return rid(
        "Microsoft.NetApp/netAppAccounts/capacityPools/volumes",
        lay.netapp_account,
        f"pool-{v.role}",
        v.role,
    )


def _netapp(lay: Layout, facts: Provisioning, hourly: dict[str, str]) -> list[dict[str, Any]]:
    anf = [v for v in lay.volumes if v.kind == "netapp"]
    if not anf:
        return []
    version = api(facts, "Microsoft.NetApp")
    account = rid("Microsoft.NetApp/netAppAccounts", lay.netapp_account)
    out: list[dict[str, Any]] = [
        {
            "type": "Microsoft.NetApp/netAppAccounts",
            "apiVersion": version,
            "name": lay.netapp_account,
            "location": lay.region,
            "tags": tags(lay, hourly, "0"),
            "properties": {},
        }
    ]
    for v in anf:
        price = hourly.get(pool_name(lay, v))
        out.append(
            {
                "type": "Microsoft.NetApp/netAppAccounts/capacityPools",
                "apiVersion": version,
                "name": pool_name(lay, v),
                "location": lay.region,
                "tags": tags(lay, hourly, None if price in (None, "unknown") else price),
                "properties": {
                    "serviceLevel": v.level,
                    "size": v.pool_tib * TiB,
                    "qosType": "Auto",
                },
                "dependsOn": [account],
            }
        )
        rule = {
            "ruleIndex": 1,
            "allowedClients": lay.compute_subnet.cidr,
            "nfsv3": False,
            "nfsv41": True,
            "cifs": False,
            "unixReadOnly": False,
            "unixReadWrite": True,
            "hasRootAccess": True,
        }
        out.append(
            {
                "type": "Microsoft.NetApp/netAppAccounts/capacityPools/volumes",
                "apiVersion": version,
                "name": volume_name(lay, v),
                "location": lay.region,
                "tags": tags(lay, hourly, "0"),
                "properties": {
                    "creationToken": v.role,
                    "serviceLevel": v.level,
                    "usageThreshold": v.size_gib * GiB,
                    "subnetId": subnet_id(lay, "netapp"),
                    "protocolTypes": ["NFSv4.1"],
                    "isLargeVolume": v.large,
                    "networkFeatures": "Standard",
                    "snapshotDirectoryVisible": True,
                    "exportPolicy": {"rules": [rule]},
                },
                "dependsOn": [
                    rid("Microsoft.NetApp/netAppAccounts/capacityPools", lay.netapp_account,
                        f"pool-{v.role}"),
                    rid("Microsoft.Network/virtualNetworks", lay.vnet),
                ],
            }
        )  # fmt: skip
    return out


def _files(lay: Layout, facts: Provisioning, hourly: dict[str, str]) -> list[dict[str, Any]]:
    shares = [v for v in lay.volumes if v.kind == "files"]
    if not shares:
        return []
    version = api(facts, "Microsoft.Storage")
    name = account_name(lay, "files")
    price = hourly.get(name)
    account = with_skip(
        {
            "type": "Microsoft.Storage/storageAccounts",
            "apiVersion": version,
            "name": name,
            "location": lay.region,
            "tags": tags(lay, hourly, None if price in (None, "unknown") else price),
            "sku": {"name": "Premium_LRS"},
            "kind": "FileStorage",
            "properties": {
                "supportsHttpsTrafficOnly": False,
                "minimumTlsVersion": "TLS1_2",
                "allowBlobPublicAccess": False,
                "allowSharedKeyAccess": False,
                "allowCrossTenantReplication": False,
                "publicNetworkAccess": "Enabled",
                "networkAcls": {
                    "defaultAction": "Deny",
                    "bypass": "AzureServices",
                    "virtualNetworkRules": [{"id": subnet_id(lay, "compute"), "action": "Allow"}],
                    "ipRules": [],
                },
                "encryption": {
                    "keySource": "Microsoft.Storage",
                    "requireInfrastructureEncryption": True,
                    "services": {"file": {"enabled": True, "keyType": "Account"}},
                },
            },
            "dependsOn": [rid("Microsoft.Network/virtualNetworks", lay.vnet)],
        },
        _SKIP_NFS_HTTPS,
        _SKIP_LRS,
        _SKIP_PUBLIC,
    )
    out: list[dict[str, Any]] = [
        account,
        {
            "type": "Microsoft.Storage/storageAccounts/fileServices",
            "apiVersion": version,
            "name": f"{name}/default",
            "properties": {
                "shareDeleteRetentionPolicy": {"enabled": True, "days": SHARE_SOFT_DELETE_DAYS}
            },
            "dependsOn": [rid("Microsoft.Storage/storageAccounts", name)],
        },
    ]
    for v in shares:
        out.append(
            {
                "type": "Microsoft.Storage/storageAccounts/fileServices/shares",
                "apiVersion": version,
                "name": f"{name}/default/{v.role}",
                "properties": {
                    "enabledProtocols": "NFS",
                    "rootSquash": "NoRootSquash",
                    "shareQuota": v.size_gib,
                },
                "dependsOn": [
                    rid("Microsoft.Storage/storageAccounts/fileServices", name, "default")
                ],
            }
        )
    return out


def volume_resources(
    lay: Layout, facts: Provisioning, hourly: dict[str, str]
) -> list[dict[str, Any]]:
    return _netapp(lay, facts, hourly) + _files(lay, facts, hourly)


def volume_ids(lay: Layout) -> list[str]:
    """What the scale sets wait for: every volume they mount."""
    out = [volume_id(lay, v) for v in lay.volumes if v.kind == "netapp"]
    name = account_name(lay, "files")
    out += [
        rid("Microsoft.Storage/storageAccounts/fileServices/shares", name, "default", v.role)
        for v in lay.volumes
        if v.kind == "files"
    ]
    return out
