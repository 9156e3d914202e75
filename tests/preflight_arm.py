"""The loopback ARM's answers to preflight's read-only calls (routes on tests/arm_server.py),
each in the shape of the public REST API specifications' examples (azure-rest-api-specs):

- Compute ``Usage_List`` (2024-07-01): ``{"value": [{"unit": "Count", "currentValue", "limit",
  "name": {"value", "localizedValue"}}]}``;
- Compute ``ResourceSkus_List`` (2021-07-01): ``{"value": [{"resourceType": "virtualMachines",
  "name", "tier", "size", "family", "locations", "locationInfo": [{"location", "zones"}],
  "capabilities", "restrictions": [{"type": "Location"|"Zone", "values", "restrictionInfo":
  {"locations", "zones"}, "reasonCode": "NotAvailableForSubscription"}]}]}``;
- StorageCache ``Skus_List``: the same shape, ``resourceType: "amlFilesystems"``;
- Storage ``Skus_List`` (2023-05-01): ``resourceType: "storageAccounts"``, ``name``, ``tier``,
  ``kind``, ``locations``, ``capabilities``, ``restrictions`` (type Location, ``reasonCode``);
- Authorization ``Permissions_ListForResourceGroup`` (2022-04-01): ``{"value": [{"actions",
  "notActions", "dataActions", "notDataActions"}]}``;
- MarketplaceOrdering ``MarketplaceAgreements_Get`` (2021-01-01): ``{"id", "name", "type",
  "properties": {"publisher", "product", "plan", "licenseTextLink", "privacyPolicyLink",
  "retrieveDatetime", "signature", "accepted"}}``;
- Resources ``Deployments_ValidateAtResourceGroupScope``: 202 + ``Location``, then 200
  ``{"id", "name", "properties": {"provisioningState": "Succeeded", ...}}`` or 400 ``{"error":
  {"code": "InvalidTemplateDeployment", "message", "details": [...]}}``;
- Resources ``Deployments_WhatIf``: 202 + ``Location``, then 200 ``{"status": "Succeeded",
  "properties": {"changes": [{"resourceId", "changeType", "before", "after"}]}}``.

``Azure`` holds what the subscription looks like; tests change its fields before the run.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from arm_server import ArmServer

CONTRIBUTOR = {
    "actions": ["*"],
    "notActions": [
        "Microsoft.Authorization/*/Delete",
        "Microsoft.Authorization/*/Write",
        "Microsoft.Authorization/elevateAccess/Action",
    ],
    "dataActions": [],
    "notDataActions": [],
}
OWNER = {"actions": ["*"], "notActions": [], "dataActions": [], "notDataActions": []}
H100_FAMILY = "standardNDSH100v5Family"


def vm_sku(name: str, family: str, region: str = "eastus", restrictions: Any = ()) -> dict:
    return {
        "resourceType": "virtualMachines",
        "name": name,
        "tier": "Standard",
        "size": name.removeprefix("Standard_"),
        "family": family,
        "locations": [region],
        "locationInfo": [{"location": region, "zones": ["1", "2", "3"], "zoneDetails": []}],
        "capabilities": [{"name": "vCPUs", "value": "96"}, {"name": "GPUs", "value": "8"}],
        "restrictions": list(restrictions),
    }


def lustre_sku(name: str, region: str = "eastus", restrictions: Any = ()) -> dict:
    return {
        "resourceType": "amlFilesystems",
        "name": name,
        "locations": [region],
        "locationInfo": [{"location": region, "zones": ["1", "2", "3"]}],
        "capabilities": [{"name": "bandwidth", "value": name.rsplit("-", 1)[-1]}],
        "restrictions": list(restrictions),
    }


def storage_sku(name: str, region: str = "eastus", restrictions: Any = ()) -> dict:
    return {
        "resourceType": "storageAccounts",
        "name": name,
        "tier": name.split("_")[0],
        "kind": "StorageV2",
        "locations": [region],
        "capabilities": [{"name": "supportsfileencryption", "value": "true"}],
        "restrictions": list(restrictions),
    }


def zone_restriction(region: str, zones: list[str]) -> dict:
    return {
        "type": "Zone",
        "values": [region],
        "restrictionInfo": {"locations": [region], "zones": zones},
        "reasonCode": "NotAvailableForSubscription",
    }


def location_restriction(region: str) -> dict:
    return {
        "type": "Location",
        "values": [region],
        "restrictionInfo": {"locations": [region]},
        "reasonCode": "NotAvailableForSubscription",
    }


def usage(name: str, localized: str, used: int, limit: int) -> dict:
    return {
        "unit": "Count",
        "currentValue": used,
        "limit": limit,
        "name": {"value": name, "localizedValue": localized},
    }


@dataclass
class Azure:
    """A subscription where everything the 64-VM example needs is fine; tests break parts."""

    region: str = "eastus"
    usages: list[dict] = field(
        default_factory=lambda: [
            usage("cores", "Total Regional vCPUs", 100, 250_000),
            usage(H100_FAMILY, "Standard NDSH100v5 Family vCPUs", 0, 250_000),
        ]
    )
    vm_skus: list[dict] = field(
        default_factory=lambda: [
            vm_sku("Standard_ND96isr_H100_v5", H100_FAMILY),
            vm_sku("Standard_D4as_v5", "standardDASv5Family"),
        ]
    )
    lustre_skus: list[dict] = field(
        default_factory=lambda: [
            lustre_sku(f"AMLFS-Durable-Premium-{n}") for n in (40, 125, 250, 500)
        ]
    )
    storage_skus: list[dict] = field(
        default_factory=lambda: [
            storage_sku(n) for n in ("Standard_LRS", "Standard_ZRS", "Premium_LRS", "Premium_ZRS")
        ]
    )
    permissions: list[dict] = field(default_factory=lambda: [OWNER])
    accepted: dict[str, bool] = field(default_factory=dict)  # "pub:offer:plan" -> accepted
    validate_error: dict | None = None  # the 400's "error"
    changes: list[tuple[str, str]] = field(default_factory=list)  # (changeType, resource type)
    bodies: dict[str, Any] = field(default_factory=dict)  # last JSON body POSTed, per action
    forbidden: set[str] = field(default_factory=set)  # routes answered 403: "terms", "skus", ...


def install(arm: ArmServer, az: Azure) -> None:
    """Serve ``az`` on ``arm``'s loopback ARM."""
    ops = itertools.count(1)
    results: dict[str, tuple[int, Any]] = {}
    sub = r"/subscriptions/[^/]+"

    def ok(body: Any) -> tuple[int, dict, Any]:
        return 200, {}, body

    def skus(method: str, m: Any, query: dict, body: bytes) -> Any:
        want = f"location eq '{az.region}'"
        assert query.get("$filter") == want, query  # the region is asked for, not every SKU
        return ok({"value": az.vm_skus})

    def scope(group: str) -> str:
        return f"/subscriptions/{arm.subscription}/resourceGroups/{group}"

    def later(action: str, status: int, result: Any) -> tuple[int, dict, Any]:
        op = f"{action}-{next(ops)}"
        results[op] = (status, result)
        url = f"{arm.url}/subscriptions/{arm.subscription}/operationresults/{op}?api-version=x"
        return 202, {"Location": url, "Retry-After": "0"}, None

    def deploy(method: str, m: Any, query: dict, body: bytes) -> Any:
        group, name, action = m.group(1), m.group(2), m.group(3)
        if group not in arm.state.groups:
            err = {
                "code": "ResourceGroupNotFound",
                "message": f"Resource group '{group}' could not be found.",
            }
            return 404, {}, {"error": err}
        sent = json.loads(body)
        az.bodies[action] = sent
        if action == "validate":
            if az.validate_error is not None:
                return later(action, 400, {"error": az.validate_error})
            rid = f"{scope(group)}/providers/Microsoft.Resources/deployments/{name}"
            props = {
                "provisioningState": "Succeeded",
                "mode": "Incremental",
                "validatedResources": [
                    {"id": r.get("name")} for r in sent["properties"]["template"]["resources"]
                ],
            }
            return later(action, 200, {"id": rid, "name": name, "properties": props})
        changes = [
            {
                "resourceId": f"{scope(group)}/providers/{t}/r{i}",
                "changeType": kind,
                "after": {"type": t},
            }
            for i, (kind, t) in enumerate(az.changes)
        ]
        return later(action, 200, {"status": "Succeeded", "properties": {"changes": changes}})

    def result(method: str, m: Any, query: dict, body: bytes) -> Any:
        status, answer = results[m.group(1)]
        return status, {}, answer

    def terms(method: str, m: Any, query: dict, body: bytes) -> Any:
        pub, offer, plan = m.group(1), m.group(2), m.group(3)
        accepted = az.accepted.get(f"{pub}:{offer}:{plan}", False)
        rid = (
            f"/subscriptions/{arm.subscription}/providers/Microsoft.MarketplaceOrdering/"
            f"offerTypes/VirtualMachine/publishers/{pub}/offers/{offer}/plans/{plan}/"
            "agreements/current"
        )
        return ok(
            {
                "id": rid,
                "name": plan,
                "type": "Microsoft.MarketplaceOrdering/offertypes",
                "properties": {
                    "publisher": pub,
                    "product": offer,
                    "plan": plan,
                    "licenseTextLink": "https://example.invalid/license",
                    "privacyPolicyLink": "https://example.invalid/privacy",
                    "retrieveDatetime": "2026-12-07T10:00:00Z",
                    "signature": "SIGNATURE",
                    "accepted": accepted,
                },
            }
        )

    def permissions(method: str, m: Any, query: dict, body: bytes) -> Any:
        group = m.group(1)
        if group and group not in arm.state.groups:
            err = {
                "code": "ResourceGroupNotFound",
                "message": f"Resource group '{group}' could not be found.",
            }
            return 404, {}, {"error": err}
        return ok({"value": az.permissions})

    def guarded(name: str, fn: Any) -> Any:
        def answer(method: str, m: Any, query: dict, body: bytes) -> Any:
            if name in az.forbidden:
                err = {"code": "AuthorizationFailed", "message": f"the client may not read {name}"}
                return 403, {}, {"error": err}
            return fn(method, m, query, body)

        return answer

    arm.route(f"{sub}/providers/microsoft.compute/skus", guarded("skus", skus), "GET")
    arm.route(
        f"{sub}/providers/microsoft.compute/locations/([^/]+)/usages",
        guarded("usages", lambda *a: ok({"value": az.usages})),
        "GET",
    )
    arm.route(
        f"{sub}/providers/microsoft.storagecache/skus",
        guarded("lustre-skus", lambda *a: ok({"value": az.lustre_skus})),
        "GET",
    )
    arm.route(
        f"{sub}/providers/microsoft.storage/skus",
        guarded("storage-skus", lambda *a: ok({"value": az.storage_skus})),
        "GET",
    )
    arm.route(
        f"{sub}(?:/resourcegroups/([^/]+))?/providers/microsoft.authorization/permissions",
        guarded("permissions", permissions),
        "GET",
    )
    arm.route(
        f"{sub}/providers/microsoft.marketplaceordering/offertypes/virtualmachine/"
        r"publishers/([^/]+)/offers/([^/]+)/plans/([^/]+)/agreements/current",
        guarded("terms", terms),
        "GET",
    )
    arm.route(
        f"{sub}/resourcegroups/([^/]+)/providers/microsoft.resources/deployments/([^/]+)/"
        "(validate|whatif)",
        deploy,
        "POST",
    )
    arm.route(f"{sub}/operationresults/((?:validate|whatif)-\\d+)", result, "GET")
