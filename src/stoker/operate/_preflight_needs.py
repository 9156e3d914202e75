"""What a deployment asks of Azure, read from the folder ``stoker provision`` wrote, and the
checks that need no Azure at all (the catalog's limits).

``main.json`` is the truth of what would be deployed (the record may be older than an edit):
each scale set's size, count, placement group, zones and image plan; each Lustre file system's
SKU, capacity and zone; whether the template creates role assignments. The record
(``stoker-deployment.json``) gives the region, group and subscription.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .._redact import printable
from .._user_files import load_user_json
from ..catalog import Catalog, vm_size_name
from ..errors import PreflightError

Status = Literal["ok", "warning", "failed", "unchecked"]
VMSS = "Microsoft.Compute/virtualMachineScaleSets"
AMLFS = "Microsoft.StorageCache/amlFilesystems"
AKS = "Microsoft.ContainerService/managedClusters"
STORAGE = "Microsoft.Storage/storageAccounts"
ROLE_ASSIGNMENT = "Microsoft.Authorization/roleAssignments"
TIB = float(1 << 40)
# AMLFS takes one zone; CCWS and ai-infrastructure-on-azure put it in zone 1 when the template
# names none (azure-infra.md section 6), so that is the zone a Lustre SKU is checked in.
AMLFS_DEFAULT_ZONE = "1"
# CCWS's CycleCloud VM image carries a marketplace plan, accepted once per subscription
# (azure-infra.md section 6: `az vm image terms accept --urn azurecyclecloud:...`).
CYCLECLOUD_PLAN = ("azurecyclecloud", "azure-cyclecloud", "cyclecloud8-gen2")


@dataclass
class PreflightCheck:
    """One line of the report: what was checked, what was found, what to do."""

    kind: str  # quota, sku, lustre-sku, rights, terms, validate, what-if, placement, ...
    status: Status
    line: str
    found: dict[str, Any] = field(default_factory=dict)  # the figures, for --json

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "status": self.status, "line": self.line, **self.found}


@dataclass(frozen=True)
class ScaleSet:
    """A scale set, or an AKS node pool (a scale set AKS makes)."""

    name: str
    vm_size: str  # as the catalog keys it (ND96isr_H100_v5)
    vms: int
    single_placement_group: bool
    zones: tuple[str, ...]
    vcpus_each: int | None  # the catalog's; None for a size it lacks (Azure's SKU list has it)


@dataclass(frozen=True)
class Lustre:
    name: str
    sku: str
    capacity_tib: float
    zones: tuple[str, ...]


@dataclass
class Needs:
    """What the deployment asks for."""

    folder: Path
    region: str
    group: str | None
    subscription: str | None
    deployment_name: str
    template: dict[str, Any]
    parameters: dict[str, Any]  # name -> {"value": ...}, as ARM takes them
    scale_sets: list[ScaleSet]
    lustres: list[Lustre]
    storage_skus: list[str]  # each storage account's SKU (Standard_LRS, Premium_ZRS)
    plans: list[tuple[str, str, str, str]]  # (publisher, offer, plan, what uses it)
    role_assignments: int
    missing_parameters: list[str]  # no value and no default: ARM's validate would refuse

    def vcpus(self, known: dict[str, int] | None = None) -> dict[str, int]:
        """vCPUs needed per VM size: the catalog's count per VM, else ``known``'s (size ->
        vCPUs, from Azure's SKU list); a size neither knows is left out."""
        out: dict[str, int] = {}
        for s in self.scale_sets:
            each = s.vcpus_each or (known or {}).get(s.vm_size)
            if each:
                out[s.vm_size] = out.get(s.vm_size, 0) + s.vms * each
        return out


def read_needs(folder: Path, cat: Catalog, parameters: dict[str, Any] | None = None) -> Needs:
    """The deployment in ``folder`` (a ``stoker provision --out`` folder); ``parameters``
    (name -> value) fill the template parameters the parameters file leaves empty."""
    label = printable(str(folder))
    if not (folder / "main.json").is_file() or not (folder / "stoker-deployment.json").is_file():
        raise PreflightError(
            f"{label}: not a folder `stoker provision --out` wrote (no main.json and "
            "stoker-deployment.json); give that folder or a job spec (.toml)"
        )
    record = _object(folder / "stoker-deployment.json", "deployment record")
    template = _object(folder / "main.json", "ARM template")
    params = _parameters(folder, template, parameters or {})
    resources = [r for r in template.get("resources") or [] if isinstance(r, dict)]
    region = str(record.get("region") or "")
    if not region:
        raise PreflightError(f"{label}/stoker-deployment.json: no region; provision it again")
    sets, lustres, plans, storage = [], [], [], []
    for r in resources:
        rtype = str(r.get("type", ""))
        if rtype.lower() == VMSS.lower():
            sets.append(_scale_set(r, cat, label))
            plan = r.get("plan")
            if isinstance(plan, dict) and plan.get("publisher"):
                plans.append(
                    (
                        str(plan["publisher"]),
                        str(plan.get("product", "")),
                        str(plan.get("name", "")),
                        f"scale set {r.get('name')}",
                    )
                )
        elif rtype.lower() == AKS.lower():
            sets += _node_pools(r, cat, label)
        elif rtype.lower() == STORAGE.lower() and (r.get("sku") or {}).get("name"):
            storage.append(str(r["sku"]["name"]))
        elif rtype.lower() == AMLFS.lower():
            lustres.append(_lustre(r, cat, label))
    if (folder / "ccws.parameters.json").is_file():
        plans.append((*CYCLECLOUD_PLAN, "the CycleCloud VM of ccws.parameters.json"))
    declared = template.get("parameters") or {}
    missing = [
        k
        for k, v in declared.items()
        if isinstance(v, dict) and "defaultValue" not in v and k not in params
    ]
    roles = sum(1 for r in resources if str(r.get("type", "")).lower() == ROLE_ASSIGNMENT.lower())
    return Needs(
        folder,
        region,
        _text(record.get("resource_group")),
        _text(record.get("subscription")),
        str(record.get("deployment_name") or "stoker"),
        template,
        params,
        sets,
        lustres,
        sorted(set(storage)),
        plans,
        roles,
        missing,
    )


def offline_checks(needs: Needs, cat: Catalog) -> list[PreflightCheck]:
    """What the catalog alone can say: vCPUs needed per family, placement-group sizes, Lustre
    capacities above the self-service maximum, parameters without a value."""
    checks = []
    counted = needs.vcpus()
    for size, vcpus in counted.items():
        vms = sum(s.vms for s in needs.scale_sets if s.vm_size == size)
        family = cat.vm[size].family
        checks.append(
            PreflightCheck(
                "vcpus",
                "ok",
                f"needs {vcpus:,} vCPUs of the {family} family in {needs.region} "
                f"({vms:,} x {size} of {cat.vm[size].vcpus} vCPUs)",
                {"vm_size": size, "family": family, "vms": vms, "vcpus": vcpus},
            )
        )
    for size in sorted({s.vm_size for s in needs.scale_sets} - set(counted)):
        vms = sum(s.vms for s in needs.scale_sets if s.vm_size == size)
        checks.append(
            PreflightCheck(
                "vcpus",
                "ok",
                f"needs {vms:,} x {size} (not in the catalog: its vCPUs come from Azure's SKU "
                "list when preflight asks Azure)",
                {"vm_size": size, "vms": vms},
            )
        )
    checks += _placement(needs, cat)
    for lu in needs.lustres:
        sku = cat.lustre[lu.sku]
        high = sku.max_size / TIB
        ceiling = (sku.max_size_on_request or cat.lustre_common.max_size_on_request) / TIB
        if lu.capacity_tib > ceiling:
            checks.append(
                PreflightCheck(
                    "lustre-size",
                    "failed",
                    f"Lustre {lu.name}: {lu.capacity_tib:g} TiB of {lu.sku} is above the "
                    f"{ceiling:g} TiB Azure grants even by request; split it or pick another SKU",
                    {"name": lu.name, "capacity_tib": lu.capacity_tib, "limit_tib": ceiling},
                )
            )
        elif lu.capacity_tib > high:
            checks.append(
                PreflightCheck(
                    "lustre-size",
                    "warning",
                    f"Lustre {lu.name}: {lu.capacity_tib:g} TiB of {lu.sku} is above its listed "
                    f"maximum of {high:g} TiB; deploy only once a support request is approved",
                    {"name": lu.name, "capacity_tib": lu.capacity_tib, "limit_tib": high},
                )
            )
    if needs.missing_parameters:
        names = ", ".join(needs.missing_parameters)
        checks.append(
            PreflightCheck(
                "parameters",
                "warning",
                f"template parameters without a value: {names}; give them at deploy (and to "
                "preflight: --parameter NAME=VALUE) or ARM's validation refuses the deployment",
                {"missing": needs.missing_parameters},
            )
        )
    return checks


def _placement(needs: Needs, cat: Catalog) -> list[PreflightCheck]:
    """One line per limit crossed, naming every scale set that crosses it."""
    usual, most = cat.fabric.scale_set_vms, cat.fabric.scale_set_vms_on_request
    single = [s for s in needs.scale_sets if s.single_placement_group]
    over = [s for s in single if s.vms > most]
    asked = [s for s in single if usual < s.vms <= most]
    checks = []
    if over:
        checks.append(PreflightCheck(
            "placement", "failed",
            f"{_sets(over)}: above the {most} VMs a placement group holds even by request; "
            "provision again with smaller scale sets",
            {"scale_sets": [s.name for s in over], "limit": most},
        ))  # fmt: skip
    if asked:
        checks.append(PreflightCheck(
            "placement", "warning",
            f"{_sets(asked)}: above Azure's default of {usual} VMs in one placement group; "
            f"deploy once a support request for {most} is approved",
            {"scale_sets": [s.name for s in asked], "limit": usual},
        ))  # fmt: skip
    return checks


def _sets(sets: list[ScaleSet]) -> str:
    most = max(s.vms for s in sets)
    names = ", ".join(s.name for s in sets[:3]) + (
        f" and {len(sets) - 3} more" if len(sets) > 3 else ""
    )
    return f"{len(sets)} scale set{'s' if len(sets) > 1 else ''} of up to {most} VMs ({names})"


def _object(path: Path, what: str) -> dict[str, Any]:
    data = load_user_json(path, what, PreflightError, max_bytes=64 << 20)
    if not isinstance(data, dict):
        raise PreflightError(f"{printable(str(path))}: expected a JSON object")
    return data


def _parameters(folder: Path, template: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    pfile = folder / "main.parameters.json"
    if pfile.is_file():
        for k, v in (_object(pfile, "parameters file").get("parameters") or {}).items():
            if isinstance(v, dict) and "value" in v:
                params[k] = {"value": v["value"]}
    declared = template.get("parameters") or {}
    for k, v in given.items():
        if k not in declared:
            known = ", ".join(declared) or "none"
            raise PreflightError(f"--parameter {k}: the template has no such parameter ({known})")
        params[k] = {"value": _typed(k, v, declared[k])}
    return params


def _typed(name: str, value: Any, declared: Any) -> Any:
    """A ``--parameter`` string as the template's declared type (bool, int, object, array):
    ARM refuses "false" for a bool."""
    kind = str((declared or {}).get("type", "string")).lower() if isinstance(declared, dict) else ""
    if not isinstance(value, str) or kind in ("string", "securestring", ""):
        return value
    try:
        if kind == "bool" and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if kind == "int":
            return int(value)
        if kind in ("object", "array", "secureobject"):
            return json.loads(value)
    except ValueError:
        pass
    raise PreflightError(f"--parameter {name}: the template wants a {kind}, not {printable(value)}")


def _scale_set(r: dict[str, Any], cat: Catalog, label: str) -> ScaleSet:
    name = str(r.get("name", "?"))
    sku = r.get("sku") or {}
    props = r.get("properties") or {}
    return _compute(label, name, sku.get("name"), sku.get("capacity"),
                    bool(props.get("singlePlacementGroup")), r.get("zones"), cat)  # fmt: skip


def _node_pools(r: dict[str, Any], cat: Catalog, label: str) -> list[ScaleSet]:
    """An AKS cluster's node pools (``agentPoolProfiles``), each a scale set of its own."""
    cluster = str(r.get("name", "?"))
    pools = (r.get("properties") or {}).get("agentPoolProfiles") or []
    return [
        _compute(
            label,
            f"{cluster}/{p.get('name', '?')}",
            p.get("vmSize"),
            p.get("count"),
            False,
            p.get("availabilityZones"),
            cat,
        )  # fmt: skip
        for p in pools
        if isinstance(p, dict)
    ]


def _compute(label: str, name: str, sku: Any, vms: Any, single: bool, zones: Any,
             cat: Catalog) -> ScaleSet:  # fmt: skip
    if not isinstance(sku, str) or not sku or not isinstance(vms, int) or isinstance(vms, bool):
        raise PreflightError(
            f"{label}/main.json: {printable(name)}: VM size {printable(str(sku))} and count "
            f"{printable(str(vms))} are not a size and a whole number; provision it again"
        )
    size = vm_size_name(sku)
    each = cat.vm[size].vcpus if size in cat.vm else None
    return ScaleSet(name, size, vms, single, tuple(str(z) for z in zones or ()), each)


def _lustre(r: dict[str, Any], cat: Catalog, label: str) -> Lustre:
    name = str(r.get("name", "?"))
    sku = str((r.get("sku") or {}).get("name", ""))
    cap = (r.get("properties") or {}).get("storageCapacityTiB")
    if sku not in cat.lustre or not isinstance(cap, int | float) or isinstance(cap, bool):
        raise PreflightError(
            f"{label}/main.json: Lustre {printable(name)}: sku {printable(sku)} or its "
            "storageCapacityTiB is not one the catalog knows; provision it again"
        )
    zones = tuple(str(z) for z in r.get("zones") or ()) or (AMLFS_DEFAULT_ZONE,)
    return Lustre(name, sku, float(cap), zones)


def _text(value: Any) -> str | None:
    return str(value) if value else None


def parameter_pairs(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``NAME=VALUE`` strings (``--parameter``) as a dict; a malformed one is one line."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise PreflightError(f"--parameter {printable(item)}: give NAME=VALUE")
        out[name.strip()] = value
    return out
