"""The GPU-to-GPU interconnect's recommendation: the fabric, the exchange in numbers, and what to
change, including the layouts of a job larger than one InfiniBand fabric."""

from __future__ import annotations

from ..catalog import Catalog, VmSize
from ..units import format_bytes as fb
from ..units import format_rate as fr
from ._format import duration as fd
from ._format import gpus
from ._format import pct as _pct
from .fabric import SOCKETS, ethernet_pace
from .facts import FabricLayout, Network
from .result import FabricOption, InterconnectPlan, Plan, Recommendation


def interconnect_advice(plan: Plan, vm: VmSize, cat: Catalog) -> Recommendation:
    ic = plan.interconnect
    assert ic is not None
    step = plan.step.total_s if plan.step else 0.0
    exchange = (
        f"{fb(ic.gradient_bytes, binary=False)} of gradients per step by {ic.algorithm}: "
        f"{fd(ic.comm_s)}, {fd(ic.exposed_s)} exposed after overlap; predicted busbw "
        f"{fr(ic.busbw_bps)}"
        if ic.busbw_bps > 0
        else "no gradient exchange between data-parallel ranks"
    )
    reason = (
        f"{exchange} (one VM: {fr(ic.single_vm_busbw_bps)}"
        + (
            f", published {fr(ic.single_vm_busbw_published_bps)}"
            if ic.single_vm_busbw_published_bps
            else ""
        )
        + (
            f", measured {fr(ic.single_vm_busbw_measured_bps)}"
            if ic.single_vm_busbw_measured_bps
            else ""
        )
        + ")"
    )
    rec = Recommendation(
        "GPU-to-GPU interconnect",
        ic.fabric if ic.needs_infiniband else f"{ic.scaleup} {_within(plan)}; no InfiniBand needed",
        f"{plan.nodes} VM(s), {gpus(plan.gpus)}",
        reason,
    )
    if ic.needs_infiniband and not vm.has_infiniband:
        rec.warnings.append(
            f"multi-node job on a size without InfiniBand ({plan.vm_size}): gradients cross "
            f"the frontend Ethernet as NCCL over TCP sockets, {ethernet_pace(vm)}"
        )
    # Past one scale set (declared shapes included): the shapes the job could take. Without
    # InfiniBand the warning above says all.
    if (ic.vms_outside_fabric or ic.fabric_options) and vm.has_infiniband:
        rec.warnings.append(_past_the_fabric(plan, ic))
    if ic.sharp_requested and not ic.sharp:
        rec.warnings.append(
            "cluster.sharp is set, but the gradient exchange does not run on InfiniBand, so "
            "SHARP is not modelled"
        )
    if ic.needs_infiniband:
        rec.choice += (
            f"; all {plan.nodes} VMs in one scale set (singlePlacementGroup)"
            if ic.fabric_layout is FabricLayout.ONE_FABRIC
            else ""
        )
    mp = ic.model_parallel
    if step and mp and mp.modelled and mp.exposed_s > 0.1 * step:
        parts = {
            "the pipeline bubble (more micro-batches per step shrink it)": mp.pp_bubble_s,
            "expert-parallel all-to-alls (keep ep x tp inside the NVLink domain, overlap them)": (
                mp.ep_s * (1 - mp.overlap)
            ),
            "tensor-parallel all-reduces (keep tp inside the NVLink domain)": mp.tp_s,
            "pipeline sends": mp.pp_s * (1 - mp.overlap),
        }
        worst = max(parts, key=parts.__getitem__)
        rec.warnings.append(
            f"tensor-, pipeline- and expert-parallel traffic exposes {fd(mp.exposed_s)} a step "
            f"({_pct(mp.exposed_s / step)} of it), most of it {worst}: {fd(parts[worst])}"
        )
    if step and ic.exposed_s > 0.1 * step:
        rec.warnings.append(
            f"exposed communication is {_pct(ic.exposed_s / step)} of the step: "
            "overlap more (bucketed DDP/FSDP prefetch), shard with tensor "
            "parallelism inside the VM"
            + ("" if ic.sharp or not _on_infiniband(ic) else ", or try SHARP")
        )
    return rec


def _past_the_fabric(plan: Plan, ic: InterconnectPlan) -> str:
    """A job larger than one scale set: the shape planned, then every shape it could take."""
    head = (
        f"{plan.nodes} VMs exceed one scale set ({ic.fabric_boundary_vms} VMs, one InfiniBand "
        "partition): InfiniBand does not cross scale sets and NCCL does not fall back to "
        "Ethernet per peer, so one job cannot span them on InfiniBand"
        if ic.fabric_layout is not FabricLayout.MICROSOFT_ARRANGED
        else f"{plan.nodes} VMs planned as one fabric arranged with Microsoft (cluster.fabric)"
    )
    if not ic.fabric_options:  # a size without InfiniBand: nothing to lay out
        return head
    planned = _PLANNED.get(ic.fabric_layout, "")
    return (
        head
        + (f"; planned {planned}" if planned else "")
        + "; shapes: "
        + "; ".join(_shape(o) for o in ic.fabric_options)
    )


_PLANNED = {
    FabricLayout.FLAT_ETHERNET: (
        f"with InfiniBand off ({SOCKETS}; the one shape that runs across scale sets "
        "undeclared; `stoker provision` refuses it)"
    ),
    FabricLayout.INDEPENDENT_JOBS: "as independent jobs, one per scale set (cluster.fabric)",
    FabricLayout.INDEPENDENT_REPLICAS: (
        "as data-parallel replicas, one per scale set, none talking across (cluster.fabric)"
    ),
}


def _shape(o: FabricOption) -> str:
    mp = f", {fd(o.model_parallel_s)} of it model-parallel" if o.model_parallel_s else ""
    state = "" if o.available else " [needs a declaration]"
    return (
        f"{o.layout.value}{state}: step {fd(o.step_s)} ({fd(o.exposed_s or 0)} exposed gradient "
        f"exchange{mp}); {o.note}"
    )


def _within(plan: Plan) -> str:
    """A multi-VM NVLink domain (GB200 NVL72) spans VMs; elsewhere no IB means one VM."""
    return "inside the VM" if plan.nodes == 1 else f"across the {plan.nodes} VMs' NVLink domain"


def _on_infiniband(ic: InterconnectPlan) -> bool:
    return any(level["network"] == Network.INFINIBAND for level in ic.levels)
