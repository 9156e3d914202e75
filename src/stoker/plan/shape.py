"""The job's size and parallel layout, resolved once from the spec and the catalog."""

from __future__ import annotations

import dataclasses
import math

from ..catalog import Catalog, VmSize
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
        known = ", ".join(sorted(cat.vm))
        raise SpecError(
            f"cluster.vm_size: unknown VM size {spec.cluster.vm_size!r}; known (with or "
            f"without Standard_): {known}"
        )
    if key == spec.cluster.vm_size:
        return spec
    return spec.model_copy(update={"cluster": spec.cluster.model_copy(update={"vm_size": key})})


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
    if w.ep > 1 and dp % w.ep:
        raise SpecError(
            f"workload.ep: {w.ep} expert-parallel ranks must divide dp = {dp} (experts are "
            "spread over the data-parallel ranks)"
        )
    boundary = (
        c.fabric_boundary_vms
        or {
            "scale_set": cat.fabric.scale_set_vms,
            "scale_set_on_request": cat.fabric.scale_set_vms_on_request,
            "availability_set": cat.fabric.availability_set_vms,
        }[c.placement]
    )
    return Shape(vm, nodes, gpus, dp, boundary, dp * w.tp * w.pp)
