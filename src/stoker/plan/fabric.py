"""One job, one fabric: the shapes a job larger than one scale set can take, each with its step.

A scale set (one placement group) is one InfiniBand partition: VMs in another scale set cannot
reach it over InfiniBand, and NCCL picks one network transport per communicator, so one job
spread over two scale sets fails at init or hangs unless InfiniBand is off for the whole job
(Microsoft's InfiniBand set-up page; github.com/NVIDIA/nccl-tests issue 36). A scale set holds
100 VMs, or the limit an approved support request sets (``cluster.placement_group_limit``, at
most 300). Past that, the job runs as one of these, and the plan lays each out with its step:

- ``approved_limit``: the whole job in one scale set of up to 300 VMs (a support request);
- ``independent_jobs``: one job per scale set, each of the spec's global batch (a sweep, or the
  job shrunk to one scale set: more compute per step);
- ``independent_replicas``: data-parallel replicas, one per scale set, that never exchange
  gradients across scale sets: k models, each trained on 1/k of the batch; planned as runnable
  only when the spec declares it (``cluster.fabric = "independent-replicas"``);
- ``flat_ethernet``: one job with InfiniBand off (``NCCL_NET=Socket``: on Azure's ND sizes
  ``NCCL_IB_DISABLE=1`` alone leaves NCCL on InfiniBand through the RDMA plugin): all of it at
  NCCL's TCP-socket rate, measured where the catalog has it (``ethernet_pace``);
- ``microsoft_arranged``: one fabric past the limit, arranged with Microsoft (Azure's own
  1,344-VM MLPerf run was), planned as one fabric only when the spec declares it
  (``cluster.fabric = "microsoft-arranged"``); tests/test_plan_published.py holds its step and
  run to that published run (tests/data/mlperf-v3.1-gpt3-1344vm.toml).

The plan's own step and each option's come from one function (``exchange``), so the option that
is the plan's shape has the plan's step, model-parallel traffic included.
"""

from __future__ import annotations

import dataclasses
import math

from ..catalog import Catalog, VmSize
from ..errors import SpecError
from ..units import format_rate as fr
from .facts import FabricLayout, Network
from .interconnect import CollectiveEstimate, Level, allreduce, layout, levels
from .parallel import model_parallel_plan
from .result import FabricOption, ModelParallelPlan
from .shape import Shape, scale_set_vms
from .spec import MAX_PLACEMENT_GROUP, PRECISION_BYTES, JobSpec

# What each shape needs the spec to say before it is planned (and provisioned) as runnable.
DECLARES = {
    FabricLayout.APPROVED_LIMIT: (
        "cluster.placement_group_limit = {vms}, once a support request is approved"
    ),
    FabricLayout.INDEPENDENT_JOBS: 'cluster.fabric = "independent-jobs"',
    FabricLayout.INDEPENDENT_REPLICAS: 'cluster.fabric = "independent-replicas"',
    FabricLayout.MICROSOFT_ARRANGED: 'cluster.fabric = "microsoft-arranged"',
}
_DECLARED = {
    "independent-jobs": FabricLayout.INDEPENDENT_JOBS,
    "independent-replicas": FabricLayout.INDEPENDENT_REPLICAS,
    "microsoft-arranged": FabricLayout.MICROSOFT_ARRANGED,
}


@dataclasses.dataclass(frozen=True)
class RunShape:
    """What one job of the plan runs on: its shape, its spec (the batch one job takes), and its
    compute per step as a multiple of the whole spec's."""

    layout: FabricLayout
    shape: Shape
    spec: JobSpec
    compute_factor: float = 1.0


@dataclasses.dataclass(frozen=True)
class Exchange:
    """One job's communication per step: the data-parallel exchange and the model-parallel
    traffic, with what is left exposed after overlap."""

    estimate: CollectiveEstimate
    levels: tuple[Level, ...]
    comm_s: float
    exposed_s: float
    model_parallel: ModelParallelPlan
    compute_s: float

    @property
    def step_s(self) -> float:
        """Compute plus exposed communication: the step before data stalls and checkpoints."""
        return self.compute_s + self.exposed_s + self.model_parallel.exposed_s


# How to run NCCL over TCP on Azure's ND sizes (catalog [ethernet.ND96isr_H100_v5], its note).
SOCKETS = (
    "NCCL_NET=Socket; NCCL_IB_DISABLE=1 alone leaves NCCL on InfiniBand through Azure's RDMA plugin"
)


def ethernet_pace(vm: VmSize) -> str:
    """How fast a VM's collectives move over Ethernet ("at ..."), and what it rests on: the measured
    NCCL-socket busbw where the catalog (or ``--measured``) has one, else the frontend NIC's
    line rate as an upper bound."""
    if vm.ethernet_busbw:
        return (
            f"at the measured NCCL-socket busbw, {fr(vm.ethernet_busbw)} per VM "
            f"({vm.source_of('ethernet_busbw')})"
        )
    return (
        f"at most {fr(vm.frontend_nic)} per VM, the frontend NIC's line rate (an upper bound: no "
        "measured socket rate in the catalog, and TCP sockets reach a fraction of it)"
    )


def gradient_bytes(spec: JobSpec) -> float:
    w = spec.workload
    if w.gradient_bytes is not None:
        return w.gradient_bytes
    if w.params is not None:
        return w.params * PRECISION_BYTES[w.precision] / (w.tp * w.pp)
    return 0.0


def collective(spec: JobSpec) -> tuple[float, str]:
    """All-reduces of traffic per step and the collective's name. FSDP reduce-scatters the
    gradients and all-gathers the parameters twice (forward and backward): 1.5 all-reduces."""
    if spec.workload.sharding == "fsdp":
        return 1.5, "reduce-scatter + 2 all-gathers (FSDP)"
    return 1.0, "all-reduce (DDP)"


def exchange(spec: JobSpec, cat: Catalog, s: Shape, compute_s: float) -> Exchange:
    """The communication of one job of shape ``s``: past its fabric boundary, the flat ring runs
    on Ethernet (NCCL's one transport per communicator)."""
    w = spec.workload
    lay = layout(s.vm, s.nodes, s.dp, w.tp, s.boundary_vms)
    lvls = levels(s.vm, cat.fabric, lay, spec.cluster.sharp)
    est = allreduce(gradient_bytes(spec), lvls, s.dp)
    comm = est.seconds * collective(spec)[0]
    mp = model_parallel_plan(spec, cat, s, compute_s)
    exposed = max(comm * (1 - w.overlap), comm - overlap_window_s(mp, compute_s))
    return Exchange(est, lvls, comm, exposed, mp, compute_s)


def overlap_window_s(mp: ModelParallelPlan, compute_s: float) -> float:
    """The compute the gradient exchange can hide behind. A step that accumulates m
    micro-batches syncs gradients once, in the last one's backward (DDP's no_sync, Megatron's
    distributed optimizer with overlap_grad_sync), so only that micro-batch's compute covers it;
    without the model's shape the plan does not know m and takes the whole step."""
    return compute_s / mp.micro_batches if mp.modelled and mp.micro_batches > 1 else compute_s


def _island(spec: JobSpec, s: Shape, vms: int, replicas: bool) -> tuple[Shape, JobSpec] | None:
    """One scale set's job: ``vms`` VMs, the dp ranks that fit on them; a replica takes its
    share of the global batch. None when the layout does not split (tp x pp or ep too big)."""
    w = spec.workload
    dp = min(s.dp, vms * s.vm.gpus // (w.tp * w.pp))
    dp -= dp % w.ep  # experts spread over the dp ranks: a whole number of ep groups
    if dp < 1:
        return None
    used = dp * w.tp * w.pp
    nodes = math.ceil(used / s.vm.gpus)
    island = dataclasses.replace(s, nodes=nodes, gpus=nodes * s.vm.gpus, dp=dp, gpus_used=used)
    if not replicas:
        return island, spec
    batch = max(1, w.global_batch * dp // s.dp)
    work = w.model_copy(update={"global_batch": batch, "dp": dp})
    return island, spec.model_copy(update={"workload": work})


def run_shape(spec: JobSpec, cat: Catalog, s: Shape) -> RunShape:
    """The shape the plan runs: one fabric when the job fits (or the spec declares a fabric
    arranged with Microsoft), the declared split past one scale set, else one job with
    InfiniBand off (the one shape that runs across scale sets undeclared)."""
    limit = scale_set_vms(spec, cat)
    one = RunShape(FabricLayout.ONE_FABRIC, s, spec)
    if s.nodes <= limit or not _needs_network(spec, s):
        return one
    declared = _DECLARED.get(spec.cluster.fabric)
    if declared is FabricLayout.MICROSOFT_ARRANGED:
        return dataclasses.replace(one, layout=declared)
    if declared in (FabricLayout.INDEPENDENT_JOBS, FabricLayout.INDEPENDENT_REPLICAS):
        replicas = declared is FabricLayout.INDEPENDENT_REPLICAS
        split = _island(spec, s, limit, replicas)
        if split is None:
            raise SpecError(
                f"cluster.fabric: {spec.cluster.fabric!r} splits the job into scale sets of "
                f"{limit} VMs, but tp x pp = {spec.workload.tp * spec.workload.pp} (with ep = "
                f"{spec.workload.ep}) does not fit one; lower tp, pp or ep"
            )
        island, island_spec = split
        factor = 1.0 if replicas else s.gpus_used / island.gpus_used
        return RunShape(declared, island, island_spec, factor)
    return dataclasses.replace(one, layout=FabricLayout.FLAT_ETHERNET)


def _needs_network(spec: JobSpec, s: Shape) -> bool:
    return layout(s.vm, s.nodes, s.dp, spec.workload.tp, s.nodes).domains > 1


def fabric_options(spec: JobSpec, cat: Catalog, s: Shape, compute_s: float) -> list[FabricOption]:
    """Every shape a job larger than one scale set can take, each priced by ``exchange``;
    ``compute_s`` is the whole job's compute per step. Empty when the job fits one scale set
    or its size has no InfiniBand (then it is Ethernet whatever the layout)."""
    limit = scale_set_vms(spec, cat)
    if s.nodes <= limit or not s.vm.has_infiniband or not _needs_network(spec, s):
        return []
    whole = dataclasses.replace(s, boundary_vms=s.nodes)
    sets = math.ceil(s.nodes / limit)
    declared = spec.cluster.fabric

    def option(kind: FabricLayout, ex: Exchange, vms: int, fabrics: int, note: str) -> FabricOption:
        available = kind in (FabricLayout.FLAT_ETHERNET, FabricLayout.INDEPENDENT_JOBS)
        if kind is FabricLayout.APPROVED_LIMIT:
            available = s.nodes <= MAX_PLACEMENT_GROUP
        elif kind in (FabricLayout.INDEPENDENT_REPLICAS, FabricLayout.MICROSOFT_ARRANGED):
            available = _DECLARED.get(declared) is kind
        needs = DECLARES.get(kind, "").format(vms=s.nodes)
        return FabricOption(
            kind,
            vms,
            fabrics,
            min(vms, limit) if fabrics > 1 else vms,
            ex.comm_s,
            ex.exposed_s,
            ex.comm_s if ex.levels and ex.levels[-1].network is Network.ETHERNET else 0.0,
            available,
            note + (f"; declare {needs}" if needs and _DECLARED.get(declared) is not kind else ""),
            step_s=ex.step_s,
            model_parallel_s=ex.model_parallel.exposed_s,
        )

    out = []
    if s.nodes <= MAX_PLACEMENT_GROUP:
        out.append(
            option(
                FabricLayout.APPROVED_LIMIT,
                exchange(spec, cat, whole, compute_s),
                s.nodes,
                1,
                f"all {s.nodes} VMs in one scale set: past {cat.fabric.scale_set_vms} VMs a "
                f"placement group needs an approved support request (at most "
                f"{MAX_PLACEMENT_GROUP})",
            )
        )
    jobs = _island(spec, s, limit, replicas=False)
    if jobs is not None:
        island, _ = jobs
        factor = s.gpus_used / island.gpus_used
        out.append(
            option(
                FabricLayout.INDEPENDENT_JOBS,
                exchange(spec, cat, island, compute_s * factor),
                s.nodes,
                sets,
                f"{sets} independent jobs of up to {limit} VMs, one per scale set, each of the "
                f"spec's global batch: one of them takes {factor:.1f}x the compute per step",
            )
        )
    replicas = _island(spec, s, limit, replicas=True)
    if replicas is not None:
        island, island_spec = replicas
        out.append(
            option(
                FabricLayout.INDEPENDENT_REPLICAS,
                exchange(island_spec, cat, island, compute_s),
                s.nodes,
                sets,
                f"{sets} data-parallel replicas of up to {limit} VMs that never exchange "
                f"gradients across scale sets: {sets} models, each trained on about 1/{sets} "
                "of the global batch (merging them, by weight averaging or otherwise, is "
                "outside the job and its effect on the model is not planned)",
            )
        )
    out.append(
        option(
            FabricLayout.FLAT_ETHERNET,
            exchange(spec, cat, dataclasses.replace(s, boundary_vms=limit), compute_s),
            s.nodes,
            sets,
            f"one job over {sets} scale sets with InfiniBand off for all of it "
            f"({SOCKETS}): every collective {ethernet_pace(s.vm)}",
        )
    )
    out.append(
        option(
            FabricLayout.MICROSOFT_ARRANGED,
            exchange(spec, cat, whole, compute_s),
            s.nodes,
            1,
            f"all {s.nodes} VMs on one InfiniBand fabric arranged with Microsoft (as Azure's "
            "1,344-VM MLPerf run was); no customer scale set holds it",
        )
    )
    return out
