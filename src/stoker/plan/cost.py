"""What the run costs: GPU VM hours, each storage tier for its lifetime, and idle GPU dollars.

A price the catalog lacks stays unknown (``None``); the total is then ``None`` and the known part
is reported beside the list of what is missing, so nobody reads a partial sum as the bill.
"""

from __future__ import annotations

from ..catalog import Catalog
from ..units import format_bytes
from .result import CheckpointPlan, CostItem, CostPlan, DataPlan, InferencePlan, RunPlan
from .shape import Shape
from .spec import JobSpec

HOURS_PER_MONTH = 730.0
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
    )
