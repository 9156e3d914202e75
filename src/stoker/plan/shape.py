"""The job's size and parallel layout, resolved once from the spec and the catalog."""

from __future__ import annotations

import dataclasses
import difflib
import math

from ..catalog import Catalog, VmSize, vm_size_name
from ..errors import SpecError
from .spec import JobSpec


@dataclasses.dataclass(frozen=True)
class Shape:
    """The job's size and parallel layout, resolved from the spec."""

    vm: VmSize
    nodes: int
    gpus: int
    dp: int
    boundary_vms: int
    gpus_used: int  # dp x tp x pp: the GPUs the layout runs on; the VMs' others sit idle


def canonical(spec: JobSpec, cat: Catalog) -> JobSpec:
    """The spec with ``cluster.vm_size`` as the catalog keys it (``Standard_`` and case aside),
    so every later lookup finds it; SpecError naming the field when the catalog lacks it."""
    key = cat.vm_key(spec.cluster.vm_size)
    if key is None:
        raise SpecError(f"cluster.vm_size: {unknown_vm_size(spec.cluster.vm_size, cat)}")
    # A Lustre SKU in any case, as the VM size: "amlfs-durable-premium-125" is the catalog's.
    sku = spec.data.lustre_sku
    sku_key = next((k for k in cat.lustre if k.lower() == sku.strip().lower()), sku)
    if key == spec.cluster.vm_size and sku_key == sku:
        return spec
    return spec.model_copy(
        update={
            "cluster": spec.cluster.model_copy(update={"vm_size": key}),
            "data": spec.data.model_copy(update={"lustre_sku": sku_key}),
        }
    )


def unknown_vm_size(name: str, cat: Catalog) -> str:
    """Why ``name`` is not a catalog size, the closest sizes first (a typo is the usual cause)."""
    if not name.strip():
        return "empty; give a VM size such as ND96isr_H100_v5 (`stoker catalog prices` lists them)"
    bare = vm_size_name(name.strip().replace(" ", "_").replace("-", "_")).lower()
    by_lower = {key.lower(): key for key in cat.vm}
    starts = [key for low, key in sorted(by_lower.items()) if low.startswith(bare)]
    close = starts[:3] or [
        by_lower[k] for k in difflib.get_close_matches(bare, by_lower, n=3, cutoff=0.6)
    ]
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return (
        f"unknown VM size {name!r}; {hint}known (with or without Standard_): "
        f"{', '.join(sorted(cat.vm))}"
    )


def scale_set_vms(spec: JobSpec, cat: Catalog) -> int:
    """VMs one scale set (one InfiniBand partition) holds: the declared placement-group limit,
    else ``fabric_boundary_vms``, else the placement's catalog figure."""
    c = spec.cluster
    return (
        c.placement_group_limit
        or c.fabric_boundary_vms
        or {
            "scale_set": cat.fabric.scale_set_vms,
            "scale_set_on_request": cat.fabric.scale_set_vms_on_request,
            "availability_set": cat.fabric.availability_set_vms,
        }[c.placement]
    )


def shape(spec: JobSpec, cat: Catalog) -> Shape:
    spec = canonical(spec, cat)
    c, w = spec.cluster, spec.workload
    vm = cat.vm[c.vm_size]
    nodes = c.nodes or math.ceil((c.gpus or 0) / vm.gpus)
    gpus = c.gpus or nodes * vm.gpus
    if c.nodes and c.gpus and nodes > math.ceil(gpus / vm.gpus):
        raise SpecError(
            f"cluster: {gpus} GPUs fit on {math.ceil(gpus / vm.gpus)} x {c.vm_size}, "
            f"but nodes = {nodes} pays for more VMs; give nodes or gpus alone"
        )
    if gpus > nodes * vm.gpus:
        raise SpecError(
            f"cluster: {gpus} GPUs do not fit on {nodes} x {c.vm_size} "
            f"({vm.gpus} GPUs each); raise nodes or lower gpus"
        )
    dp = w.dp or max(1, gpus // (w.tp * w.pp))
    if dp * w.tp * w.pp > gpus:
        raise SpecError(
            f"workload: dp x tp x pp = {dp} x {w.tp} x {w.pp} = {dp * w.tp * w.pp} "
            f"exceeds the job's {gpus} GPUs"
        )
    if w.ep > dp:
        raise SpecError(
            f"workload.ep: tp x pp x ep = {w.tp} x {w.pp} x {w.ep} = {w.tp * w.pp * w.ep} "
            f"exceeds the job's {gpus} GPUs (the experts are spread over the dp = {dp} "
            "data-parallel ranks); lower ep to a divisor of dp"
        )
    if w.ep > 1 and dp % w.ep:
        raise SpecError(
            f"workload.ep: {w.ep} expert-parallel ranks must divide dp = {dp} (experts are "
            "spread over the data-parallel ranks)"
        )
    # A fabric arranged with Microsoft holds the whole job; else one scale set is the fabric.
    boundary = nodes if c.fabric == "microsoft-arranged" else scale_set_vms(spec, cat)
    return Shape(vm, nodes, gpus, dp, boundary, dp * w.tp * w.pp)
