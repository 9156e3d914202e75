"""Inference serving: how fast many replicas can load one model, from each place it could live.

Cold start is the time for every replica, all starting at once, to read the model: each
replica is capped by its share of its VM's frontend NIC (replicas on one VM share it) and by its
share of the tier's throughput. The shared Files share and NetApp volume are both sized for the
same target, so their cold starts compare like for like.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..catalog import Catalog, VmSize
from ..errors import SpecError
from . import datapath as dpth
from .result import InferencePlan
from .spec import PRECISION_BYTES, JobSpec

# A shared model cache keeps a few versions side by side (the one serving, the one rolling out).
VERSIONS_KEPT = 3
# A shared cache is sized so that every replica starting at once has the model in this long.
COLD_START_TARGET_S = 300.0


def inference_plan(spec: JobSpec, cat: Catalog, vm: VmSize, nodes: int) -> InferencePlan:
    w = spec.workload
    if w.params is None:
        raise SpecError(
            "workload.params: an inference plan needs the model's parameter count "
            "(e.g. params = '70B')"
        )
    model = w.params * PRECISION_BYTES[w.precision]
    replicas = w.replicas or nodes
    # Replicas spread evenly over the VMs; those on one VM share its NIC and NVMe.
    vms = min(nodes, replicas)
    per_vm = math.ceil(replicas / nodes)
    blob = dpth.blob_egress(cat, spec.data.blob_tier, spec.data.blob_accounts)
    # Size the shared caches for the throughput of a fleet-wide cold start, not just capacity.
    fleet = dpth.DataNeed(replicas * model, COLD_START_TARGET_S, VERSIONS_KEPT * model, vms)
    files = dpth.files_option(fleet, vm, cat)
    netapp = dpth.netapp_option(fleet, vm, cat, "Premium")

    def per_replica(shared: float | None) -> float:
        nic = vm.frontend_nic / per_vm
        return nic if shared is None else min(nic, shared / replicas)

    cold = {
        "blob": model / per_replica(blob),
        "files": model / per_replica(files.deliverable),
        "netapp": model / per_replica(netapp.deliverable),
    }
    if vm.nvme_read:  # a restart on a VM that already holds the model
        cold["nvme"] = per_vm * model / vm.nvme_read
    shared = {k: v for k, v in cold.items() if k != "nvme"}
    inf = InferencePlan(
        model,
        replicas,
        cold,
        min(shared, key=shared.__getitem__),
        files.size_bytes or 0.0,
        netapp_volume_bytes=netapp.size_bytes or 0.0,
        replicas_per_vm=per_vm,
        replicas_that_fit=nodes * int(vm.gpus * vm.gpu_memory // model),
        vm_gpu_memory_bytes=vm.gpus * vm.gpu_memory,
    )
    inf.cache = cache_plan(inf, spec, cat, vm)  # what `stoker plan` shows of the shared cache
    return inf


@dataclass(frozen=True)
class CachePlan:
    """The shared model cache (an Azure Files premium share) for N replicas, with the figures it
    rests on. Cold starts with and without it: without, every replica downloads the model from
    Blob; with it, one warm-up pull (``stoker cache pull``) downloads it once, then every replica
    reads the share. Rates in bytes/s, times in seconds, the share's price in $/h."""

    replicas: int
    replicas_per_vm: int
    model_bytes: float
    blob_rate: float | None  # the Blob account's egress (None: no published figure)
    nic_rate: float  # one VM's frontend NIC
    share_bytes: float  # provisioned premium share (sized for the cold-start target)
    share_rate: float  # its throughput, provisioned v1 formula
    share_max_rate: float  # the most one premium share gives, whatever its size
    demand_rate: float  # what the replicas can take in at once: replicas x their NIC share
    warmup_s: float  # the one download: Blob -> one VM -> the share
    cold_start_without_s: float  # every replica from Blob at once
    cold_start_with_s: float  # every replica from the warm share at once
    blob_downloads_without: int  # model copies pulled from Blob
    blob_downloads_with: int
    share_usd_per_hour: float | None
    sources: tuple[str, ...]  # "figure: catalog source (where, date)"

    @property
    def first_start_with_s(self) -> float:
        """The first deployment: the warm-up, then the replicas from the share."""
        return self.warmup_s + self.cold_start_with_s

    @property
    def share_covers_demand(self) -> bool:
        return self.share_rate >= self.demand_rate


def cache_plan(inf: InferencePlan, spec: JobSpec, cat: Catalog, vm: VmSize) -> CachePlan:
    """The model cache for ``inf`` (the plan's InferencePlan); pure, from catalog figures."""
    from .volumes import files_throughput

    tier = cat.files["premium_v1"]
    share = max(inf.files_share_bytes, tier.min_size)
    share_rate = files_throughput(share, cat)
    nic_share = vm.frontend_nic / inf.replicas_per_vm
    blob = dpth.blob_egress(cat, spec.data.blob_tier, spec.data.blob_accounts)
    # One puller on one VM: its NIC, Blob's egress and the share's write rate all bound it.
    warm_rate = min(r for r in (vm.frontend_nic, blob, share_rate) if r is not None)
    price = None
    if tier.price_per_gib_month is not None:
        price = tier.price_per_gib_month * share / 2**30 / 730

    def cited(figure: str, entry: Any, field: str) -> str:
        key = entry.source_of(field)
        src = cat.sources[key]
        return f"{figure}: {key} ({src.where}, {src.date.isoformat()})"

    blob_entry = cat.blob[spec.data.blob_tier]
    return CachePlan(
        replicas=inf.replicas,
        replicas_per_vm=inf.replicas_per_vm,
        model_bytes=inf.model_bytes,
        blob_rate=blob,
        nic_rate=vm.frontend_nic,
        share_bytes=share,
        share_rate=share_rate,
        share_max_rate=tier.max_throughput,
        demand_rate=inf.replicas * nic_share,
        warmup_s=inf.model_bytes / warm_rate,
        cold_start_without_s=inf.cold_start_s["blob"],
        cold_start_with_s=inf.cold_start_s["files"],
        blob_downloads_without=inf.replicas,
        blob_downloads_with=1,
        share_usd_per_hour=price,
        sources=(
            cited("Files premium throughput and limits", tier, "throughput_per_gib"),
            cited("Blob egress", blob_entry, "egress"),
            cited("frontend NIC", vm, "frontend_nic"),
        ),
    )
