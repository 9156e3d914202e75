"""What each storage tier can deliver to the job, how long staging takes, and the data stall.

All pure: bytes, bytes/s and seconds in, numbers out. Reading overlaps compute (the loader
prefetches), so a step stalls only for the part of its read that outlasts the ideal step:
``stall = max(0, bytes_per_step / deliverable - ideal_step)``.

The data path is sized for an accelerator-utilization (AU) target, as MLPerf Storage judges a
storage system (AU >= 90 %): the GPU may wait up to ``ideal_step x (1 / AU - 1)`` per step, so
the rate it needs is ``AU x bytes_per_step / ideal_step``. A tier whose figure is not published
has no deliverable rate and no stall (``None``), and says what to measure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..catalog import Catalog, LustreSku, VmSize
from ..units import format_bytes
from . import lustre
from .facts import MEASURE_STORAGE, Limit
from .result import TierChoice

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
        """Record a figure this tier has no published value for (and so no rate, no stall)."""
        if figure not in self.unknown:
            self.unknown.append(figure)


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
    """Bytes/s the account request limit allows at this GET size. The per-blob limit (500/s)
    does not bind: a sample object is read once an epoch, a shard by one loader at a time."""
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


def blob_option(need: DataNeed, vm: VmSize, cat: Catalog, tier: str, accounts: int) -> TierOption:
    requests = cat.blob[tier].requests_per_s
    deliverable, words, kind = _cap(
        [
            (Limit.EGRESS, f"Blob account egress x {accounts}", blob_egress(cat, tier, accounts)),
            (
                Limit.REQUESTS,
                f"Blob requests ({requests or 0:,}/s per account x {accounts}, "
                f"{format_request(need.request_bytes or 0)} per GET)",
                blob_request_cap(cat, tier, accounts, need.request_bytes),
            ),
            (Limit.NIC, "the VMs' frontend NICs", need.nodes * vm.frontend_nic),
        ]
    )
    option = TierOption(
        "blob",
        cat.blob[tier].name,
        need.dataset_bytes,
        deliverable,
        words,
        stall(need, deliverable),
        True,
        limit=kind,
    )
    if cat.blob[tier].egress is None:  # the NICs cap it, but the account may cap it sooner
        option.lacks(f"{cat.blob[tier].name} account egress")
    return option


def nvme_option(need: DataNeed, vm: VmSize, cat: Catalog, blob_rate: float | None) -> TierOption:
    """Each VM stages only its own shard of the dataset onto its NVMe (stoker stage --rank)."""
    shard = need.dataset_bytes / need.nodes
    fits = shard <= vm.local_nvme * NVME_USABLE
    deliverable = None if vm.nvme_read is None else need.nodes * vm.nvme_read
    per_node_pull, _, _ = _cap(
        [
            (Limit.NIC, "nic", vm.frontend_nic),
            (Limit.EGRESS, "blob", None if blob_rate is None else blob_rate / need.nodes),
        ]
    )
    option = TierOption(
        "nvme",
        f"local NVMe ({vm.family})",
        shard,
        deliverable,
        "NVMe read rate" if deliverable else "no published NVMe read figure",
        stall(need, deliverable),
        fits,
        staging_s=shard / (per_node_pull or 1.0),
        staging_on_gpu_vms=True,
        price_per_hour=0.0,
        limit=Limit.MEDIA if deliverable else Limit.UNKNOWN,
    )
    if deliverable is None:
        option.lacks(f"{vm.family} local NVMe read rate")
    if not fits:
        option.notes.append(
            f"a VM's shard does not fit: needs {format_bytes(shard)} of "
            f"{format_bytes(vm.local_nvme * NVME_USABLE)} usable NVMe"
        )
    _unchecked_requests(option, need)
    return option


def lustre_option(
    need: DataNeed,
    vm: VmSize,
    cat: Catalog,
    sku_name: str,
    blob_rate: float | None,
    extra_capacity: float = 0.0,
    write: bool = False,
) -> TierOption:
    """A Managed Lustre of ``sku_name`` sized for capacity and the rate (reads, or ``write``s)."""
    sku, common = cat.lustre[sku_name], cat.lustre_common
    size = lustre.size_for(
        need.dataset_bytes + extra_capacity, usable_rate(need, vm), sku, common, write
    )
    rated = lustre_rated(size, sku)
    share = lustre.delivered_share(rated, common, write)
    deliverable, limit, kind = _cap(
        [
            (
                Limit.PROVISIONED,
                f"Lustre size x 2,000 MB/s per step x {100 * share:.1f} % delivered to "
                + ("writes" if write else "reads")
                + " (MLPerf Storage v3.0)",
                rated * share,
            ),
            (Limit.NIC, "the VMs' frontend NICs", need.nodes * vm.frontend_nic),
        ]
    )
    pull, _, _ = _cap([(Limit.PROVISIONED, "lustre", rated), (Limit.EGRESS, "blob", blob_rate)])
    price = None if sku.price_per_tib_hour is None else sku.price_per_tib_hour * size / TIB
    option = TierOption(
        "lustre",
        sku.name,
        size,
        deliverable,
        limit,
        stall(need, deliverable),
        size <= lustre.max_on_request(sku, common),
        staging_s=need.dataset_bytes / (pull or 1.0),
        price_per_hour=price,
        sku=sku_name,
        limit=kind,
    )
    by_capacity = round_up(max(need.dataset_bytes + extra_capacity, sku.min_size), sku.step)
    option.notes.append(
        f"sized by {'throughput' if size > by_capacity else 'capacity'}; "
        f"rated {rated / 1e9:.1f} GB/s nominal"
    )
    if size > lustre.max_on_request(sku, common):
        option.notes.append(
            f"above the largest {sku.name} Azure offers ({format_bytes(lustre.max_on_request(sku, common))})"
        )
    elif size > sku.max_size:
        option.notes.append("above the self-service maximum: ask Azure support for this size")
    _unchecked_requests(option, need)
    return option


def cheapest_lustre(
    need: DataNeed,
    vm: VmSize,
    cat: Catalog,
    blob_rate: float | None,
    extra_capacity: float = 0.0,
    write: bool = False,
) -> TierOption:
    """The SKU that meets capacity and throughput at the lowest price. Where the catalog has no
    Lustre prices, the one that overshoots least: rated throughput over the need plus size
    over the capacity needed (a throughput-bound job gets the fast tier, a capacity-bound one
    the dense tier)."""
    options = [
        lustre_option(need, vm, cat, name, blob_rate, extra_capacity, write) for name in cat.lustre
    ]
    fitting = [o for o in options if o.fits] or options
    if all(o.price_per_hour is not None for o in fitting):
        return min(fitting, key=lambda o: o.price_per_hour)  # type: ignore[arg-type,return-value]
    capacity = max(need.dataset_bytes + extra_capacity, 1.0)

    def overshoot(o: TierOption) -> float:
        rated = lustre_rated(o.size_bytes or 0.0, cat.lustre[o.sku or ""])
        return rated / max(usable_rate(need, vm), 1.0) + (o.size_bytes or 0.0) / capacity

    return min(fitting, key=overshoot)


def _shared_volume(
    need: DataNeed,
    vm: VmSize,
    tier: str,
    name: str,
    size: float,
    caps: list[Cap],
    max_size: float,
    price: float | None,
    sku: str,
) -> TierOption:
    """A NetApp volume or Files share: its own limits, capped by the VMs' NICs."""
    deliverable, limit, kind = _cap(
        [*caps, (Limit.NIC, "the VMs' frontend NICs", need.nodes * vm.frontend_nic)]
    )
    return TierOption(
        tier,
        name,
        size,
        deliverable,
        limit,
        stall(need, deliverable),
        need.dataset_bytes <= max_size,
        price_per_hour=price,
        sku=sku,
        limit=kind,
    )


def netapp_option(need: DataNeed, vm: VmSize, cat: Catalog, level: str) -> TierOption:
    lvl = cat.netapp[level]
    by_rate = usable_rate(need, vm) / lvl.throughput_per_tib * TIB
    size = min(max(need.dataset_bytes, by_rate, lvl.min_size), lvl.max_size)
    throughput = min(size / TIB * lvl.throughput_per_tib, lvl.max_throughput)
    price = None if lvl.price_per_tib_month is None else lvl.price_per_tib_month * size / TIB / 730
    option = _shared_volume(
        need,
        vm,
        "netapp",
        lvl.name,
        size,
        [(Limit.PROVISIONED, "volume size x MiB/s per TiB", throughput)],
        lvl.max_size,
        price,
        level,
    )
    _unchecked_requests(option, need)
    return option


def files_throughput(size_bytes: float, cat: Catalog, tier: str = "premium_v1") -> float:
    """Provisioned v1: 100 + 0.04 x GiB + 0.06 x GiB MiB/s, capped (ceil terms dropped)."""
    t = cat.files[tier]
    per_gib = t.throughput_per_gib or 0.0
    return min(t.base_throughput + per_gib * size_bytes / GIB, t.max_throughput)


def files_iops(size_bytes: float, cat: Catalog, tier: str = "premium_v1") -> float:
    """Provisioned v1: 3,000 + 1 IOPS per GiB, capped at 100,000."""
    t = cat.files[tier]
    return min(t.base_iops + (t.iops_per_gib or 0.0) * size_bytes / GIB, t.max_iops)


def files_option(need: DataNeed, vm: VmSize, cat: Catalog, tier: str = "premium_v1") -> TierOption:
    t = cat.files[tier]
    per_gib = t.throughput_per_gib or 0.0
    usable = usable_rate(need, vm)
    by_rate = (usable - t.base_throughput) / per_gib * GIB if per_gib else 0.0
    io = None if need.request_bytes is None else min(need.request_bytes, FILE_IO_BYTES)
    # Sized for the IOPS the reads need too, as for the throughput.
    by_iops = (usable / io - t.base_iops) / t.iops_per_gib * GIB if io and t.iops_per_gib else 0.0
    size = min(max(need.dataset_bytes, by_rate, by_iops, t.min_size), t.max_size)
    caps: list[Cap] = [
        (
            Limit.PROVISIONED,
            "share size (provisioned v1 formula)",
            files_throughput(size, cat, tier),
        )
    ]
    if io is not None:  # reading a dataset: IOPS and one file's rate may bind
        iops = files_iops(size, cat, tier)
        caps.append((Limit.IOPS, f"share IOPS ({iops:,.0f} of {format_request(io)})", iops * io))
        readers = need.nodes * vm.gpus
        if t.per_file_throughput:
            caps.append(
                (
                    Limit.PER_FILE,
                    f"one file's rate x {readers} readers (one per GPU, assumed)",
                    readers * t.per_file_throughput,
                )
            )
    price = None if t.price_per_gib_month is None else t.price_per_gib_month * size / GIB / 730
    return _shared_volume(need, vm, "files", t.name, size, caps, t.max_size, price, tier)


# Simplest first: read in place from Blob, then stage to the VMs' own NVMe, then a shared tier.
_PREFERENCE = ("blob", "nvme", "lustre", "netapp", "files")


def allowed_stall(ideal_step_s: float, au_target: float = 1.0) -> float:
    """Wait per step that still meets the AU target; never less than 1 % of the step."""
    return ideal_step_s * max(0.01, 1 / au_target - 1)


def choose(options: list[TierOption], ideal_step_s: float, au_target: float = 1.0) -> TierOption:
    """The simplest tier that fits and keeps the GPU fed (its stall within the AU target's
    budget, at least 1 % of the step); failing that, the one with the least stall. A simpler
    tier that lacks a published figure is named in the choice's notes, with what to measure."""

    def stall_of(o: TierOption) -> float:
        return math.inf if o.stall_per_step_s is None else o.stall_per_step_s

    fed = [
        o for o in options if o.fits and stall_of(o) <= allowed_stall(ideal_step_s, au_target)
    ]
    if fed:
        chosen = min(fed, key=lambda o: _PREFERENCE.index(o.tier))
    else:
        fitting = [o for o in options if o.fits] or options
        chosen = min(fitting, key=stall_of)
    simpler = [
        o
        for o in options
        if o.fits
        and o.stall_per_step_s is None
        and _PREFERENCE.index(o.tier) < _PREFERENCE.index(chosen.tier)
    ]
    for o in simpler:
        chosen.notes.append(
            f"{o.name} might feed the GPUs, but no figure is published for "
            f"{', '.join(o.unknown) or 'it'}: measure it with {MEASURE_STORAGE}"
        )
    return chosen


def as_choice(option: TierOption) -> TierChoice:
    """The JSON-facing copy of an option."""
    return TierChoice(
        option.tier,
        option.name,
        option.size_bytes,
        option.deliverable,
        option.limited_by,
        option.stall_per_step_s,
        option.fits,
        option.staging_s,
        option.staging_on_gpu_vms,
        option.price_per_hour,
        option.notes,
        limit=option.limit,
        sku=option.sku,
        unknown=list(option.unknown),
        measure=MEASURE_STORAGE if option.unknown else None,
    )
