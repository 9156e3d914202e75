"""The Plan: what ``stoker plan`` computes, as plain dataclasses.

``Plan.to_dict()`` is the stable JSON schema (``schema = "stoker.plan/1"``), documented field by
field in docs/plan-json.md. Units are in the names: ``_bytes``, ``_bps`` (bytes per second),
``_s`` (seconds), ``_usd``. A figure stoker cannot know (no published price, no published NVMe
rate) is ``null``, never a guess.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .facts import FabricLayout, Limit, ReadPattern

if TYPE_CHECKING:
    from .inference import CachePlan

SCHEMA = "stoker.plan/1"


@dataclass
class InterconnectPlan:
    needs_infiniband: bool
    scaleup: str
    fabric: str
    gradient_bytes: float
    collective: str  # "all-reduce (DDP)" or "reduce-scatter + 2 all-gathers (FSDP)"
    algorithm: str
    comm_s: float
    exposed_s: float
    busbw_bps: float  # predicted nccl-tests busbw of the dp group at this message size
    single_vm_busbw_bps: float  # predicted, 8 GB all-reduce inside one VM
    single_vm_busbw_published_bps: float | None
    single_vm_busbw_floor_bps: float | None
    fabric_boundary_vms: int
    vms_outside_fabric: int
    sharp: bool
    levels: list[dict[str, Any]] = field(default_factory=list)
    single_vm_busbw_measured_bps: float | None = None  # --measured; it drives the scale-up level
    sharp_requested: bool = False  # cluster.sharp; `sharp` says whether a level modelled it
    # Past one InfiniBand fabric: the layouts the job could take, the one planned first.
    fabric_layout: FabricLayout = FabricLayout.ONE_FABRIC
    fabric_options: list[FabricOption] = field(default_factory=list)
    model_parallel: ModelParallelPlan | None = None  # tp / pp / ep traffic per step
    ethernet: EthernetPlan | None = None  # the same job with InfiniBand off (plan/bandwidth.py)
    bandwidth: BandwidthPlan | None = None  # what the job's links carry per step, and what-ifs


@dataclass
class EthernetPlan:
    """The same job with InfiniBand off (NCCL over TCP sockets), against the plan's own step."""

    busbw_bps: float  # the VM's NCCL-socket all-reduce busbw the Ethernet level runs at
    measured: bool  # False: the frontend NIC's line rate (an upper bound), nothing measured
    source: str  # the catalog source (or "measured") behind busbw_bps
    step_s: float  # compute + exposed communication + data stall, InfiniBand off
    infiniband_step_s: float  # the same with InfiniBand (the plan's own layout)
    ratio: float  # InfiniBand throughput over Ethernet throughput: step_s / infiniband_step_s


@dataclass
class LinkOption:
    """One row of the links what-if: the job with ``links_per_vm`` InfiniBand links per VM."""

    links_per_vm: int
    sharp: bool
    comm_s: float
    exposed_s: float  # communication left after overlap, model-parallel included
    step_s: float  # compute + exposed + data stall (checkpoints scale with it)
    cost_usd: float | None  # the run's cost at this step (VM hours scale with it); None: unpriced
    planned: bool = False  # the plan's own links and SHARP


@dataclass
class BandwidthPlan:
    """What the inter-VM links really carry per step: the data-parallel exchange's bytes and the
    time its links are busy, against the step; then fewer links and SHARP as a what-if."""

    network: str  # "InfiniBand" or "Ethernet"
    bytes_per_vm: float  # sent by each VM per step over its inter-VM links
    busy_s: float  # per step, the time those links carry the exchange
    step_s: float
    capacity_bps: float  # the VM's links: achievable InfiniBand (all rails) or socket rate
    average_bps: float  # bytes_per_vm / step_s
    peak_bps: float  # bytes_per_vm / busy_s: the rate while the exchange runs
    average_use: float  # average_bps / capacity_bps
    peak_use: float
    busbw_measured_bps: float | None = None  # `--measured`: a multi-VM all-reduce's busbw
    options: list[LinkOption] = field(default_factory=list)
    note: str = ""


@dataclass
class FabricOption:
    """One way to lay a job out over InfiniBand fabrics, with what it costs per step."""

    layout: FabricLayout
    vms: int  # VMs the job runs on in this layout
    fabrics: int  # InfiniBand fabrics (scale sets) it spans
    vms_per_fabric: int
    comm_s: float | None  # gradient exchange per step; None where no figure is published
    exposed_s: float | None
    cross_fabric_s: float | None  # the part on Ethernet (all of it with InfiniBand off)
    available: bool  # runnable as the spec stands (some shapes need a declaration first)
    note: str
    step_s: float = 0.0  # compute + exposed communication (model-parallel too) per step
    model_parallel_s: float = 0.0  # the tp / pp / ep part of step_s, as in the main plan


@dataclass
class ModelParallelPlan:
    """Tensor-, pipeline- and expert-parallel traffic per step, when the spec gives the model's
    shape (layers, hidden_size); otherwise ``modelled`` is False and the traffic is taken to be
    inside the measured compute time."""

    modelled: bool
    tp_s: float = 0.0  # tensor-parallel all-reduces of activations, all on the critical path
    pp_s: float = 0.0  # pipeline sends between stages (exposed share)
    pp_bubble_s: float = 0.0  # idle pipeline fill and drain: (pp - 1) / micro-batches x compute
    ep_s: float = 0.0  # expert-parallel all-to-alls (exposed share)
    exposed_s: float = 0.0  # what they add to the step
    micro_batches: int = 0  # per replica per step
    tp_network: str = ""  # where the tp group talks: the scale-up domain or the network
    ep_network: str = ""
    note: str = ""
    overlap: float = 0.0  # workload.overlap: the share of pp sends and ep all-to-alls hidden


@dataclass
class TierChoice:
    tier: str
    name: str
    size_bytes: float | None
    deliverable_bps: float | None
    limited_by: str
    stall_per_step_s: float | None
    fits: bool
    staging_s: float
    staging_on_gpu_vms: bool
    price_per_hour_usd: float | None
    notes: list[str]
    limit: Limit = Limit.UNKNOWN  # what sets deliverable_bps, typed (limited_by in words)
    sku: str | None = None  # the catalog key of a Lustre SKU, NetApp level or Files tier
    unknown: list[str] = field(default_factory=list)  # figures no source publishes
    measure: str | None = None  # how to measure them, when any is unknown


@dataclass
class DataPlan:
    required_bps: float
    bytes_per_step: float
    dataset_bytes: float
    epochs: float
    chosen: TierChoice
    options: list[TierChoice]
    requests_per_s: float = 0.0  # read requests (GETs, file IOs) the job makes to keep up
    request_bytes: float = 0.0  # bytes per request: a sample, or a range of a shard
    read_as: str = ""  # how the loader reads: packed shards or one object per sample
    read_pattern: ReadPattern = ReadPattern.PACKED
    au_target: float = 1.0  # accelerator utilization the data path is sized for
    required_full_bps: float = 0.0  # the rate at AU 100 %: never wait on data
    stall_budget_s: float = 0.0  # wait per step the AU target allows
    au: float | None = None  # the AU the chosen tier gives (ideal / (ideal + stall)); None: unknown


@dataclass
class CheckpointPlan:
    size_bytes: float
    keep: int  # checkpoints kept on each tier
    tier: str
    mode: str
    write_bps: float
    write_s: float
    durable_s: float  # until the copy on Blob is complete
    blocking_s: float
    interval_s: float
    interval_basis: str
    optimal_interval_s: float
    job_mtbf_s: float
    restart_s: float
    waste_fraction: float
    goodput: float
    goodput_at_optimal: float
    volume: TierChoice | None = None  # a Lustre or NetApp volume for checkpoints alone
    interval_set_s: float | None = None  # checkpoints.interval from the spec; None for auto
    writer_ranks: int = 1  # ranks that write a checkpoint: all with FSDP, one replica with DDP
    writer_vms: int = 1  # VMs those ranks sit on; only their NICs and NVMe write
    writers: str = ""  # the assumption, in words
    writer_streams: int = 1  # writer processes at once (checkpoints.writers)
    stream_write_bps: float | None = None  # one stream's limit on this tier; None: unpublished
    write_limit: Limit = Limit.UNKNOWN  # what sets write_bps
    unknown: list[str] = field(default_factory=list)  # figures no source publishes


@dataclass
class StepPlan:
    compute_s: float
    exposed_comm_s: float
    data_stall_s: float | None  # None: the data tier has no published figure, so no stall known
    checkpoint_s: float
    total_s: float  # a lower bound while data_stall_s is None
    gpu_utilization: float  # compute / total step
    model_parallel_s: float = 0.0  # tp / pp / ep traffic and pipeline bubble, in exposed_comm_s


@dataclass
class RunPlan:
    steps: float
    productive_s: float  # steps x step time, checkpoints included
    wall_s: float  # with failures, restarts and lost work
    effective_training_fraction: float  # useful compute / wall clock
    steps_asked: float | None = None  # what the spec asks for; None when only run.length does
    asked_by: str = "run.length"  # run.steps, run.tokens, workload.epochs or run.length


@dataclass
class CostItem:
    item: str
    hours: float
    usd: float | None
    note: str = ""


@dataclass
class CostPlan:
    currency: str
    idle_storage_hours: float  # how long the weekend line assumes the fast tier sits unused
    gpu_vm_hours: float
    price_per_vm_hour_usd: float | None
    price_note: str
    items: list[CostItem]
    idle_gpu_usd: float | None
    idle_storage_weekend_usd: float | None
    total_usd: float | None  # None when any item is unknown
    known_total_usd: float
    unknown: list[str]
    # With the GPU VMs deallocated: each meter per hour (note: its catalog figure and source),
    # their sum (None when one is unknown), and what teardown leaves billed (Lustre deleted).
    idle_meters: list[CostItem] = field(default_factory=list)
    idle_per_hour_usd: float | None = None
    after_teardown_per_hour_usd: float | None = None
    # Ways to pay for the run's VM hours (plan/purchase.py), the cheapest known and why, and a
    # cheaper VM size for a job that does not use the fabric ("" when none).
    purchase: list[CostItem] = field(default_factory=list)
    cheapest_purchase: str | None = None
    purchase_why: str = ""
    right_size: str = ""
    right_size_saving_usd: float | None = None


@dataclass
class InferencePlan:
    model_bytes: float
    replicas: int
    cold_start_s: dict[str, float]
    chosen: str
    files_share_bytes: float  # premium share sized for the cold-start target
    netapp_volume_bytes: float = 0.0  # Premium volume sized for the same target
    replicas_per_vm: int = 1  # they share the VM's frontend NIC and NVMe for a cold start
    replicas_that_fit: int = 0  # whose weights fit the VMs' GPU memory (weights alone)
    vm_gpu_memory_bytes: float = 0.0  # GPU memory of one VM
    cache: CachePlan | None = None  # the shared model cache for these replicas (inference.py)


@dataclass
class Recommendation:
    need: str
    choice: str
    size: str
    reason: str
    warnings: list[str] = field(default_factory=list)


@dataclass
class Plan:
    name: str
    kind: str
    vm_size: str
    nodes: int
    gpus: int
    region: str
    catalog_as_of: str
    cost: CostPlan
    interconnect: InterconnectPlan | None = None
    data: DataPlan | None = None
    checkpoints: CheckpointPlan | None = None
    step: StepPlan | None = None
    run: RunPlan | None = None
    inference: InferencePlan | None = None
    recommendations: list[Recommendation] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    calibration: list[Any] = field(default_factory=list)  # plan/calibrate.py's Calibration rows
    gpus_idle: int = 0  # GPUs on the VMs that the layout (dp x tp x pp) leaves unused
    schema: str = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
