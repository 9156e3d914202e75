"""The figures one simulated run needs, taken from the Plan, the spec and the catalog once.

The plan gives the step, the checkpoint cycle, the restart time and the job's failure rate;
what it does not expose (when a save becomes recoverable, how the fleet shares a tier at a
restart, the first epoch through Lustre's HSM) is worked out here from the same spec and
catalog, by the rules docs/design/plan-models.md states for the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..catalog import Catalog
from ..plan import JobSpec, Plan
from ..units import format_duration
from . import _tiers as tiers
from ._knobs import SimulateKnobs

# stoker's stores read in 16 MiB ranges (plan/datapath.py) and upload in 8 MiB blocks
# (stoker stage --block-size's default; assumed for checkpoint uploads too).
GET_BYTES = 16 * 2**20
PUT_BLOCK_BYTES = 8 * 2**20


@dataclass
class Inputs:
    gpus: int
    nodes: int
    duration_s: float
    compute_s: float
    base_step_s: float  # compute + exposed comm + the plan's data stall: a nominal step
    interval_s: float  # training seconds between saves
    blocking_s: float
    in_flight_s: float  # from the end of a save's blocking until a restart can use it
    restart_s: float  # the plan's: detect, reschedule, reload (as if each VM read alone)
    restart_contention_s: float  # more, when every VM loads the checkpoint at once
    load: tiers.RestartLoad | None
    restage_shard_bytes: float  # a swapped VM's data shard (data on local NVMe), else 0
    blob_bps: float | None
    vm_nic_bps: float
    upload_stall_per_cycle_s: float  # data stall a save's write and upload add each cycle
    hsm_stall_frac: float  # extra share of a step's time in the first epoch (HSM first reads)
    epoch_nominal_s: float  # nominal training seconds in one epoch
    first_reads_nominal_s: float  # nominal training seconds read through HSM the first time
    gpu_part_mtbf_s: float  # one GPU's mean time to a GPU failure
    node_part_mtbf_s: float  # one VM's mean time to a failure of its own (not a GPU's)
    knobs: SimulateKnobs
    plan_goodput: float
    plan_checkpoint_share: float
    plan_failure_share: float
    plan_gpu_busy: float
    job_mtbf_s: float
    notes: list[str] = field(default_factory=list)


def _blob_read_bps(spec: JobSpec, cat: Catalog, request_bytes: float) -> float | None:
    tier = cat.blob[spec.data.blob_tier]
    accounts = spec.data.blob_accounts
    caps = [
        None if tier.egress is None else tier.egress * accounts,
        None if tier.requests_per_s is None else tier.requests_per_s * accounts * request_bytes,
    ]
    known = [c for c in caps if c is not None]
    return min(known) if known else None


def _restart_load(
    plan: Plan, spec: JobSpec, cat: Catalog, nic: float, blob_bps: float | None
) -> tiers.RestartLoad:
    ck, nodes = plan.checkpoints, plan.nodes
    assert ck is not None and plan.data is not None
    fsdp = spec.workload.sharding == "fsdp"
    per_vm = ck.size_bytes / nodes if fsdp else ck.size_bytes  # DDP: every VM needs it whole
    fleet_nics = nodes * nic
    if ck.tier == "nvme":
        vm = _vm(cat, plan.vm_size)
        if fsdp:  # each VM's shard is on its own NVMe
            return tiers.RestartLoad(per_vm * nodes, per_vm, None, vm.nvme_read or nic)
        # DDP: only the writing VMs hold it; the rest read the copy on Blob at once
        readers = max(0, nodes - ck.writer_vms)
        shared = None if blob_bps is None else min(blob_bps, fleet_nics)
        return tiers.RestartLoad(per_vm * readers, per_vm, shared, nic, per_vm * readers)
    if ck.tier == "blob":
        shared = None if blob_bps is None else min(blob_bps, fleet_nics)
        return tiers.RestartLoad(per_vm * nodes, per_vm, shared, nic, per_vm * nodes)
    volume = ck.volume or plan.data.chosen
    shared = volume.deliverable_bps
    return tiers.RestartLoad(
        per_vm * nodes, per_vm, None if shared is None else min(shared, fleet_nics), nic
    )


def _vm(cat: Catalog, name: str):  # type: ignore[no-untyped-def]
    vm = cat.vm.get(name) or cat.vm.get(name.removeprefix("Standard_"))
    if vm is None:  # the plan already refused unknown sizes; a catalog without it is a bug
        raise KeyError(name)
    return vm


def build_inputs(
    plan: Plan, spec: JobSpec, cat: Catalog, knobs: SimulateKnobs, duration_s: float
) -> Inputs:
    ck, st, data = plan.checkpoints, plan.step, plan.data
    assert ck is not None and st is not None and data is not None
    notes: list[str] = []
    vm = _vm(cat, plan.vm_size)
    nic = vm.frontend_nic
    if data.chosen.stall_per_step_s is None:
        notes.append(f"{data.chosen.name}: no published read rate, so no data stall is modelled")
    planned_stall = st.data_stall_s or 0.0  # None: no published read rate (unknown)
    ideal = st.compute_s + st.exposed_comm_s
    base = ideal + planned_stall
    blob_bps = _blob_read_bps(spec, cat, GET_BYTES)
    upload_s = max(0.0, ck.durable_s - ck.write_s)
    # What the data reads draw at the plan's pace, and the flows they meet on shared limits.
    read_bps = min(data.required_bps, data.chosen.deliverable_bps or data.required_bps)
    windows: list[tiers.Window] = []
    write_factor = upload_factor = 1.0
    if knobs.contention:
        write_factor, upload_factor = _save_factors(plan, spec, cat, read_bps, nic)
        if ck.mode == "async":
            windows.append(tiers.Window("write", ck.write_s, write_factor))
        if upload_s > 0:
            windows.append(tiers.Window("upload", upload_s, upload_factor))
    write_s = ck.write_s / write_factor
    # A save can restart the job once written; on NVMe once its copy is on Blob, as a failed VM
    # takes its NVMe with it (the plan's rule).
    if ck.mode == "async":
        in_flight = write_s + (upload_s / upload_factor if ck.tier == "nvme" else 0.0)
    else:
        in_flight = (upload_s / upload_factor) if ck.tier == "nvme" else 0.0
    interval = ck.interval_s
    if ck.mode == "async" and in_flight > interval:
        notes.append(
            f"a save is safe only after {format_duration(in_flight)} with the data reads beside "
            f"it, so saves come every {format_duration(in_flight)}, not "
            f"{format_duration(interval)}"
        )
        interval = in_flight
    upload_stall = tiers.extra_stall_per_cycle_s(
        windows, data.bytes_per_step, read_bps, ideal, planned_stall, interval
    )
    load = _restart_load(plan, spec, cat, nic, blob_bps)
    contention = max(0.0, load.contended_s - load.baseline_s) if knobs.contention else 0.0
    shard = data.chosen.size_bytes or 0.0
    restage = shard if (knobs.restaging and data.chosen.tier == "nvme") else 0.0
    epoch = data.dataset_bytes / data.bytes_per_step * base if data.bytes_per_step else math.inf
    hsm_frac, first = 0.0, 0.0
    if data.chosen.tier == "lustre" and knobs.lustre_first_reads == "hsm":
        first_bps = min(
            x
            for x in (
                data.chosen.deliverable_bps,
                cat.lustre_common.hsm_export_rate,  # the same HSM path in (assumed)
                _blob_read_bps(spec, cat, data.request_bytes or GET_BYTES),
            )
            if x is not None
        )
        slowed = tiers.stall_s(data.bytes_per_step, first_bps, ideal)
        hsm_frac = max(0.0, slowed - planned_stall) / base
        first = min(1.0, data.epochs) * epoch
    mtbf = ck.job_mtbf_s
    gpu_mtbf = mtbf * plan.gpus  # the plan's job MTBF is the per-GPU figure over the GPUs
    share = knobs.gpu_failure_share
    # The plan's renewal split: kept training blocks C per interval; failures take the rest.
    blocking_share = ck.goodput * ck.blocking_s / ck.interval_s if ck.interval_s else 0.0
    return Inputs(
        gpus=plan.gpus,
        nodes=plan.nodes,
        duration_s=duration_s,
        compute_s=st.compute_s,
        base_step_s=base,
        interval_s=interval,
        blocking_s=ck.blocking_s,
        in_flight_s=in_flight,
        restart_s=ck.restart_s,
        restart_contention_s=contention,
        load=load,
        restage_shard_bytes=restage,
        blob_bps=blob_bps,
        vm_nic_bps=nic,
        upload_stall_per_cycle_s=upload_stall,
        hsm_stall_frac=hsm_frac,
        epoch_nominal_s=epoch,
        first_reads_nominal_s=first,
        gpu_part_mtbf_s=gpu_mtbf / share if share > 0 else math.inf,
        node_part_mtbf_s=gpu_mtbf * plan.nodes / (plan.gpus * (1 - share))
        if share < 1
        else math.inf,
        knobs=knobs,
        plan_goodput=ck.goodput,
        plan_checkpoint_share=blocking_share,
        plan_failure_share=max(0.0, 1 - ck.goodput - blocking_share),
        plan_gpu_busy=plan.run.effective_training_fraction if plan.run else 0.0,
        job_mtbf_s=mtbf,
        notes=notes,
    )


def _save_factors(
    plan: Plan, spec: JobSpec, cat: Catalog, read_bps: float, nic: float
) -> tuple[float, float]:
    """The share (0-1] the reads and a save's write, then its upload, each get where they meet:
    one Lustre or NetApp volume for data and checkpoints, one Blob account's request rate, or
    a writing VM's frontend NIC."""
    ck, data = plan.checkpoints, plan.data
    assert ck is not None and data is not None
    upload_bps = ck.size_bytes / (ck.durable_s - ck.write_s) if ck.durable_s > ck.write_s else 0.0
    writers = max(1, ck.writer_vms)
    write_f = upload_f = 1.0
    same_volume = data.chosen.tier == ck.tier and ck.tier in ("lustre", "netapp") and not ck.volume
    if same_volume:  # the export to Blob reads the same volume too
        write_f = tiers.share(data.chosen.deliverable_bps, read_bps, ck.write_bps)
        upload_f = tiers.share(data.chosen.deliverable_bps, read_bps, upload_bps)
    if data.chosen.tier == "blob":
        blob = cat.blob[spec.data.blob_tier]
        limit = (
            None if blob.requests_per_s is None else blob.requests_per_s * spec.data.blob_accounts
        )
        reads = read_bps / (data.request_bytes or GET_BYTES)
        if ck.tier == "blob":
            write_f = min(write_f, tiers.share(limit, reads, ck.write_bps / PUT_BLOCK_BYTES))
        upload_f = min(upload_f, tiers.share(limit, reads, upload_bps / PUT_BLOCK_BYTES))
    per_vm_read = read_bps / plan.nodes if data.chosen.tier != "nvme" else 0.0
    if ck.tier != "nvme":  # the write leaves the VM through its NIC
        write_f = min(write_f, tiers.share(nic, per_vm_read, ck.write_bps / writers))
    if ck.tier in ("nvme", "netapp"):  # the upload leaves through the NIC
        upload_f = min(upload_f, tiers.share(nic, per_vm_read, upload_bps / writers))
    return write_f, upload_f
