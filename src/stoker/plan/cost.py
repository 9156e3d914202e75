"""What the run costs: GPU VM hours, each storage tier for its lifetime, and idle GPU dollars.

A price the catalog lacks stays unknown (``None``); the total is then ``None`` and the known part
is reported beside the list of what is missing, so nobody reads a partial sum as the bill.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..catalog import HOURS_PER_MONTH, Catalog
from ..units import format_bytes
from .result import (
    CheckpointPlan,
    CostItem,
    CostPlan,
    DataPlan,
    InferencePlan,
    RunPlan,
    TierChoice,
)
from .shape import Shape
from .spec import JobSpec

# Inference has no natural end: price one month of serving unless the spec says otherwise.
INFERENCE_DEFAULT_S = HOURS_PER_MONTH * 3600


def _times(price: float | None, hours: float) -> float | None:
    return None if price is None else price * hours


def vm_price(spec: JobSpec, cat: Catalog, s: Shape) -> tuple[float | None, str]:
    if spec.cluster.price_per_hour is not None:
        return spec.cluster.price_per_hour, "set in the job spec"
    vm = cat.vm[spec.cluster.vm_size]
    if vm.price_per_hour is None:
        return None, (
            f"no public price for {spec.cluster.vm_size} in the catalog: set "
            "cluster.price_per_hour or run `stoker catalog prices --refresh`"
        )
    key = vm.source_of("price_per_hour")
    source = cat.sources[key]
    # Only the Retail Prices API (built in, or refreshed) lists pay-as-you-go prices; any other
    # source, a user's negotiated rate in an override file say, is named as it is.
    kind = "pay-as-you-go" if key.startswith("retail-api") else source.title
    note = f"{vm.price_region + ' ' if vm.price_region else ''}{kind}, {source.date.isoformat()}"
    if not source.verified:
        note += ", recorded by a third party, not verified"
    if vm.price_region and vm.price_region != spec.cluster.region:
        note += f"; priced in {vm.price_region}, not {spec.cluster.region}"
    return vm.price_per_hour, note


def _network_item(cat: Catalog, hours: float) -> CostItem:
    """The NAT gateway and its public IP, up for the whole deployment (stoker provision makes
    them for the nodes' outbound traffic); data processed is not counted."""
    meters = [cat.meter.get("nat_gateway"), cat.meter.get("public_ip")]
    prices = [m.per_hour if m else None for m in meters]
    if None in prices:
        return CostItem("Network: NAT gateway and its public IP", hours, None, "no public price")
    keys = sorted({m.source_of("price") for m in meters if m})
    note = "meter.nat_gateway + meter.public_ip from " + ", ".join(keys)
    return CostItem(
        "Network: NAT gateway and its public IP",
        hours,
        sum(prices) * hours,
        note,  # type: ignore[arg-type]
    )


def cost_plan(
    spec: JobSpec,
    cat: Catalog,
    s: Shape,
    data: DataPlan | None,
    ckpt: CheckpointPlan | None,
    run: RunPlan | None,
    inference: InferencePlan | None,
) -> CostPlan:
    wall_s = run.wall_s if run else (spec.run.length or INFERENCE_DEFAULT_S)
    staging_s = data.chosen.staging_s if data else 0.0
    on_vms = staging_s if data and data.chosen.staging_on_gpu_vms else 0.0
    vm_hours = s.nodes * (wall_s + on_vms) / 3600
    price, note = vm_price(spec, cat, s)
    items = [
        CostItem(
            f"GPU VMs: {s.nodes} x {spec.cluster.vm_size}", vm_hours, _times(price, vm_hours), note
        )
    ]
    weekend = None
    if data and data.chosen.tier in ("lustre", "netapp", "files"):
        hours = (wall_s + staging_s) / 3600
        tier_price = data.chosen.price_per_hour_usd
        items.append(
            CostItem(
                f"{data.chosen.name} for the run and its staging",
                hours,
                _times(tier_price, hours),
                "" if tier_price is not None else "no public price in the catalog",
            )
        )
        weekend = _times(tier_price, spec.run.idle_storage / 3600)
    if ckpt and ckpt.volume:
        hours = wall_s / 3600
        lp = ckpt.volume.price_per_hour_usd
        items.append(
            CostItem(
                f"{ckpt.volume.name} for checkpoints",
                hours,
                _times(lp, hours),
                "" if lp is not None else "no public price in the catalog",
            )
        )
    items.append(_network_item(cat, (wall_s + staging_s) / 3600))
    blob = cat.blob[spec.data.blob_tier]
    months = wall_s / 3600 / HOURS_PER_MONTH
    stored = (data.dataset_bytes if data else 0.0) + (
        ckpt.size_bytes * spec.checkpoints.keep if ckpt else 0.0
    )
    stored += inference.model_bytes if inference else 0.0
    held = [
        name
        for name, there in (("data", data), ("checkpoints", ckpt), ("the model", inference))
        if there
    ]
    items.append(
        CostItem(
            f"Blob ({spec.data.blob_tier}, hot) for {' and '.join(held)}",
            wall_s / 3600,
            _times(blob.price_hot_gb_month, stored / 1e9 * months),
            format_bytes(stored, binary=False)
            + ("" if blob.price_hot_gb_month else "; no public price"),
        )
    )
    idle = None
    if price is not None and run is not None:  # serving has no step split to judge idleness
        # GPUs the layout leaves unused are idle all the time, and paid for all the same.
        useful = run.effective_training_fraction * s.gpus_used / (s.nodes * s.vm.gpus)
        idle = price * (s.nodes * wall_s / 3600 * (1 - useful) + s.nodes * on_vms / 3600)
    unknown = [i.item for i in items if i.usd is None]
    known = sum(i.usd for i in items if i.usd is not None)
    # Blob at steady state: checkpoints with their previous versions until the lifecycle rule
    # and soft delete remove them (the run's Blob line above prices the kept ones only).
    steady = (data.dataset_bytes if data else 0.0) + (inference.model_bytes if inference else 0.0)
    if ckpt:
        steady_ckpt = checkpoint_steady_bytes(ckpt, wall_s, spec.checkpoints.version_days)
        steady += steady_ckpt
        items[-1].note += (
            f"; checkpoints at steady state, previous versions included: "
            f"{format_bytes(steady_ckpt, binary=False)}"
        )
    meters = idle_bill(spec, cat, s.nodes, data, ckpt, steady)
    buy = _purchase(spec, cat, s, wall_s + on_vms, ckpt, inference, price)
    return CostPlan(
        cat.catalog.currency,
        spec.run.idle_storage / 3600,
        vm_hours,
        price,
        note,
        items,
        idle,
        weekend,
        None if unknown else known,
        known,
        unknown,
        [CostItem(m.item, 1.0, m.per_hour_usd, m.source) for m in meters.meters],
        meters.per_hour_usd,
        meters.after_teardown_per_hour_usd,
        *buy,
    )


def _purchase(
    spec: JobSpec,
    cat: Catalog,
    s: Shape,
    wall_s: float,
    ckpt: CheckpointPlan | None,
    inference: InferencePlan | None,
    price: float | None,
) -> tuple[list[CostItem], str | None, str, str, float | None]:
    """The purchase options as cost rows, the cheapest, why, and the right-size advice."""
    from .purchase import purchase_options, right_size

    evictions = spec.cluster.spot_evictions_per_day
    got = purchase_options(s.vm, spec.cluster.vm_size, s.nodes, wall_s, ckpt, evictions, price)
    hours = s.nodes * wall_s / 3600
    rows = [CostItem(o.name, hours, o.usd, o.note) for o in got.options]
    if inference is not None:
        # each VM serves its replicas alone: the weights of those replicas, on its GPUs
        need = inference.model_bytes * inference.replicas_per_vm
        fit = right_size(cat, spec.cluster.vm_size, s.nodes, max(1, s.gpus_used // s.nodes),
                         need, wall_s, uses_fabric=False)  # fmt: skip
    else:
        need = ckpt.size_bytes if ckpt else 0.0  # weights and optimizer state, a floor
        fit = right_size(cat, spec.cluster.vm_size, s.nodes, s.gpus_used, need, wall_s,
                         uses_fabric=s.nodes > 1)  # fmt: skip
    advice, saving = ("", None) if fit is None else (fit.why, fit.saving_usd)
    return rows, got.cheapest, got.why, advice, saving


# ---------------------------------------------------------------------------------- idle bill
# What keeps billing while the GPUs do not: every line one catalog price times a count, named
# by the catalog figure it comes from, so a README, teardown or guard line can be traced.

# The blob service's delete retention stoker provisions (provision/_res_storage.SOFT_DELETE_DAYS;
# a test holds the two equal): a deleted checkpoint, or a version the lifecycle rule deletes,
# stays billed this long after.
BLOB_SOFT_DELETE_DAYS = 14
DEFAULT_VERSION_DAYS = 7  # checkpoints.version_days: the lifecycle rule's age for old versions


@dataclass(frozen=True)
class Meter:
    item: str
    per_hour_usd: float | None  # None: the catalog has no price for it
    source: str  # "meter.os_disk.price from retail-api-2026-12-01": the figure and its source
    after_teardown: bool  # still billed once teardown ran (disks, kept storage, network)


@dataclass(frozen=True)
class IdleBill:
    """What an idle hour costs with the GPU VMs deallocated, and what teardown leaves billed."""

    meters: tuple[Meter, ...]
    fast_tier_weekend_usd: float | None  # the fast tier (Lustre, NetApp, Files) over idle_storage
    idle_hours: float  # run.idle_storage in hours (a weekend)

    @property
    def unknown(self) -> list[str]:
        return [m.item for m in self.meters if m.per_hour_usd is None]

    @property
    def known_per_hour_usd(self) -> float:
        return sum(m.per_hour_usd or 0.0 for m in self.meters)

    @property
    def per_hour_usd(self) -> float | None:
        """None while any meter is unknown: a partial sum is not the bill."""
        return None if self.unknown else self.known_per_hour_usd

    @property
    def after_teardown_per_hour_usd(self) -> float | None:
        kept = [m for m in self.meters if m.after_teardown]
        if any(m.per_hour_usd is None for m in kept):
            return None
        return sum(m.per_hour_usd or 0.0 for m in kept)


def cited(cat: Catalog, where: str, entry: object, field: str) -> str:
    """``where.field from <source key> (<date>)``: the line's trace back into the catalog."""
    key = entry.source_of(field)  # type: ignore[attr-defined]
    return f"{where}.{field} from {key} ({cat.sources[key].date.isoformat()})"


def checkpoint_steady_bytes(ckpt: CheckpointPlan, wall_s: float, version_days: int) -> float:
    """Blob bytes the checkpoints hold once saving is steady: the ``keep`` newest, plus each
    deleted one kept as a previous version until the lifecycle rule deletes it, then
    soft-deleted until the delete retention ends (never more than the run saves)."""
    saves = wall_s / ckpt.interval_s if ckpt.interval_s > 0 else 0.0
    held_s = (version_days + BLOB_SOFT_DELETE_DAYS) * 86400.0
    versions = min(held_s / ckpt.interval_s if ckpt.interval_s > 0 else 0.0, saves)
    return ckpt.size_bytes * (ckpt.keep + max(0.0, versions))


def _tier_meter(cat: Catalog, choice: TierChoice, role: str) -> Meter:
    # Teardown deletes Managed Lustre (after its archive) and leaves NetApp and Files be.
    section = {"lustre": "lustre", "netapp": "netapp", "files": "files"}[choice.tier]
    entry = getattr(cat, section).get(choice.sku or "")
    field = {"lustre": "price_per_tib_hour", "netapp": "price_per_tib_month"}.get(
        choice.tier, "price_per_gib_month"
    )
    source = (
        cited(cat, f"{section}.{choice.sku}", entry, field)
        if entry is not None and getattr(entry, field, None) is not None
        else f"{section}.{choice.sku}.{field}: no public price"
    )
    return Meter(
        f"{choice.name} ({role})", choice.price_per_hour_usd, source, choice.tier != "lustre"
    )


def idle_bill(
    spec: JobSpec,
    cat: Catalog,
    nodes: int,
    data: DataPlan | None,
    ckpt: CheckpointPlan | None,
    stored_bytes: float,
) -> IdleBill:
    """The meters that bill while ``nodes`` GPU VMs sit deallocated: their OS disks, the NAT
    gateway and its public IP, the fast tiers, and Blob holding ``stored_bytes``."""
    meters = []
    disk = cat.meter.get("os_disk")
    per_disk = disk.per_hour if disk else None
    meters.append(
        Meter(
            f"OS disks of {nodes} deallocated VMs",
            None if per_disk is None else per_disk * nodes,
            cited(cat, "meter.os_disk", disk, "price") if per_disk is not None and disk
            else "meter.os_disk.price: no public price",
            True,
        )
    )  # fmt: skip
    for key, what in (("nat_gateway", "NAT gateway"), ("public_ip", "public IP")):
        m = cat.meter.get(key)
        price = m.per_hour if m else None
        source = cited(cat, f"meter.{key}", m, "price") if m and price is not None else (
            f"meter.{key}.price: no public price"
        )  # fmt: skip
        meters.append(Meter(what, price, source, True))
    if data and data.chosen.tier in ("lustre", "netapp", "files"):
        meters.append(_tier_meter(cat, data.chosen, "data"))
    if ckpt and ckpt.volume:
        meters.append(_tier_meter(cat, ckpt.volume, "checkpoints"))
    blob = cat.blob[spec.data.blob_tier]
    gb_month = blob.price_hot_gb_month
    meters.append(
        Meter(
            f"Blob ({spec.data.blob_tier}, hot), {format_bytes(stored_bytes, binary=False)}",
            None if gb_month is None else gb_month * stored_bytes / 1e9 / HOURS_PER_MONTH,
            cited(cat, f"blob.{spec.data.blob_tier}", blob, "price_hot_gb_month")
            if gb_month is not None
            else f"blob.{spec.data.blob_tier}.price_hot_gb_month: no public price",
            True,
        )
    )
    fast = [m for m in meters if m.item.endswith(("(data)", "(checkpoints)"))]
    hours = spec.run.idle_storage / 3600
    weekend = None
    if fast and all(m.per_hour_usd is not None for m in fast):
        weekend = sum(m.per_hour_usd or 0.0 for m in fast) * hours
    return IdleBill(tuple(meters), weekend, hours)


def plan_idle_bill(spec: JobSpec, cat: Catalog, plan: Any) -> IdleBill:
    """``idle_bill`` for a computed plan: its VMs, tiers, and Blob bytes (checkpoints at their
    steady state, previous versions included)."""
    wall_s = plan.run.wall_s if plan.run else (spec.run.length or INFERENCE_DEFAULT_S)
    days = getattr(spec.checkpoints, "version_days", DEFAULT_VERSION_DAYS)
    stored = plan.data.dataset_bytes if plan.data else 0.0
    if plan.checkpoints:
        stored += checkpoint_steady_bytes(plan.checkpoints, wall_s, days)
    stored += plan.inference.model_bytes if plan.inference else 0.0
    return idle_bill(spec, cat, plan.nodes, plan.data, plan.checkpoints, stored)
