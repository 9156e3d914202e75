"""Where checkpoints go, how long they block, how often to take them, and the goodput that buys.

Candidates are tried in order of cost (local NVMe comes with the VM, then Blob, then a Managed
Lustre file system); a dearer tier is chosen only when it buys half a point of goodput or more.

A checkpoint is written by some number of writer processes (``checkpoints.writers``: one
``torch.save``, one per VM, or one per GPU that holds state), and each stream has its own limit:
the write rate is the least of the tier's rate, the writing VMs' NICs or NVMe, and streams x
one stream's rate from the catalog (where a source publishes one; otherwise the plan says so).
A lone torch.save is also held to one serialising stream's rate: measured on the VM, else the
catalog's published one.
"""

from __future__ import annotations

import dataclasses
import math

from ..catalog import Catalog
from ..errors import SpecError
from . import _renewal as rn
from . import datapath as dpth
from . import lustre
from . import reliability as rel
from .facts import Limit
from .result import CheckpointPlan, DataPlan, TierChoice
from .shape import Shape
from .spec import JobSpec

# Device-to-host copy per GPU for async snapshots: PCIe x16 nominal x 0.8 (derived):
# Gen5 (H100, H200, MI300X, GB200) 64 GB/s, Gen4 (A100) 32 GB/s.
_HOST_COPY_BPS = {"A100": 25.6e9}
_HOST_COPY_DEFAULT_BPS = 51.2e9


def checkpoint_size(spec: JobSpec) -> float:
    ck, w = spec.checkpoints, spec.workload
    if ck.size is not None:
        return ck.size
    if w.params is not None:
        return w.params * ck.bytes_per_param
    raise SpecError("checkpoints.size: give the checkpoint size, or workload.params to derive it")


def checkpoint_writers(spec: JobSpec, s: Shape) -> tuple[int, int, str]:
    """(ranks, VMs, why) that write one checkpoint. FSDP shards the state over every rank. DDP
    replicates it, so one replica's tp x pp ranks write it whole (as DCP deduplicates it, or
    rank 0 with torch.save; assumed), from as few VMs as hold those ranks."""
    w = spec.workload
    if w.sharding == "fsdp":
        ranks, why = s.gpus_used, "FSDP: each rank writes its shard"
    else:
        ranks = w.tp * w.pp
        who = "rank writes" if ranks == 1 else f"{ranks} ranks write"
        why = f"DDP: one replica's {who} the whole state, assumed"
    return ranks, min(s.nodes, math.ceil(ranks / s.vm.gpus)), why + "; workload.sharding"


def writer_streams(spec: JobSpec, s: Shape) -> tuple[int, int, str]:
    """(streams, VMs, why): writer processes at once and the VMs they run on."""
    ranks, vms, why = checkpoint_writers(spec, s)
    mode = spec.checkpoints.writers
    if mode == "single":
        return 1, 1, "one writer process (a single torch.save); checkpoints.writers"
    if mode == "per_vm":
        return vms, vms, f"one writer process per VM, {vms} VMs ({why}); checkpoints.writers"
    return ranks, vms, why


def _serialising(spec: JobSpec) -> bool:
    """One writer process is a ``torch.save``: it pickles the state and copies every tensor
    through one stream and the page cache. More writers are raw-buffer writers (DCP, stoker's
    format): each writes its tensors' bytes as they lie."""
    return spec.checkpoints.writers == "single"


TORCH_SAVE_UNKNOWN = (
    "one torch.save stream's rate (serialising: pickle, one stream, the page cache; the "
    "catalog's per-stream rates are raw-buffer writers'): measure it with `stoker bench "
    "single-writer FOLDER --record R` on the tier, then `stoker plan --measured R`"
)


def torch_save_rate(cat: Catalog, s: Shape) -> float | None:
    """One torch.save stream: the VM's measured rate (``--measured``), else the published one
    ([writers] in the catalog); None where neither is known."""
    return s.vm.torch_save_write or (cat.writers.torch_save_write if cat.writers else None)


def stream_rates(spec: JobSpec, cat: Catalog, s: Shape) -> dict[str, float | None]:
    """One writer stream's limit on each tier: the raw-buffer rate a source publishes, and for
    a lone torch.save also its serialising rate (``torch_save_rate``)."""
    raw = {
        "nvme": s.vm.nvme_stream_write,
        "lustre": cat.lustre_common.stream_write,
        "netapp": None,
        "blob": cat.blob[spec.data.blob_tier].stream_write,
    }
    cap = torch_save_rate(cat, s) if _serialising(spec) else None
    if cap is None:
        return raw
    return {tier: cap if per is None else min(per, cap) for tier, per in raw.items()}


# A volume sized for checkpoints alone aims to take one in this long.
CHECKPOINT_OWN_VOLUME_WRITE_S = 120.0
GOODPUT_WORTH_PAYING_FOR = 0.005


def checkpoint_plan(
    spec: JobSpec, cat: Catalog, s: Shape, data: DataPlan, step_s: float
) -> CheckpointPlan:
    """The checkpoint tier with the best goodput (or the one the spec names)."""
    size = checkpoint_size(spec)
    streams, vms, _ = writer_streams(spec, s)
    nics = vms * s.vm.frontend_nic  # only the VMs that hold writing ranks send
    blob = cat.blob[spec.data.blob_tier]
    blob_in = blob.ingress * spec.data.blob_accounts if blob.ingress else None
    to_blob = min(nics, blob_in) if blob_in else nics
    # A Lustre the data already uses takes the checkpoints too (data_plan sized it for them);
    # otherwise the checkpoints get a volume of their own, sized to write one in 2 minutes.
    own = dpth.DataNeed(size, CHECKPOINT_OWN_VOLUME_WRITE_S, size * spec.checkpoints.keep, vms)
    volumes = {
        "lustre": dpth.as_choice(dpth.cheapest_lustre(own, s.vm, cat, to_blob, write=True)),
        "netapp": dpth.as_choice(dpth.netapp_option(own, s.vm, cat, "Ultra")),
    }
    lustre_writes = volumes["lustre"].deliverable_bps
    if data.chosen.tier == "lustre":
        volumes["lustre"] = data.chosen
        lustre_writes = _lustre_writes(cat, data.chosen)
    common = cat.lustre_common
    stream = stream_rates(spec, cat, s)
    unpublished = {
        "nvme": f"one writer's rate to {s.vm.family} local NVMe",
        "lustre": "one writer's rate to Managed Lustre",
        "netapp": "one writer's rate to Azure NetApp Files",
        "blob": f"one writer's rate to {blob.name} (published: a block blob up to the account's)",
    }

    no_save_rate = _serialising(spec) and torch_save_rate(cat, s) is None
    serialising = [TORCH_SAVE_UNKNOWN] if no_save_rate else []

    def rate(tier: str, caps: list[dpth.Cap]) -> tuple[float | None, Limit, list[str]]:
        per = stream[tier]
        caps = [*caps, (Limit.STREAMS, "streams", None if per is None else streams * per)]
        value, _, kind = dpth._cap(caps)
        return value, kind, ([] if per is not None else [unpublished[tier]]) + serialising

    write = {
        "nvme": rate(
            "nvme", [(Limit.MEDIA, "nvme", vms * s.vm.nvme_write if s.vm.nvme_write else None)]
        )
        if s.vm.nvme_write
        else (None, Limit.UNKNOWN, [f"{s.vm.family} local NVMe write rate"]),
        "lustre": rate(
            "lustre", [(Limit.PROVISIONED, "lustre", lustre_writes), (Limit.NIC, "nic", nics)]
        ),
        "netapp": rate(
            "netapp",
            [
                (Limit.PROVISIONED, "netapp", volumes["netapp"].deliverable_bps),
                (Limit.NIC, "nic", nics),
            ],
        ),
        "blob": rate("blob", [(Limit.EGRESS, "blob ingress", blob_in), (Limit.NIC, "nic", nics)]),
    }
    upload = {
        "nvme": to_blob,
        "lustre": min(to_blob, common.hsm_export_rate),
        "netapp": to_blob,
        "blob": None,
    }
    tier = spec.checkpoints.tier
    if tier == "auto":
        candidates = [t for t in ("nvme", "blob", "lustre") if write[t][0]]
        plans = [
            _checkpoint_on(spec, cat, s, t, size, write[t], upload[t], step_s) for t in candidates
        ]
        # Candidates are in order of cost (NVMe comes with the VM); a dearer tier must buy at
        # least half a point of goodput to be chosen.
        best = plans[0]
        for p in plans[1:]:
            if p.goodput >= best.goodput + GOODPUT_WORTH_PAYING_FOR:
                best = p
    elif write[tier][0] is None:
        raise SpecError(
            f"checkpoints.tier: no published write rate for {s.vm.family} local "
            "NVMe; choose lustre, netapp, blob or auto"
        )
    else:
        best = _checkpoint_on(spec, cat, s, tier, size, write[tier], upload[tier], step_s)
    if best.tier in volumes and data.chosen.tier != best.tier:
        # Staging and stall describe a data tier; a checkpoint volume has neither.
        best.volume = dataclasses.replace(volumes[best.tier], staging_s=0.0, stall_per_step_s=None)
    return best


def _lustre_writes(cat: Catalog, choice: TierChoice) -> float | None:
    """What the data's Lustre delivers to writes: its size on the published write curve."""
    if choice.sku not in cat.lustre or not choice.size_bytes:
        return choice.deliverable_bps
    return lustre.delivered(choice.size_bytes, cat.lustre[choice.sku], cat.lustre_common, True)


def _checkpoint_on(
    spec: JobSpec,
    cat: Catalog,
    s: Shape,
    tier: str,
    size: float,
    write: tuple[float | None, Limit, list[str]],
    upload_bps: float | None,
    step_s: float,
) -> CheckpointPlan:
    ck = spec.checkpoints
    write_bps, write_limit, unknown = write
    assert write_bps is not None  # tiers without a write rate are not candidates
    write_s = size / write_bps
    durable_s = write_s + (size / upload_bps if upload_bps else 0.0)
    # A failed VM takes its NVMe with it: only the copy on Blob can restart the job. Lustre,
    # NetApp and Blob survive the VM.
    recoverable_s = durable_s if tier == "nvme" else write_s
    if ck.mode == "sync":
        blocking, in_flight = write_s, recoverable_s - write_s
    else:
        host_bw = ck.host_copy_bw_per_gpu or next(
            (bw for gpu, bw in _HOST_COPY_BPS.items() if gpu in s.vm.gpu), _HOST_COPY_DEFAULT_BPS
        )
        # Each writing rank copies its part to host memory, all at once.
        ranks, _, _ = checkpoint_writers(spec, s)
        blocking, in_flight = size / ranks / host_bw, recoverable_s
    gpu_mtbf = spec.reliability.gpu_mtbf
    mtbf = rel.job_mtbf(cat.reliability.gpu_mtbf if gpu_mtbf is None else gpu_mtbf, s.gpus)
    restart = spec.reliability.restart_time
    # The next checkpoint cannot start before the previous one is safe, nor within one step.
    floor = max(step_s, in_flight if ck.mode == "async" else 0.0)
    # The renewal model's optimum (Daly 2006's exact form), never sooner than the floor.
    optimal = max(rn.optimal_interval(blocking, mtbf), floor)
    if ck.interval == "auto":
        interval, basis = optimal, "Young/Daly optimum"
        if optimal == floor and floor > step_s:
            basis = "as soon as the previous one is safe; Daly's optimum is shorter"
    elif ck.interval < floor:  # saves cannot start faster than the last one becomes safe
        interval, basis = floor, "raised from the spec's: the previous save is not safe sooner"
    else:
        interval, basis = ck.interval, "set in the spec"
    chosen = rn.renewal(interval, blocking, mtbf, restart, in_flight)
    best = rn.renewal(optimal, blocking, mtbf, restart, in_flight)
    ranks, _, _ = checkpoint_writers(spec, s)
    streams, vms, why = writer_streams(spec, s)
    per_stream = stream_rates(spec, cat, s)[tier]
    return CheckpointPlan(
        size,
        ck.keep,
        tier,
        ck.mode,
        write_bps,
        write_s,
        durable_s,
        blocking,
        interval,
        basis,
        optimal,
        mtbf,
        restart,
        1 - chosen.goodput,
        chosen.goodput,
        best.goodput,
        interval_set_s=None if ck.interval == "auto" else ck.interval,
        writer_ranks=ranks,
        writer_vms=vms,
        writers=why,
        writer_streams=streams,
        stream_write_bps=per_stream,
        write_limit=write_limit,
        unknown=unknown,
    )
