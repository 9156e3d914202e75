"""The job spec: what a user writes in ``job.toml``, validated once, in base units after.

Quantities are written the way people write them ("400 Gb/s", "28 TiB", "2.5 PB", "90 s",
"405B" parameters); see docs/job-spec.md for every field. Unknown fields are refused so a typo
never silently falls back to a default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .._user_files import load_user_toml
from .._validation import describe
from ..catalog import vm_size_name
from ..errors import SpecError
from ..quantities import Bytes, Count, Duration, Rate
from ..units import parse_duration

WorkloadKind = Literal["pretrain", "fine-tune", "inference", "data-prep"]
Placement = Literal["scale_set", "scale_set_on_request", "availability_set"]
# How a job larger than one scale set may run (plan/fabric.py): one scale set is one InfiniBand
# partition, so past it only a declared shape is planned as runnable.
FabricShape = Literal["scale-set", "independent-jobs", "independent-replicas", "microsoft-arranged"]
Zone = Literal["1", "2", "3"]
# How stoker provision lets people in (provision/_access.py) and data into Blob from outside.
AccessKind = Literal["bastion", "login-vm", "none"]
BlobAccess = Literal["firewall-ip", "private-endpoint", "none"]
# singlePlacementGroup scale sets: 100 VMs, 300 with an approved support request.
MAX_PLACEMENT_GROUP = 300
DataTier = Literal["auto", "lustre", "nvme", "blob", "files", "netapp"]
CheckpointTier = Literal["auto", "lustre", "nvme", "netapp", "blob"]
Sharding = Literal["ddp", "fsdp"]
Precision = Literal["fp32", "bf16", "fp16", "fp8"]
CheckpointWriters = Literal["auto", "single", "per_vm", "per_gpu"]

PRECISION_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
# Far past any Azure cluster: a bigger number is a typo, and would only overflow the arithmetic.
MAX_VMS = 100_000
MAX_GPUS = 1_000_000
MAX_LAYERS = 10_000
MAX_HIDDEN = 1_000_000
MAX_TOP_K = 256


def _share(value: object) -> object:
    """A share as a number from 0 to 1; "90%" is answered with how to write it."""
    if isinstance(value, bool):
        raise ValueError(f"{str(value).lower()} is a boolean; write a number from 0 to 1")
    if isinstance(value, str) and value.strip().endswith("%"):
        raise ValueError(f"write the share as a number from 0 to 1 (0.9 for 90 %), not {value!r}")
    return value


def _has_parser(annotation: object) -> bool:
    """Whether a type holds a quantity parser (``Bytes | None`` does): it reads bools itself."""
    if get_origin(annotation) is Annotated:
        return any(isinstance(m, BeforeValidator) for m in get_args(annotation)[1:])
    return any(_has_parser(arg) for arg in get_args(annotation))


class _Section(BaseModel):
    # NaN and inf are no one's figure: refused here, named by field, not found later as an
    # overflow in the plan.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_numbers(cls, value: object, info: ValidationInfo) -> object:
        # TOML's true is 1 to pydantic's lax int and float: `layers = true` must not plan 1 layer.
        # Quantities (sizes, rates, ...) refuse it in their own parser, with their own words.
        if not isinstance(value, bool):
            return value
        field = cls.model_fields[str(info.field_name)]
        parsed = _has_parser(field.annotation) or any(
            isinstance(m, BeforeValidator) for m in field.metadata
        )
        if field.annotation is not bool and get_origin(field.annotation) is not dict and not parsed:
            raise ValueError(f"{str(value).lower()} is a boolean; write a number or a word here")
        return value


class Cluster(_Section):
    vm_size: str = Field(description="VM size, e.g. ND96isr_H100_v5 or Standard_ND96isr_H100_v5")
    nodes: int | None = Field(default=None, gt=0, le=MAX_VMS, description="number of VMs")
    gpus: int | None = Field(
        default=None, gt=0, le=MAX_GPUS, description="number of GPUs (or give nodes)"
    )
    region: str = "eastus"
    placement: Placement = "scale_set"
    fabric_boundary_vms: int | None = Field(
        default=None,
        gt=0,
        le=MAX_VMS,
        description="VMs that share one InfiniBand fabric; else placement's",
    )
    placement_group_limit: int | None = Field(
        default=None,
        gt=0,
        le=MAX_PLACEMENT_GROUP,
        description="VMs per scale set an approved support request allows (at most 300)",
    )
    fabric: FabricShape = Field(
        default="scale-set",
        description="how a job past one scale set runs: independent jobs or replicas per "
        "scale set, or one fabric arranged with Microsoft",
    )
    zone: Zone = Field(default="1", description="availability zone of Lustre and its clients")
    access: AccessKind = Field(
        default="bastion", description="the way in stoker provision writes (--access)"
    )
    blob_access: BlobAccess = Field(
        default="firewall-ip",
        description="how data reaches Blob from outside: the deployer's IP rule, a private "
        "endpoint, or none (--blob-access)",
    )
    sharp: bool = Field(default=False, description="model SHARP in-network reduction on IB")
    price_per_hour: float | None = Field(default=None, gt=0, description="override, $/VM-hour")
    spot_evictions_per_day: float | None = Field(
        default=None, ge=0, le=1000, description="Spot evictions you expect per VM per day"
    )

    @field_validator("zone", mode="before")
    @classmethod
    def _zone_as_text(cls, value: object) -> object:
        # ARM writes zones as text ("1"); TOML's `zone = 1` means the same zone.
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("vm_size")
    @classmethod
    def _without_prefix(cls, value: str) -> str:
        return vm_size_name(value)  # ARM's spelling, Standard_..., names the same size

    @model_validator(mode="after")
    def _size_given(self) -> Cluster:
        if self.nodes is None and self.gpus is None:
            raise ValueError("give either 'nodes' (VMs) or 'gpus'")
        return self


class Workload(_Section):
    kind: WorkloadKind = "pretrain"
    step_time: Duration | None = Field(default=None, gt=0, description="compute time of a step")
    params: Count | None = Field(default=None, description="model parameters, e.g. '70B'")
    # At least 1 token/s: no GPU trains slower, and a tiny rate only overflows the arithmetic.
    tokens_per_s_per_gpu: float | None = Field(default=None, ge=1, le=1e9)
    global_batch: int = Field(default=1024, gt=0, description="samples per optimizer step")
    seq_len: int | None = Field(default=None, gt=0, description="tokens per sample")
    sample_size: Bytes | None = Field(default=None, description="bytes per sample as stored")
    bytes_per_token: float = Field(default=4, gt=0, description="stored bytes per token")
    dataset_size: Bytes | None = None
    epochs: float = Field(default=1.0, gt=0)
    tp: int = Field(default=1, gt=0, le=MAX_GPUS, description="tensor-parallel degree")
    pp: int = Field(default=1, gt=0, le=MAX_GPUS, description="pipeline-parallel degree")
    ep: int = Field(default=1, gt=0, le=MAX_GPUS, description="expert-parallel degree (inside dp)")
    # The model's shape: with layers and hidden_size the plan models tp/pp/ep traffic; without
    # them it is taken to be inside the measured step_time / tokens_per_s_per_gpu.
    # The bounds are far past any model trained (hundreds of layers, widths in the tens of
    # thousands, top-8 routing): a bigger number is a typo that would plan nonsense.
    layers: int | None = Field(default=None, gt=0, le=MAX_LAYERS, description="transformer layers")
    hidden_size: int | None = Field(
        default=None, gt=0, le=MAX_HIDDEN, description="model (embedding) width"
    )
    micro_batch: int = Field(default=1, gt=0, description="samples per micro-batch per replica")
    virtual_stages: int = Field(
        default=1,
        gt=0,
        le=MAX_LAYERS,
        description="interleaved pipeline: model chunks per stage (Megatron's virtual pipeline)",
    )
    experts_per_token: int = Field(
        default=2, gt=0, le=MAX_TOP_K, description="MoE routing top-k (with ep)"
    )
    au_target: Annotated[float, BeforeValidator(_share)] = Field(
        default=0.90, gt=0, le=1, description="accelerator utilization the data path must allow"
    )
    dp: int | None = Field(default=None, gt=0, description="data-parallel degree (derived)")
    sharding: Sharding = "ddp"
    precision: Precision = "bf16"
    gradient_bytes: Bytes | None = Field(default=None, description="per step per replica")
    overlap: float = Field(default=0.5, ge=0, le=1, description="share of comm hidden")
    replicas: int | None = Field(default=None, gt=0, description="inference: model copies")

    @model_validator(mode="after")
    def _compute_given(self) -> Workload:
        if self.kind in ("pretrain", "fine-tune"):
            if self.step_time is None and (self.params is None or not self.tokens_per_s_per_gpu):
                raise ValueError(
                    "give 'step_time', or 'params' with 'tokens_per_s_per_gpu' (and 'seq_len')"
                )
            if self.step_time is None and self.seq_len is None:
                raise ValueError("'tokens_per_s_per_gpu' needs 'seq_len' to know a step's tokens")
            if self.sample_size is None and self.seq_len is None:
                raise ValueError("give 'sample_size' (bytes per sample) or 'seq_len'")
        if (self.layers is None) != (self.hidden_size is None):
            raise ValueError("give both 'layers' and 'hidden_size' (the model's shape), or neither")
        if self.layers is not None and self.seq_len is None:
            raise ValueError("the model's shape (layers, hidden_size) needs 'seq_len' too")
        if self.layers is not None and self.pp > self.layers:
            raise ValueError(f"pp = {self.pp} pipeline stages need at least as many layers")
        if self.layers is not None and self.pp * self.virtual_stages > self.layers:
            raise ValueError(
                f"pp x virtual_stages = {self.pp * self.virtual_stages} model chunks need at "
                f"least as many layers (layers = {self.layers})"
            )
        if self.hidden_size is not None and self.hidden_size % self.tp:
            raise ValueError(
                f"hidden_size = {self.hidden_size} does not split over tp = {self.tp} GPUs "
                "(tensor parallelism splits each layer's width evenly); make it a multiple of tp"
            )
        if self.micro_batch > self.global_batch:
            raise ValueError(
                f"micro_batch = {self.micro_batch} is more samples than global_batch = "
                f"{self.global_batch} holds; lower micro_batch"
            )
        return self


class Data(_Section):
    source: str | None = Field(default=None, description="where the data lives, e.g. az://...")
    tier: DataTier = "auto"
    lustre_sku: str = "auto"
    blob_tier: Literal["standard", "premium"] = "standard"
    # Azure's own limit is 250 accounts per region and subscription (500 on request).
    blob_accounts: int = Field(default=1, gt=0, le=500)
    packed: bool = Field(
        default=True, description="samples packed into shards; false: one object per sample"
    )
    shard_size: Bytes = Field(default=64 * 2**20, description="bytes per shard when packed")
    lustre_capacity_approved: bool = Field(
        default=False,
        description="a support request allows Lustre past the SKU's listed maximum",
    )


def _duration_or_auto(value: object) -> object:
    return value if value == "auto" else parse_duration(value)  # type: ignore[arg-type]


class Checkpoints(_Section):
    size: Bytes | None = Field(default=None, description="whole checkpoint; else derived")
    bytes_per_param: float = Field(
        default=14.0, gt=0, le=1000, description="bf16 weights + fp32 Adam (a typo past 1000)"
    )
    interval: Annotated[float | Literal["auto"], BeforeValidator(_duration_or_auto)] = "auto"
    tier: CheckpointTier = "auto"
    mode: Literal["async", "sync"] = "async"
    keep: int = Field(default=3, gt=0)
    version_days: int = Field(
        default=7,
        ge=1,
        le=3650,
        description="days Blob keeps a deleted checkpoint's previous version (lifecycle rule)",
    )
    writers: CheckpointWriters = Field(
        default="auto", description="writer processes: one, one per VM, one per GPU (auto)"
    )
    host_copy_bw_per_gpu: Rate | None = Field(
        default=None, description="device-to-host bytes/s per GPU for async snapshots"
    )

    @field_validator("interval")
    @classmethod
    def _positive_interval(cls, value: float | str) -> float | str:
        if value != "auto" and float(value) <= 0:
            raise ValueError("must be greater than zero, or 'auto'")
        return value


class Reliability(_Section):
    gpu_mtbf: Duration | None = Field(
        default=None, gt=0, description="per GPU; default from catalog"
    )
    restart_time: Duration = Field(default=600.0, description="detect + reschedule + reload")


class Run(_Section):
    length: Duration | None = Field(
        default=None, gt=0, description="wall-clock length; caps the training the spec asks for"
    )
    tokens: Count | None = Field(default=None, description="tokens to train (derives length)")
    steps: int | None = Field(default=None, gt=0)
    idle_storage: Duration = Field(
        default=48 * 3600.0, description="how long fast tiers may sit unused (a weekend)"
    )

    @model_validator(mode="after")
    def _one_amount(self) -> Run:
        if self.steps is not None and self.tokens is not None:
            raise ValueError("give 'steps' or 'tokens', not both: each says how long to train")
        return self


class JobSpec(_Section):
    name: str = "job"
    cluster: Cluster
    # A missing section is validated as an empty one, in its own field, so its errors carry
    # its name and come with every other error of the spec.
    workload: Workload = Field(default_factory=dict, validate_default=True)  # type: ignore[arg-type]
    data: Data = Field(default_factory=Data)
    checkpoints: Checkpoints = Field(default_factory=Checkpoints)
    reliability: Reliability = Field(default_factory=Reliability)
    run: Run = Field(default_factory=Run)
    # The simulation's knobs (docs/simulate.md): `stoker simulate` validates them, naming each
    # `simulate.KEY`; the closed-form plan has no use for them and leaves them be.
    simulate: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_amount(self) -> JobSpec:
        # With the dataset's size known, epochs is an amount of training like steps or tokens.
        w, r = self.workload, self.run
        given = "epochs" in w.model_fields_set and w.dataset_size is not None
        if given and w.kind in ("pretrain", "fine-tune") and (r.steps or r.tokens):
            other = "run.steps" if r.steps else "run.tokens"
            raise ValueError(
                f"workload.epochs and {other} both say how long to train: give one of them"
            )
        return self


def with_placement_group_limit(job: JobSpec, limit: int | None) -> JobSpec:
    """The spec with ``--placement-group-limit`` laid over ``cluster.placement_group_limit``:
    the VMs per scale set an approved support request allows."""
    if limit is None:
        return job
    if (
        isinstance(limit, bool)
        or not isinstance(limit, int)
        or not 0 < limit <= MAX_PLACEMENT_GROUP
    ):
        raise SpecError(
            f"--placement-group-limit {limit!r}: give the VMs per scale set an approved support "
            f"request allows, 1 to {MAX_PLACEMENT_GROUP}"
        )
    cluster = job.cluster.model_copy(update={"placement_group_limit": limit})
    return job.model_copy(update={"cluster": cluster})


def load_spec(path: str | Path) -> JobSpec:
    """Read and validate a job spec; every problem is reported with the file and field."""
    data = read_spec_toml(path)
    return parse_spec(data, source=str(path))


def read_spec_toml(path: str | Path) -> dict[str, Any]:
    """The job spec's TOML as a dict, unvalidated; a file that cannot be one names itself."""
    hint = "; see examples/ for some to start from"
    return load_user_toml(path, "job spec", SpecError, missing_hint=hint)


def parse_spec(data: dict, source: str = "<spec>") -> JobSpec:
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"{source}: invalid job spec\n{describe(exc)}") from exc
