"""The pieces every tier's model shares: what the job needs (DataNeed), one tier's answer
(TierOption), the caps that set a rate, and the stall. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..catalog import Catalog, LustreSku, VmSize
from ..units import format_bytes
from . import lustre
from .facts import MEASURE_SHARED, MEASURE_STORAGE, Limit

TIB = 2**40
GIB = 2**30
MIB = 2**20

# Local NVMe is filled to at most this share, leaving room for scratch and checkpoints.
NVME_USABLE = 0.8
# stoker's stores read an object in ranged GETs of this size (store/_download.py RANGE).
GET_RANGE_BYTES = 16 * MIB
# SMB and NFS clients read at most 1 MiB per IO (assumed: Azure Files counts one IO per read).
FILE_IO_BYTES = 1 * MIB


@dataclass(frozen=True)
class DataNeed:
    bytes_per_step: float
    ideal_step_s: float  # compute + exposed communication
    dataset_bytes: float
    nodes: int
    # Bytes per read request (a sample, or a range of a shard); None: large sequential reads,
    # where no request or IOPS limit binds (checkpoints, model loads).
    request_bytes: float | None = None
    # Accelerator utilization the data path must allow: 1.0 never waits (checkpoints, loads).
    au_target: float = 1.0

    @property
    def full_rate(self) -> float:
        """Bytes/s the whole job must read to never wait on data (AU 100 %)."""
        return self.bytes_per_step / self.ideal_step_s if self.ideal_step_s > 0 else 0.0

    @property
    def rate(self) -> float:
        """Bytes/s the whole job must read to meet the AU target."""
        return self.full_rate * self.au_target

    @property
    def stall_budget_s(self) -> float:
        """Wait per step the AU target allows: ideal x (1/AU - 1)."""
        return self.ideal_step_s * (1 / self.au_target - 1)

    @property
    def requests_per_s(self) -> float | None:
        return None if self.request_bytes is None else self.rate / self.request_bytes

    @property
    def small_reads(self) -> bool:
        return self.request_bytes is not None and self.request_bytes < FILE_IO_BYTES


def format_request(size_bytes: float) -> str:
    """A read's size in the units it was likely written in: '10 kB', '16 MiB'."""
    return format_bytes(size_bytes, binary=size_bytes % 1024 == 0)


def read_request_bytes(sample_bytes: float, packed: bool, shard_bytes: float) -> float:
    """Bytes per GET: a sample when each is its own object, else a range of a shard."""
    return min(shard_bytes, GET_RANGE_BYTES) if packed else sample_bytes


@dataclass
class TierOption:
    tier: str  # blob | nvme | lustre | netapp | files
    name: str
    size_bytes: float | None
    deliverable: float | None  # bytes/s to the whole job; None when no figure is published
    limited_by: str
    stall_per_step_s: float | None
    fits: bool
    staging_s: float = 0.0
    staging_on_gpu_vms: bool = False
    price_per_hour: float | None = None  # storage only, $/h while provisioned
    sku: str | None = None
    notes: list[str] = field(default_factory=list)
    limit: Limit = Limit.UNKNOWN
    unknown: list[str] = field(default_factory=list)  # figures no source publishes

    def lacks(self, figure: str) -> None:
        """Record a figure this tier has no published value for."""
        if figure not in self.unknown:
            self.unknown.append(figure)

    @property
    def measure(self) -> str | None:
        """How to measure what it lacks: the VMs' NVMe feeds --measured; the rest an override."""
        if not self.unknown:
            return None
        return MEASURE_STORAGE if self.tier == "nvme" else MEASURE_SHARED


def usable_rate(need: DataNeed, vm: VmSize) -> float:
    """The rate worth provisioning a shared tier for: what the job needs, but no more than the
    VMs' frontend NICs can take in."""
    return min(need.rate, need.nodes * vm.frontend_nic)


def stall(need: DataNeed, deliverable: float | None) -> float | None:
    if deliverable is None:
        return None
    if deliverable <= 0:
        return math.inf
    return max(0.0, need.bytes_per_step / deliverable - need.ideal_step_s)


round_up = lustre.round_up
lustre_rated = lustre.rated


def lustre_size(capacity: float, throughput: float, sku: LustreSku, delivered: float) -> float:
    """Smallest size on the SKU's step that holds ``capacity`` and delivers ``throughput`` at a
    fixed delivered share (lustre.size_for follows the published share by size instead)."""
    by_throughput = throughput / (lustre_rated(TIB, sku) * delivered) * TIB
    return round_up(max(capacity, by_throughput, sku.min_size), sku.step)


def blob_egress(cat: Catalog, tier: str, accounts: int) -> float | None:
    egress = cat.blob[tier].egress
    return None if egress is None else egress * accounts


def blob_request_cap(
    cat: Catalog, tier: str, accounts: int, request_bytes: float | None
) -> float | None:
    """Bytes/s the account request limit allows at this GET size. The per-blob limit (3,000/s
    for a block blob) does not bind: a sample object is read once an epoch, a shard by one
    loader at a time."""
    per_s = cat.blob[tier].requests_per_s
    return None if per_s is None or request_bytes is None else per_s * accounts * request_bytes


def blob_read_rate(
    cat: Catalog, tier: str, accounts: int, request_bytes: float | None = None
) -> float | None:
    """What Blob can send: account egress, or less when the request limit binds."""
    rate, _, _ = _cap(
        [
            (Limit.EGRESS, "egress", blob_egress(cat, tier, accounts)),
            (Limit.REQUESTS, "requests", blob_request_cap(cat, tier, accounts, request_bytes)),
        ]
    )
    return rate


def _unchecked_requests(option: TierOption, need: DataNeed) -> None:
    """A tier with no published IOPS figure: say the small-read rate was not checked."""
    if need.small_reads:
        option.notes.append(
            f"{need.requests_per_s:,.0f} reads/s of {format_request(need.request_bytes or 0)}: "
            "no published IOPS figure for this tier, so the request rate is not checked"
        )


Cap = tuple[Limit, str, float | None]


def _cap(caps: list[Cap]) -> tuple[float | None, str, Limit]:
    """The lowest known cap: (rate, its words, its kind); (None, ..., UNKNOWN) when none is."""
    known = [(value, words, kind) for kind, words, value in caps if value is not None]
    if not known:
        return None, "no published figure", Limit.UNKNOWN
    value, words, kind = min(known, key=lambda c: c[0])
    return value, words, kind
