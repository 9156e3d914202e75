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

from ..catalog import Catalog, VmSize
from ..units import format_bytes
from . import lustre
from .facts import MEASURE_STORAGE, Limit
from .result import TierChoice
from .tiers import (  # noqa: F401  (re-exported: the data path's public pieces)
    FILE_IO_BYTES,
    GET_RANGE_BYTES,
    GIB,
    MIB,
    NVME_USABLE,
    TIB,
    Cap,
    DataNeed,
    TierOption,
    _cap,
    _unchecked_requests,
    blob_egress,
    blob_read_rate,
    blob_request_cap,
    format_request,
    lustre_rated,
    lustre_size,
    read_request_bytes,
    round_up,
    stall,
    usable_rate,
)
from .volumes import files_iops, files_option, files_throughput, netapp_option  # noqa: F401


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
    largest = lustre.max_on_request(sku, common)
    if size > largest:
        option.notes.append(f"above the largest {sku.name} Azure offers ({format_bytes(largest)})")
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

    fed = [o for o in options if o.fits and stall_of(o) <= allowed_stall(ideal_step_s, au_target)]
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
            f"{', '.join(o.unknown) or 'it'}: measure it with {o.measure or MEASURE_STORAGE}"
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
        measure=option.measure,
    )
