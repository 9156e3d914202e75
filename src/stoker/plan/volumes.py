"""Shared volumes sized for a job: an Azure NetApp Files volume and an Azure Files share, each
with its own limits, capped by the VMs' NICs. Pure."""

from __future__ import annotations

from ..catalog import Catalog, VmSize
from .facts import Limit
from .tiers import (
    FILE_IO_BYTES,
    GIB,
    TIB,
    Cap,
    DataNeed,
    TierOption,
    _cap,
    _unchecked_requests,
    format_request,
    stall,
    usable_rate,
)


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
