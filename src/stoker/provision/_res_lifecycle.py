"""The storage accounts' lifecycle rule: nothing stoker writes stays billed without end.

Blob versioning is on (``_res_storage``), so every checkpoint the checkpointer's retention
deletes, and every blob overwritten, lives on as a *previous version*, billed at the capacity
price like the blob itself, for ever unless something deletes it: about one checkpoint's bytes a
save (1 TB for a 70B model). One ``managementPolicies`` rule per account deletes previous
versions ``version_days`` after they were made (``checkpoints.version_days`` in the job spec,
default 7). A version the rule deletes is then soft-deleted, and the blob service's delete
retention (``SOFT_DELETE_DAYS``) removes it for good, as it does a deleted checkpoint blob:
the longest any checkpoint's bytes stay billed is ``version_days + SOFT_DELETE_DAYS``.
"""

from __future__ import annotations

from typing import Any

from ..catalog import Provisioning
from ._layout import Account, Layout
from ._refs import account_name, api, rid
from ._res_storage import SOFT_DELETE_DAYS

DEFAULT_VERSION_DAYS = 7
RULE = "stoker-delete-old-versions"


def longest_billed_days(version_days: int) -> int:
    """How long a checkpoint deleted now stays billed at most: as a previous version until the
    rule runs, then soft-deleted until the delete retention ends."""
    return version_days + SOFT_DELETE_DAYS


def management_policy(
    lay: Layout, acct: Account, facts: Provisioning, version_days: int
) -> dict[str, Any]:
    account = account_name(lay, acct.role)
    rule = {
        "name": RULE,
        "enabled": True,
        "type": "Lifecycle",
        "definition": {
            "filters": {"blobTypes": ["blockBlob"]},
            "actions": {"version": {"delete": {"daysAfterCreationGreaterThan": version_days}}},
        },
    }
    return {
        "type": "Microsoft.Storage/storageAccounts/managementPolicies",
        "apiVersion": api(facts, "Microsoft.Storage"),
        "name": f"{account}/default",
        "properties": {"policy": {"rules": [rule]}},
        # after the blob service that turns versioning on, so no version predates the rule
        "dependsOn": [rid("Microsoft.Storage/storageAccounts/blobServices", account, "default")],
    }


def lifecycle(lay: Layout, facts: Provisioning) -> list[dict[str, Any]]:
    """One policy per storage account (each has versioning on)."""
    return [management_policy(lay, acct, facts, lay.version_days) for acct in lay.accounts]
