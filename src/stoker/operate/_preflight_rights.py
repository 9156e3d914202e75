"""Who may deploy what: the deployer's rights on the group (Authorization ``permissions``,
2022-04-01: an action is allowed when some entry's ``actions`` match it and the same entry's
``notActions`` do not, wildcards allowed) to deploy (Contributor) and to create role assignments
(Owner or User Access Administrator; Contributor may not), and the marketplace terms of every
image with a plan (MarketplaceOrdering ``agreements/current``, 2021-01-01: ``accepted``)."""

from __future__ import annotations

import fnmatch
from typing import Any

from ._preflight_live import Live, values
from ._preflight_needs import Needs, PreflightCheck

PERMISSIONS_API = "2022-04-01"
TERMS_API = "2021-01-01"
ROLE_WRITE = "Microsoft.Authorization/roleAssignments/write"
DEPLOY_WRITE = "Microsoft.Resources/deployments/write"


def rights(live: Live, needs: Needs) -> list[PreflightCheck]:
    """Whether the deployer may deploy (``deployments/write``: Contributor) and, where the
    template makes role assignments, create them (Owner, User Access Administrator)."""
    scope = f"{live.sub}/resourceGroups/{needs.group}"
    ans = live.call(
        "GET", f"{scope}/providers/Microsoft.Authorization/permissions", PERMISSIONS_API
    )
    where = f"resource group {needs.group}"
    if ans.status == 404:  # the group does not exist yet: the subscription's rights apply
        where = "the subscription"
        ans = live.call(
            "GET", f"{live.sub}/providers/Microsoft.Authorization/permissions", PERMISSIONS_API
        )
    if ans.status != 200:
        return [PreflightCheck("rights", "unchecked", f"rights on {where}: {ans.error()}")]
    wanted = {DEPLOY_WRITE: "deploy"}
    if needs.role_assignments:
        wanted[ROLE_WRITE] = "create role assignments"
    missing = [a for a in wanted if not allows(values(ans.body), a)]
    if not missing:
        what = " and ".join(wanted.values())
        return [PreflightCheck("rights", "ok", f"rights: may {what} on {where}")]
    who = "Owner or User Access Administrator" if ROLE_WRITE in missing else "Contributor"
    return [
        PreflightCheck(
            "rights",
            "failed",
            f"rights: may not {' nor '.join(wanted[a] for a in missing)} on {where} "
            f"({', '.join(missing)}); ask for {who} there",
            {"missing": missing},
        )
    ]


def allows(permissions: list[dict[str, Any]], action: str) -> bool:
    """ARM's rule: some permission lists the action (wildcards allowed) and that same
    permission does not exclude it in ``notActions``."""
    low = action.lower()

    def match(patterns: Any) -> bool:
        return any(fnmatch.fnmatchcase(low, str(p).lower()) for p in patterns or [])

    return any(match(p.get("actions")) and not match(p.get("notActions")) for p in permissions)


def terms(live: Live, needs: Needs) -> list[PreflightCheck]:
    """Marketplace terms of every image with a plan."""
    checks = []
    for publisher, offer, plan, user in needs.plans:
        urn = f"{publisher}:{offer}:{plan}"
        ans = live.call(
            "GET",
            f"{live.sub}/providers/Microsoft.MarketplaceOrdering/offerTypes/"
            f"virtualmachine/publishers/{publisher}/offers/{offer}/plans/{plan}/"
            "agreements/current",
            TERMS_API,
        )
        if ans.status != 200:
            checks.append(
                PreflightCheck(
                    "terms",
                    "unchecked",
                    f"marketplace terms of {urn} ({user}): {ans.error()}",
                    {"urn": urn},
                )
            )
            continue
        accepted = ((ans.body or {}).get("properties") or {}).get("accepted") is True
        if accepted:
            checks.append(
                PreflightCheck(
                    "terms", "ok", f"marketplace terms of {urn} accepted ({user})", {"urn": urn}
                )
            )
        else:
            checks.append(
                PreflightCheck(
                    "terms",
                    "failed",
                    f"marketplace terms of {urn} not accepted "
                    f"({user}): run `az vm image terms accept --urn {urn}:latest`",
                    {"urn": urn},
                )
            )
    return checks
