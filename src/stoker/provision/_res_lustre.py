"""ARM resources for Managed Lustre: each file system, in the zone its client scale sets use,
linked to Blob (HSM), and an auto-export job on the checkpoint file system.

Rules the schema does not carry (docs/provision.md, azure-infra.md section 6):

- One availability zone for the file system and its clients: clients get the advertised
  throughput only in the file system's zone (azure-managed-lustre ``amlfs-overview.md``).
- From API 2024-07-01 the HSM import prefixes are ``importPrefixesInitial`` (an array).
- The HPC Cache Resource Provider's roles on the storage account must reach the resource
  provider before the file system is created (up to five minutes; pre-validation cannot tell):
  the file system is created only in the second deployment (``deployLustre=true``), after the
  first has made the roles.
- ``autoExportJobs`` exports the checkpoints to Blob while the run writes them, so Blob stays
  current and teardown's final archive has little left to do.
"""

from __future__ import annotations

from typing import Any

from ..catalog import Provisioning
from ._layout import Layout, Lustre
from ._refs import api, rid, tags
from ._res_compute import role_id
from ._res_storage import container_id, subnet_id

MAINTENANCE = {"dayOfWeek": "Saturday", "timeOfDayUTC": "23:00"}  # CCWS's choice too
# The API version from which the HSM import prefixes are an array (importPrefixesInitial).
PREFIXES_ARRAY_FROM = "2024-07-01"
DEPLOY_LUSTRE = "[parameters('deployLustre')]"


def _hsm_account(lay: Layout) -> Any:
    return next(a for a in lay.accounts if a.role == "hsm")


def hsm_settings(lay: Layout, lu: Lustre, version: str) -> dict[str, Any]:
    acct = _hsm_account(lay)
    prefixes: dict[str, Any] = (
        {"importPrefixesInitial": [lu.import_prefix]}
        if version >= PREFIXES_ARRAY_FROM
        else {"importPrefix": lu.import_prefix}
    )
    return {
        "container": container_id(lay, acct, lu.container),
        "loggingContainer": container_id(lay, acct, "lustre-logs"),
        **prefixes,
    }


def amlfs(
    lay: Layout, lu: Lustre, facts: Provisioning, price: str | None, hourly: dict[str, str]
) -> dict[str, Any]:
    acct = _hsm_account(lay)
    version = api(facts, "Microsoft.StorageCache")
    return {
        "condition": DEPLOY_LUSTRE,
        "type": "Microsoft.StorageCache/amlFilesystems",
        "apiVersion": version,
        "name": lu.name,
        "location": lay.region,
        "tags": tags(lay, hourly, price),
        "sku": {"name": lu.sku},
        "zones": [lay.zone],
        "properties": {
            "storageCapacityTiB": lu.capacity_tib,
            "filesystemSubnet": subnet_id(lay, lu.subnet.name),
            "maintenanceWindow": dict(MAINTENANCE),
            "hsm": {"settings": hsm_settings(lay, lu, version)},
            "rootSquashSettings": {"mode": "None"},
        },
        "dependsOn": [
            rid("Microsoft.Network/virtualNetworks", lay.vnet),
            container_id(lay, acct, lu.container),
            container_id(lay, acct, "lustre-logs"),
            role_id(lay, "hsm", "amlfs-account"),
            role_id(lay, "hsm", "amlfs-blob"),
        ],
    }


def auto_export(lay: Layout, lu: Lustre, facts: Provisioning) -> dict[str, Any]:
    """Export what the run writes under the checkpoint file system's root as it is written."""
    return {
        "condition": DEPLOY_LUSTRE,
        "type": "Microsoft.StorageCache/amlFilesystems/autoExportJobs",
        "apiVersion": api(facts, "Microsoft.StorageCache"),
        "name": f"{lu.name}/checkpoints",
        "location": lay.region,
        "properties": {"adminStatus": "Enable", "autoExportPrefixes": ["/"]},
        "dependsOn": [rid("Microsoft.StorageCache/amlFilesystems", lu.name)],
    }


def lustre_resources(
    lay: Layout, facts: Provisioning, prices: dict[str, str | None], hourly: dict[str, str]
) -> list[dict[str, Any]]:
    out = []
    for lu in lay.lustres:
        out.append(amlfs(lay, lu, facts, prices.get(lu.name), hourly))
        if lu.role == "checkpoints":
            out.append(auto_export(lay, lu, facts))
    return out
