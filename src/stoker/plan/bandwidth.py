"""The bandwidth a job really uses, and the same job with InfiniBand off. Pure functions.

Practitioners ask what a training job moves over the fabric, not the fabric's peak, and whether
one 400 Gb/s link per eight GPUs would do. Per step, the data-parallel exchange sends
``bytes_per_vm`` over each VM's inter-VM links, and those links are busy for ``busy_s`` of the
step (the exchange's time on the network level, plan/interconnect.py). So:

    average use = bytes_per_vm / step / capacity        peak use = bytes_per_vm / busy / capacity

and a what-if table prices the job with 8, 4, 2 and 1 InfiniBand links per VM, SHARP on and
off: every row's exchange comes from the main plan's own function (``fabric.exchange``) on a VM
with that many links, so the row with the plan's links and SHARP has the plan's step. A row's
cost is the plan's with the VM hours scaled by its step (the price of a VM does not change with
the links it uses; the table says whether the interconnect decides the step).

The Ethernet comparison runs the same function on the VM with InfiniBand off (NCCL over TCP
sockets at the catalog's measured rate, plan/interconnect.py): the ratio of the two steps is the
InfiniBand-to-Ethernet throughput ratio, held to a published one in tests/test_plan_ethernet.py.
Model-parallel traffic is in each step; the bytes count the data-parallel exchange only.
"""

from __future__ import annotations

import dataclasses

from ..catalog import Catalog, VmSize
from .fabric import RunShape, collective, exchange, run_shape
from .facts import FabricLayout, Network
from .interconnect import without_infiniband
from .result import BandwidthPlan, CostPlan, EthernetPlan, LinkOption
from .shape import Shape
from .spec import JobSpec

LINKS = (8, 4, 2, 1)  # InfiniBand links per VM in the what-if (a size's own count at most)


def ethernet_plan(
    spec: JobSpec, cat: Catalog, s: Shape, compute_s: float, stall_s: float
) -> EthernetPlan | None:
    """The job with InfiniBand off against the same job on InfiniBand (the plan's own step, or
    for a plan that already runs InfiniBand off past one scale set, the job on one fabric);
    None when the size has no InfiniBand or no traffic leaves a VM."""
    run = run_shape(spec, cat, s)
    if not run.shape.vm.has_infiniband:
        return None
    on = run.shape
    if run.layout is FabricLayout.FLAT_ETHERNET:
        on = dataclasses.replace(on, boundary_vms=on.nodes)
    vm = without_infiniband(on.vm)
    ex = exchange(run.spec, cat, dataclasses.replace(on, vm=vm), compute_s)
    if ex.estimate.network_s <= 0 and ex.model_parallel.exposed_s <= 0:
        return None  # the job fits one VM's NVLink: no traffic leaves it
    off = ex.step_s + stall_s
    step = exchange(run.spec, cat, on, compute_s).step_s + stall_s
    measured = vm.ethernet_busbw is not None
    return EthernetPlan(
        busbw_bps=vm.ethernet_rate,
        measured=measured,
        source=vm.source_of("ethernet_busbw" if measured else "frontend_nic"),
        step_s=off,
        infiniband_step_s=step,
        ratio=off / step if step else 0.0,
    )


def bandwidth_plan(
    spec: JobSpec,
    cat: Catalog,
    s: Shape,
    compute_s: float,
    stall_s: float,
    cost: CostPlan | None = None,
) -> BandwidthPlan | None:
    """Bytes, busy time and use of the inter-VM links per step, and the links what-if; None
    when no gradient exchange leaves a VM."""
    run = run_shape(spec, cat, s)
    ex = exchange(run.spec, cat, run.shape, compute_s)
    est = ex.estimate
    if est.network_s <= 0:
        return None
    vm = run.shape.vm
    times, _ = collective(spec)
    infiniband = ex.levels[-1].network is Network.INFINIBAND
    capacity = vm.ib_per_vm if infiniband else vm.ethernet_rate
    sent = est.network_bytes_per_gpu * vm.gpus * times
    busy = est.network_s * times
    step = ex.step_s + stall_s
    options = _link_options(spec, cat, run, compute_s, stall_s, step, cost) if infiniband else []
    return BandwidthPlan(
        network="InfiniBand" if infiniband else "Ethernet",
        bytes_per_vm=sent,
        busy_s=busy,
        step_s=step,
        capacity_bps=capacity,
        average_bps=sent / step,
        peak_bps=sent / busy,
        average_use=sent / step / capacity,
        peak_use=sent / busy / capacity,
        busbw_measured_bps=vm.ib_busbw_measured,
        options=options,
        note=(
            "data-parallel exchange only (model-parallel traffic is in the steps, not the bytes); "
            "a what-if row keeps the VM's price: fewer links change the step, not the hour"
        ),
    )


def fewer_links(vm: VmSize, links: int) -> VmSize:
    """``vm`` with ``links`` InfiniBand links; a measured multi-VM busbw scales with them."""
    update: dict[str, object] = {"ib_links": links}
    if vm.ib_busbw_measured:
        update["ib_busbw_measured"] = vm.ib_busbw_measured * links / vm.ib_links
    return vm.model_copy(update=update)


def _link_options(
    spec: JobSpec,
    cat: Catalog,
    run: RunShape,
    compute_s: float,
    stall_s: float,
    step_s: float,
    cost: CostPlan | None,
) -> list[LinkOption]:
    shape, job = run.shape, run.spec
    vm = shape.vm
    vm_usd = None
    if cost is not None and cost.total_usd is not None and cost.price_per_vm_hour_usd:
        vm_usd = cost.gpu_vm_hours * cost.price_per_vm_hour_usd
    out = []
    for links in (n for n in LINKS if n <= vm.ib_links):
        for sharp in (False, True):
            cluster = job.cluster.model_copy(update={"sharp": sharp})
            what_if = job.model_copy(update={"cluster": cluster})
            fewer = dataclasses.replace(shape, vm=fewer_links(vm, links))
            ex = exchange(what_if, cat, fewer, compute_s)
            step = ex.step_s + stall_s
            usd = None
            if vm_usd is not None and cost is not None and cost.total_usd is not None:
                usd = cost.total_usd + vm_usd * (step / step_s - 1)
            out.append(
                LinkOption(
                    links,
                    sharp,
                    ex.comm_s,
                    ex.exposed_s + ex.model_parallel.exposed_s,
                    step,
                    usd,
                    planned=links == vm.ib_links and sharp == spec.cluster.sharp,
                )
            )
    return out
