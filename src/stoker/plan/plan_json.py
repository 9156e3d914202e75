"""The JSON a Plan writes (``Plan.to_dict()``, ``schema = "stoker.plan/1"``), typed for what
reads it (``stoker report``). docs/plan-json.md is the reference, field by field.

Every TypedDict here is ``total=False``: a reader takes plans from older stokers and plans
edited by hand, so it asks for each key (``.get``) and checks it. A figure no source publishes
is ``None`` (null), never a guess. Each class mirrors one dataclass of plan/result.py, key for
key (tests/test_report_types.py holds them together).
"""

from __future__ import annotations

from typing import Any, TypedDict


class TierChoiceJson(TypedDict, total=False):
    """A storage tier the plan weighed (``TierChoice``)."""

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
    limit: str
    sku: str | None
    unknown: list[str]
    measure: str | None


class DataJson(TypedDict, total=False):
    """The data path (``DataPlan``)."""

    required_bps: float
    bytes_per_step: float
    dataset_bytes: float
    epochs: float
    chosen: TierChoiceJson
    options: list[TierChoiceJson]
    requests_per_s: float
    request_bytes: float
    read_as: str
    read_pattern: str
    au_target: float
    required_full_bps: float
    stall_budget_s: float
    au: float | None


class CheckpointsJson(TypedDict, total=False):
    """Checkpoints: their size, interval, blocking time and the goodput they leave
    (``CheckpointPlan``)."""

    size_bytes: float
    keep: int
    tier: str
    mode: str
    write_bps: float
    write_s: float
    durable_s: float
    blocking_s: float
    interval_s: float
    interval_basis: str
    optimal_interval_s: float
    job_mtbf_s: float
    restart_s: float
    waste_fraction: float
    goodput: float
    goodput_at_optimal: float
    volume: TierChoiceJson | None
    interval_set_s: float | None
    writer_ranks: int
    writer_vms: int
    writers: str
    writer_streams: int
    stream_write_bps: float | None
    write_limit: str
    unknown: list[str]


class StepJson(TypedDict, total=False):
    """One training step, by phase (``StepPlan``)."""

    compute_s: float
    exposed_comm_s: float
    data_stall_s: float | None
    checkpoint_s: float
    total_s: float
    gpu_utilization: float
    model_parallel_s: float


class RunJson(TypedDict, total=False):
    """The whole run (``RunPlan``)."""

    steps: float
    productive_s: float
    wall_s: float
    effective_training_fraction: float
    steps_asked: float | None
    asked_by: str


class CostItemJson(TypedDict, total=False):
    """One line of the bill (``CostItem``)."""

    item: str
    hours: float
    usd: float | None
    note: str


class CostJson(TypedDict, total=False):
    """The bill (``CostPlan``)."""

    currency: str
    idle_storage_hours: float
    gpu_vm_hours: float
    price_per_vm_hour_usd: float | None
    price_note: str
    items: list[CostItemJson]
    idle_gpu_usd: float | None
    idle_storage_weekend_usd: float | None
    total_usd: float | None
    known_total_usd: float
    unknown: list[str]
    idle_meters: list[CostItemJson]
    idle_per_hour_usd: float | None
    after_teardown_per_hour_usd: float | None
    purchase: list[CostItemJson]
    cheapest_purchase: str | None
    purchase_why: str
    right_size: str
    right_size_saving_usd: float | None


class EthernetJson(TypedDict, total=False):
    """``interconnect.ethernet``: the job with InfiniBand off (``EthernetPlan``)."""

    busbw_bps: float
    measured: bool
    source: str
    step_s: float
    infiniband_step_s: float
    ratio: float


class LinkOptionJson(TypedDict, total=False):
    """One row of ``interconnect.bandwidth.options`` (``LinkOption``)."""

    links_per_vm: int
    sharp: bool
    comm_s: float
    exposed_s: float
    step_s: float
    cost_usd: float | None
    planned: bool


class BandwidthJson(TypedDict, total=False):
    """``interconnect.bandwidth``: what the inter-VM links carry per step (``BandwidthPlan``)."""

    network: str
    bytes_per_vm: float
    busy_s: float
    step_s: float
    capacity_bps: float
    average_bps: float
    peak_bps: float
    average_use: float
    peak_use: float
    busbw_measured_bps: float | None
    options: list[LinkOptionJson]
    note: str


class CacheJson(TypedDict, total=False):
    """``inference.cache``: the shared model cache (an Azure Files premium share) for the
    replicas, cold starts with and without it (``CachePlan``)."""

    replicas: int
    replicas_per_vm: int
    model_bytes: float
    blob_rate: float | None
    nic_rate: float
    share_bytes: float
    share_rate: float
    share_max_rate: float
    demand_rate: float
    warmup_s: float
    cold_start_without_s: float
    cold_start_with_s: float
    blob_downloads_without: int
    blob_downloads_with: int
    share_usd_per_hour: float | None
    sources: list[str]


class InferenceJson(TypedDict, total=False):
    """Inference cold starts (``InferencePlan``)."""

    model_bytes: float
    replicas: int
    cold_start_s: dict[str, float]
    chosen: str
    files_share_bytes: float
    netapp_volume_bytes: float
    replicas_per_vm: int
    replicas_that_fit: int
    vm_gpu_memory_bytes: float
    cache: CacheJson | None


class PlanJson(TypedDict, total=False):
    """``stoker plan --json``: one plan (``Plan``). ``stoker plan --simulate --json`` adds
    ``simulation``, a ``stoker.simulation/1`` document (stoker.simulate.simulation_json)."""

    schema: str
    name: str
    kind: str
    vm_size: str
    nodes: int
    gpus: int
    region: str
    catalog_as_of: str
    cost: CostJson
    interconnect: dict[str, Any] | None
    data: DataJson | None
    checkpoints: CheckpointsJson | None
    step: StepJson | None
    run: RunJson | None
    inference: InferenceJson | None
    recommendations: list[dict[str, Any]]
    warnings: list[str]
    calibration: list[Any]
    gpus_idle: int
    simulation: dict[str, Any]
