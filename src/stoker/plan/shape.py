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


def shape(spec: JobSpec, cat: Catalog) -> Shape:
    c, w = spec.cluster, spec.workload
    if c.vm_size not in cat.vm:
        known = ", ".join(sorted(cat.vm))
        raise SpecError(f"cluster.vm_size: unknown VM size {c.vm_size!r}; known: {known}")
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
    boundary = (
        c.fabric_boundary_vms
        or {
            "scale_set": cat.fabric.scale_set_vms,
            "scale_set_on_request": cat.fabric.scale_set_vms_on_request,
            "availability_set": cat.fabric.availability_set_vms,
        }[c.placement]
    )
    return Shape(vm, nodes, gpus, dp, boundary, dp * w.tp * w.pp)
