"""Talking to ARM for preflight (``Live``: a request, a 202's ``Location`` polled), and the
checks of what the region offers: Compute ``skus`` (2021-07-01; ``restrictions`` of type
Location / Zone, reasonCode NotAvailableForSubscription), StorageCache ``skus``, and Compute
``usages`` (2024-07-01) against the vCPUs needed. Rights and terms are _preflight_rights.py,
validate and what-if _preflight_deploy.py. Every answer is read in the shape of the public
REST API specifications (azure-rest-api-specs); every call only reads.

Requests go through the resource client's pipeline (``send_request``): one credential, the SDK's
retries of 408/429/5xx with ``Retry-After``, and the loopback opt-out of ``_arm.ArmClients``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..catalog import Catalog
from ..errors import PreflightError
from ._arm import ArmClients, api_version
from ._preflight_needs import Needs, PreflightCheck

USAGES_API = "2024-07-01"
STORAGE_SKUS_API = "2023-05-01"
SKUS_API = "2021-07-01"
WHAT_IF_KINDS = ("Create", "Modify", "Delete", "Deploy", "NoChange", "Ignore", "Unsupported")


@dataclass(frozen=True)
class Sku:
    """What the Resource SKUs list says of a VM size."""

    family: str  # the quota family, as Compute usages name it (standardNDSH100v5Family)
    vcpus: int | None


class Answer:
    def __init__(self, status: int, body: Any, headers: dict[str, str]) -> None:
        self.status, self.body, self.headers = status, body, headers

    def error(self) -> str:
        err = (self.body or {}).get("error") if isinstance(self.body, dict) else None
        if not isinstance(err, dict):
            return f"ARM answered {self.status}"
        text = f"{err.get('code') or 'error'}: {err.get('message') or ''}".strip()
        details = [d for d in err.get("details") or [] if isinstance(d, dict)]
        if details:
            text += f" ({details[0].get('code')}: {details[0].get('message')})"
        return text


class Live:
    """The ARM calls preflight makes, in one subscription."""

    def __init__(
        self,
        arm: ArmClients,
        *,
        poll_s: float,
        timeout_s: float,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.arm, self.poll_s, self.timeout_s, self.sleep = arm, poll_s, timeout_s, sleep
        self.sub = f"/subscriptions/{arm.subscription_id}"

    def call(
        self, method: str, url: str, api: str | None, body: Any = None, **params: str
    ) -> Answer:
        from azure.core.rest import HttpRequest

        if api:
            params["api-version"] = api
        request = HttpRequest(method, url, params=params or None, json=body)
        try:
            resp = self.arm.resources.send_request(request, **self.arm.call)
        except Exception as exc:  # credential and transport errors: no later call would pass
            raise no_azure(exc) from exc
        try:
            data = resp.json() if resp.content else None
        except ValueError:
            data = None
        # 401: the token itself was refused, and every other call would be too. A 403 is one
        # call this identity may not make: that check alone is left unchecked.
        if resp.status_code == 401:
            err = Answer(resp.status_code, data, {}).error()
            raise NoAzure(f"Azure refused the token ({err}); sign in again with `az login`")
        return Answer(resp.status_code, data, dict(resp.headers))

    def wait(self, answer: Answer, what: str) -> Answer:
        """Poll a 202's ``Location`` until it answers something other than 202."""
        deadline = time.monotonic() + self.timeout_s
        while answer.status == 202:
            where = answer.headers.get("Location") or answer.headers.get("location")
            if not where:
                return Answer(
                    502,
                    {"error": {"code": "NoLocation", "message": f"{what}: 202 without a Location"}},
                    {},
                )
            if time.monotonic() >= deadline:
                return Answer(
                    504,
                    {
                        "error": {
                            "code": "Timeout",
                            "message": f"{what} still running after {self.timeout_s:.0f} s",
                        }
                    },
                    {},
                )
            self.sleep(_retry_after(answer.headers, self.poll_s))
            answer = self.call("GET", where, None)
        return answer


class NoAzure(PreflightError):
    """Azure cannot be asked at all (no credential, no route): every check left is unchecked."""


def no_azure(exc: BaseException) -> NoAzure:
    from azure.core.exceptions import ClientAuthenticationError, ServiceRequestError

    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, ClientAuthenticationError) or "Credential" in type(exc).__name__:
        return NoAzure(
            f"no Azure credential signed in ({first}); run `az login`, or set AZURE_CLIENT_ID, "
            "AZURE_TENANT_ID and AZURE_CLIENT_SECRET, or use a managed identity"
        )
    if isinstance(exc, ServiceRequestError):
        return NoAzure(f"cannot reach Azure Resource Manager ({first})")
    return NoAzure(f"asking Azure failed: {type(exc).__name__}: {first}")


def _retry_after(headers: dict[str, str], default: float) -> float:
    try:
        return min(float(headers.get("Retry-After") or headers.get("retry-after") or default), 60.0)
    except ValueError:
        return default


# --------------------------------------------------------------------------- SKUs and quota


def vm_skus(live: Live, needs: Needs) -> tuple[list[PreflightCheck], dict[str, Sku]]:
    """Each VM size offered in the region and its zones; its quota family and vCPUs."""
    url = f"{live.sub}/providers/Microsoft.Compute/skus"
    where = {"$filter": f"location eq '{needs.region}'"}
    listed, error = _sku_list(live, needs, url, SKUS_API, "virtualMachines", **where)
    if error:
        return [PreflightCheck("sku", "unchecked", f"VM sizes in {needs.region}: {error}")], {}
    checks, families = [], {}
    for size in sorted({s.vm_size for s in needs.scale_sets}):
        arm_name = f"Standard_{size}"
        zones = sorted({z for s in needs.scale_sets if s.vm_size == size for z in s.zones})
        sku = listed.get(arm_name.lower())
        hint = " (Resource SKUs): pick another region or size"
        checks.append(_offered_in("sku", arm_name, sku, needs, zones, hint, {"vm_size": size}))
        if sku is not None:
            families[size] = Sku(str(sku.get("family") or ""), _vcpus(sku))
    return checks, families


def _vcpus(sku: dict[str, Any]) -> int | None:
    for cap in sku.get("capabilities") or []:
        if isinstance(cap, dict) and cap.get("name") == "vCPUs":
            try:
                return int(cap.get("value"))
            except (TypeError, ValueError):
                return None
    return None


def lustre_skus(live: Live, needs: Needs) -> list[PreflightCheck]:
    """Each Lustre SKU offered in the region and its zone (StorageCache's own SKU list)."""
    wanted = [(lu.sku, list(lu.zones)) for lu in needs.lustres]
    url = f"{live.sub}/providers/Microsoft.StorageCache/skus"
    api = api_version("Microsoft.StorageCache")
    return _offered(live, needs, "lustre-sku", "Lustre", url, api, "amlFilesystems", wanted)


def storage_skus(live: Live, needs: Needs) -> list[PreflightCheck]:
    """Each storage account SKU offered in the region (Storage's SKU list)."""
    wanted = [(sku, []) for sku in needs.storage_skus]
    url = f"{live.sub}/providers/Microsoft.Storage/skus"
    return _offered(live, needs, "storage-sku", "storage", url, STORAGE_SKUS_API,
                    "storageAccounts", wanted)  # fmt: skip


def _offered(live: Live, needs: Needs, kind: str, label: str, url: str, api: str, rtype: str,
             wanted: list[tuple[str, list[str]]]) -> list[PreflightCheck]:  # fmt: skip
    """Each (SKU, zones) of ``wanted`` in a resource provider's SKU list: listed for the region,
    and not restricted there or in the zones (zones given are the ones the resource takes)."""
    if not wanted:
        return []
    listed, error = _sku_list(live, needs, url, api, rtype)
    if error:
        return [PreflightCheck(kind, "unchecked", f"{label} SKUs in {needs.region}: {error}")]
    return [
        _offered_in(
            kind,
            f"{label} {name}",
            listed.get(name.lower()),
            needs,
            list(zones),
            ": pick another region or SKU",
            {"sku": name},
            pinned=bool(zones),
        )
        for name, zones in dict.fromkeys((n, tuple(z)) for n, z in wanted)
    ]


def _sku_list(
    live: Live, needs: Needs, url: str, api: str, rtype: str, **params: str
) -> tuple[dict[str, dict[str, Any]], str]:
    """A resource provider's SKU list for ``rtype``, by lower-case name (the region's entry
    where a SKU is listed once per region), and ARM's error ("" when it answered)."""
    ans = live.call("GET", url, api, **params)
    if ans.status != 200:
        return {}, ans.error()
    region = needs.region.lower()
    listed: dict[str, dict[str, Any]] = {}
    for s in values(ans.body):
        if str(s.get("resourceType", "")).lower() != rtype.lower():
            continue
        here = region in _lower(s.get("locations"))
        if here or str(s.get("name", "")).lower() not in listed:
            listed[str(s.get("name", "")).lower()] = s
    return listed, ""


def _offered_in(kind: str, label: str, sku: dict[str, Any] | None, needs: Needs,
                zones: list[str], hint: str, found: dict[str, Any],
                pinned: bool | None = None) -> PreflightCheck:  # fmt: skip
    """One SKU (None: not in the list) offered in the region and not restricted there or in
    ``zones``; ``hint`` ends the line of one that is not offered."""
    if sku is None or needs.region.lower() not in _lower(sku.get("locations")):
        return PreflightCheck(kind, "failed", f"{label} is not offered in {needs.region}{hint}",
                              found)  # fmt: skip
    return restricted(kind, label, sku, needs.region, zones, pinned)


def restricted(
    kind: str,
    label: str,
    sku: dict[str, Any],
    region: str,
    zones: list[str],
    pinned: bool | None = None,
) -> PreflightCheck:
    """A SKU's ``restrictions`` against the region and the zones the deployment uses. With no
    zone pinned, a zone restriction is a warning (Azure may still place it elsewhere)."""
    pinned = bool(zones) if pinned is None else pinned
    for r in sku.get("restrictions") or []:
        info = r.get("restrictionInfo") or {}
        reason = r.get("reasonCode") or "no reason given"
        if r.get("type") == "Location" and region.lower() in _lower(
            r.get("values") or info.get("locations")
        ):
            return PreflightCheck(
                kind,
                "failed",
                f"{label} is restricted in {region} ({reason}): ask for "
                "access with a support request, or pick another region",
                {"sku": sku.get("name"), "reason": reason},
            )
        if r.get("type") == "Zone":
            hit = sorted(set(_lower(info.get("zones"))) & set(_lower(zones)))
            blocked = sorted(_lower(info.get("zones")))
            if pinned and hit:
                return PreflightCheck(
                    kind,
                    "failed",
                    f"{label} is restricted in zone {', '.join(hit)} of "
                    f"{region} ({reason}), the zone the deployment uses: pick another "
                    "zone or ask for access",
                    {"sku": sku.get("name"), "zones": hit, "reason": reason},
                )
            if not pinned and blocked:
                return PreflightCheck(
                    kind,
                    "warning",
                    f"{label} is restricted in zone "
                    f"{', '.join(blocked)} of {region} ({reason}); the template pins no "
                    "zone",
                    {"sku": sku.get("name"), "zones": blocked},
                )
    where = f"{region} zone {', '.join(zones)}" if zones else region
    return PreflightCheck(kind, "ok", f"{label} is offered in {where}", {"sku": sku.get("name")})


def quota(live: Live, needs: Needs, cat: Catalog, skus: dict[str, Sku]) -> list[PreflightCheck]:
    """Compute usages: each family's free vCPUs and the regional total against the need."""
    ans = live.call(
        "GET", f"{live.sub}/providers/Microsoft.Compute/locations/{needs.region}/usages", USAGES_API
    )
    if ans.status != 200:
        return [
            PreflightCheck("quota", "unchecked", f"vCPU quota in {needs.region}: {ans.error()}")
        ]
    usage = {str((u.get("name") or {}).get("value", "")).lower(): u for u in values(ans.body)}
    need_by_family: dict[str, int] = {}
    labels: dict[str, str] = {}
    checks = []
    counted = needs.vcpus({k: v.vcpus for k, v in skus.items() if v.vcpus})
    for size in sorted({s.vm_size for s in needs.scale_sets} - set(counted)):
        checks.append(
            PreflightCheck(
                "quota",
                "unchecked",
                f"vCPU quota for {size}: its vCPUs are in neither the catalog nor the region's "
                "SKU list",
            )
        )
    for size, vcpus in counted.items():
        fam = skus[size].family if size in skus else ""
        if not fam:
            checks.append(
                PreflightCheck(
                    "quota",
                    "unchecked",
                    f"vCPU quota for {size}: its quota family "
                    "is unknown (the size is not in the region's SKU list)",
                )
            )
            continue
        need_by_family[fam] = need_by_family.get(fam, 0) + vcpus
        name = cat.vm[size].family if size in cat.vm else size
        labels[fam] = f"{name} family ({fam})"
    need_by_family["cores"] = sum(counted.values())
    labels["cores"] = "regional total (cores)"
    for fam, need in need_by_family.items():
        u = usage.get(fam.lower())
        if u is None:
            checks.append(
                PreflightCheck(
                    "quota",
                    "failed",
                    f"vCPU quota, {labels[fam]} in {needs.region}: "
                    f"no quota listed, needs {need:,}; request it (portal: Quotas)",
                    {"family": fam, "needed": need},
                )
            )
            continue
        limit, used = int(u.get("limit") or 0), int(u.get("currentValue") or 0)
        free = limit - used
        figures = {"family": fam, "needed": need, "limit": limit, "used": used, "free": free}
        text = (
            f"vCPU quota, {labels[fam]} in {needs.region}: needs {need:,}, {free:,} free "
            f"({used:,} used of {limit:,})"
        )
        if need > free:
            text += f"; raise the limit to {need + used:,} (portal: Quotas > Compute) first"
        checks.append(PreflightCheck("quota", "failed" if need > free else "ok", text, figures))
    return checks


def values(body: Any) -> list[dict[str, Any]]:
    items = (body or {}).get("value") if isinstance(body, dict) else None
    return [i for i in items or [] if isinstance(i, dict)]


def _lower(items: Any) -> list[str]:
    return [str(i).lower() for i in items or []]
