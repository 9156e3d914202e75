"""For each storage and network need: the option chosen, its size, the reason in numbers, and
what to change. Warnings also go to the plan's top-level list so they are never missed."""

from __future__ import annotations

from ..catalog import Catalog, VmSize
from ..units import format_bytes as fb
from ..units import format_rate as fr
from . import lustre
from ._advice_network import interconnect_advice
from ._format import duration as fd
from ._format import gpus, pct
from .facts import MEASURE_SHARED, MEASURE_STORAGE, Limit, ReadPattern
from .inference import COLD_START_TARGET_S
from .result import Plan, Recommendation

# Below this a plan says so: Llama 3 reported > 90 % effective training time at 16,384 GPUs.
LOW_GOODPUT = 0.90


_pct = pct


def recommendations(
    plan: Plan, cat: Catalog, vm: VmSize, warnings: list[str]
) -> list[Recommendation]:
    recs = []
    if plan.interconnect:
        recs.append(interconnect_advice(plan, vm, cat))
    if plan.data:
        recs.append(_training_data(plan, cat, vm))
    if plan.checkpoints:
        recs.append(_checkpoints(plan, cat))
    if plan.step:
        recs.append(_step(plan, vm))
    if plan.inference:
        recs.append(_model_cache(plan))
    recs.extend(_scratch_bulk_team(plan, vm, cat))
    for rec in recs:
        warnings.extend(rec.warnings)
    if plan.cost.unknown:
        warnings.append(
            "cost incomplete, no price for: "
            + "; ".join(plan.cost.unknown)
            + " (override in a catalog file or refresh with `stoker catalog prices --refresh`)"
        )
    return recs


def _checkpoints_held(plan: Plan) -> float:
    """Bytes of checkpoints the data's Lustre was sized to keep (see model.data_plan)."""
    ck = plan.checkpoints
    return ck.size_bytes * ck.keep if ck else 0.0


def _training_data(plan: Plan, cat: Catalog, vm: VmSize) -> Recommendation:
    d = plan.data
    assert d is not None
    ch = d.chosen
    known = ch.stall_per_step_s is not None
    stall = ch.stall_per_step_s or 0.0
    delivers = fr(ch.deliverable_bps) if ch.deliverable_bps else "unknown"
    waits = (
        f"stall {fd(stall)} per step"
        if known
        else f"stall unknown: no published figure for {', '.join(ch.unknown)}"
    )
    if plan.kind == "data-prep":
        need = "data-prep throughput"
        reason = (
            f"reads and writes {fb(d.bytes_per_step, binary=False)} in "
            f"{fd(d.bytes_per_step / d.required_bps)}: "
            f"needs {fr(d.required_bps)}; {ch.name} delivers {delivers}, limited by "
            f"{ch.limited_by}; " + (f"overrun {fd(stall)}" if known else waits)
        )
    else:
        need = "high-throughput training data"
        reason = (
            f"needs {fr(d.required_bps)} for {_pct(d.au_target)} accelerator utilization "
            f"({fr(d.required_full_bps)} never to wait; {fb(d.bytes_per_step, binary=False)} per "
            f"step); {_count(d.requests_per_s)} reads/s, {d.read_as}; "
            f"{ch.name} delivers {delivers}, limited by {ch.limited_by}; {waits}"
            + (f" (AU {_pct(d.au)})" if d.au is not None else "")
        )
    rec = Recommendation(
        need,
        ch.name,
        fb(ch.size_bytes) if ch.size_bytes else "-",
        reason + ("; " + "; ".join(ch.notes) if ch.notes else ""),
    )
    if not known:
        rec.warnings.append(
            f"{ch.name} has no published figure for {', '.join(ch.unknown)}, so the plan "
            "cannot say whether the GPU waits on data: measure it with "
            + (ch.measure or MEASURE_STORAGE)
        )
    elif ch.unknown:  # a rate is known (the NICs, say), but a cap before it may be lower
        rec.warnings.append(
            f"{ch.name} delivers at most {delivers} here; no figure is published for "
            f"{', '.join(ch.unknown)}, which may cap it sooner: measure it with "
            + (ch.measure or MEASURE_STORAGE)
        )
    if ch.tier == "lustre" and ch.size_bytes and ch.sku in cat.lustre:
        sku = cat.lustre[ch.sku]
        held = d.dataset_bytes + _checkpoints_held(plan)
        by_capacity = lustre.round_up(max(held, sku.min_size), sku.step)
        delivered = lustre.delivered(by_capacity, sku, cat.lustre_common)
        usable = min(d.required_bps, plan.nodes * vm.frontend_nic)  # as datapath sized it
        if delivered < usable:
            rec.warnings.append(
                f"Lustre sized for capacity ({fb(by_capacity)}) delivers "
                f"{_pct(delivered / usable)} of the throughput the VMs can use: "
                f"sized for throughput instead, {fb(ch.size_bytes)}"
            )
    if ch.staging_s > 3600:
        where = (
            "the GPU VMs idle meanwhile: stage while they are being provisioned"
            if ch.staging_on_gpu_vms
            else "start it before the VMs"
        )
        rec.warnings.append(f"staging will take {fd(ch.staging_s)}: {where}")
    if plan.step and stall > max(d.stall_budget_s, 0.01 * plan.step.total_s):
        better = [
            o
            for o in d.options
            if o.fits and o.stall_per_step_s is not None and o.stall_per_step_s < stall
        ]
        hint = (
            f"; {better[0].name} would stall {fd(better[0].stall_per_step_s or 0)}"
            if better
            else ""
        )
        rec.warnings.append(
            f"the GPU waits {fd(stall)} per step on data "
            f"({_pct(stall / plan.step.total_s)} of the step; AU "
            f"{_pct(d.au or 0)} against a target of {_pct(d.au_target)}){hint}"
        )
    if stall > 0 and ch.limit.request_bound:
        fix = (
            "pack the samples into shards (`stoker shards write`, then data.packed = true)"
            if d.read_pattern is ReadPattern.PER_SAMPLE
            else "read larger ranges (a larger data.shard_size)"
        )
        accounts = ", spread the data over more accounts (data.blob_accounts)"
        rec.warnings.append(
            f"{ch.name} is capped by its request rate ({ch.limited_by}) at "
            f"{_count(d.requests_per_s)} reads/s needed: {fix}"
            + (accounts if ch.tier == "blob" else "")
            + ", or choose a faster tier (data.tier)"
        )
    if plan.kind == "data-prep" and stall > 0:
        asked = d.bytes_per_step / d.required_bps
        by_account = ch.tier == "blob" and ch.limit in (Limit.EGRESS, Limit.REQUESTS)
        more = "Blob accounts (data.blob_accounts)" if by_account else "VMs"
        rec.warnings.append(
            f"data-prep takes {fd(asked + stall)}, not the {fd(asked)} of run.length: "
            f"{ch.name} delivers {delivers}, limited by {ch.limited_by}; add {more}, "
            "or allow a longer run.length"
        )
    if not ch.fits:
        rec.warnings.append(f"{ch.name} cannot hold the data: " + "; ".join(ch.notes))
    return rec


def _count(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _checkpoints(plan: Plan, cat: Catalog) -> Recommendation:
    ck = plan.checkpoints
    assert ck is not None
    durable = "" if ck.tier == "blob" else f", durable on Blob after {fd(ck.durable_s)}"
    streams = f"{ck.writer_streams:,} writer stream{'s' if ck.writer_streams > 1 else ''}" + (
        f" of at most {fr(ck.stream_write_bps)} each" if ck.stream_write_bps else ""
    )
    reason = (
        f"{fb(ck.size_bytes, binary=False)} written in {fd(ck.write_s)} from "
        f"{ck.writer_vms} VM{'s' if ck.writer_vms > 1 else ''}, {streams} "
        f"({ck.writers}){durable}; "
        f"{ck.mode} save blocks {fd(ck.blocking_s)}; job MTBF {fd(ck.job_mtbf_s)} -> "
        f"every {fd(ck.interval_s)} ({ck.interval_basis}); goodput {_pct(ck.goodput)} "
        f"(Llama 3 reported > {_pct(cat.reliability.effective_training_fraction)} at 16,384 GPUs)"
    )
    tier = {
        "nvme": "local NVMe, then Blob in the background",
        "lustre": "Managed Lustre, exported to Blob",
        "netapp": "Azure NetApp Files",
        "blob": "Blob",
    }[ck.tier]
    size = f"{fb(ck.size_bytes, binary=False)} each"
    if ck.volume:
        tier = f"{ck.volume.name} of its own, copied to Blob"
        size += f"; {fb(ck.volume.size_bytes or 0)} volume"
    rec = Recommendation("checkpoints", f"{tier}, every {fd(ck.interval_s)}", size, reason)
    # An unpublished stream rate matters where few streams write: fewer than one per GPU.
    if ck.unknown and ck.writer_streams < ck.writer_vms * cat.vm[plan.vm_size].gpus:
        rec.warnings.append(
            f"checkpoint write time {fd(ck.write_s)} is a lower bound: no published figure for "
            f"{', '.join(ck.unknown)}; measure it with "
            + (MEASURE_STORAGE if ck.tier == "nvme" else MEASURE_SHARED)
        )
    if ck.interval_set_s is not None and ck.interval_set_s < ck.interval_s:
        safe = "one step" if ck.mode == "sync" else "a save until it is safe to restart from"
        rec.warnings.append(
            f"checkpoints.interval {fd(ck.interval_set_s)} is shorter than {safe} "
            f"({fd(ck.interval_s)}): saves would pile up, so the plan checkpoints every "
            f'{fd(ck.interval_s)}; set the interval to "auto" or at least that'
        )
    if ck.interval_set_s is not None:
        if ck.goodput_at_optimal - ck.goodput >= 0.005:
            rec.warnings.append(
                f"checkpoint every {fd(ck.optimal_interval_s)}, not "
                f"{fd(ck.interval_s)}: goodput {_pct(ck.goodput_at_optimal)} "
                f"instead of {_pct(ck.goodput)}"
            )
    if ck.goodput < LOW_GOODPUT:
        rec.warnings.append(
            f"goodput is only {_pct(ck.goodput)}: with a failure every {fd(ck.job_mtbf_s)} "
            f"(reliability.gpu_mtbf / {gpus(plan.gpus)}), checkpoints, lost work and "
            f"{fd(ck.restart_s)} restarts eat the rest; split the job or use fewer GPUs, "
            "shorten reliability.restart_time, or checkpoint faster (async, a faster tier)"
        )
    if ck.tier != "blob" and ck.durable_s > ck.interval_s:
        rec.warnings.append(
            f"the copy to Blob takes {fd(ck.durable_s)}, longer than the "
            f"{fd(ck.interval_s)} interval: upload one checkpoint in "
            f"{int(ck.durable_s // ck.interval_s) + 1}"
        )
    return rec


def _step(plan: Plan, vm: VmSize) -> Recommendation:
    st, run = plan.step, plan.run
    assert st is not None and run is not None
    split = ", ".join(
        f"{name} {fd(v)}"
        for name, v in (
            ("compute", st.compute_s),
            ("exposed comm", st.exposed_comm_s),
            ("data stall", st.data_stall_s),
            ("checkpoint", st.checkpoint_s),
        )
        if v is not None
    ) + ("" if st.data_stall_s is not None else ", data stall unknown")
    useful = _pct(run.effective_training_fraction)
    rec = Recommendation(
        "step time and GPU utilization",
        f"{_pct(st.gpu_utilization)} busy",
        f"{fd(st.total_s)} per step",
        f"{split}; {useful} of wall clock is useful training after failures and restarts"
        + _model_parallel_words(plan),
    )
    if run.steps_asked and run.steps < run.steps_asked * (1 - 1e-9):
        rec.warnings.append(_cut_short(plan))
    if plan.gpus_idle:
        paid = plan.nodes * vm.gpus
        rec.warnings.append(
            f"the layout (dp x tp x pp) uses {paid - plan.gpus_idle} of the {paid} GPUs on "
            f"{plan.nodes} VM(s): {plan.gpus_idle} sit idle and are paid for (counted in idle "
            "GPU time); leave workload.dp unset to derive it, or give fewer nodes or gpus"
        )
    return rec


def _model_parallel_words(plan: Plan) -> str:
    mp = plan.interconnect.model_parallel if plan.interconnect else None
    if mp is None or plan.step is None:
        return ""
    if not mp.modelled:
        return f"; {mp.note}"
    return (
        f"; tensor/pipeline/expert-parallel traffic and the pipeline bubble add "
        f"{fd(plan.step.model_parallel_s)} per step (in exposed comm: tp {fd(mp.tp_s)}, pp "
        f"{fd(mp.pp_s)} + bubble {fd(mp.pp_bubble_s)}, ep {fd(mp.ep_s)})"
    )


def _cut_short(plan: Plan) -> str:
    """run.length caps the run: say how much of what was asked fits."""
    run, d = plan.run, plan.data
    assert run is not None and run.steps_asked and d is not None
    done = f"{run.steps:,.0f} of the {run.steps_asked:,.0f} steps asked by {run.asked_by}"
    if run.asked_by == "workload.epochs" and d.dataset_bytes:
        epochs = run.steps * d.bytes_per_step / d.dataset_bytes
        done += f" ({epochs:.2g} of {d.epochs:g} epochs)"
    if run.steps <= 0:  # not one step fits: no rate to scale the whole run by
        return (
            f"run.length {fd(run.wall_s)} fits none of the {run.steps_asked:,.0f} steps asked by "
            f"{run.asked_by}: one step takes longer; raise or drop run.length, or add VMs"
        )
    need = fd(run.wall_s * run.steps_asked / run.steps)
    return (
        f"run.length {fd(run.wall_s)} fits only {done}: the whole run needs about {need}; "
        "raise or drop run.length, add VMs, or ask for less training"
    )


def _model_cache(plan: Plan) -> Recommendation:
    inf = plan.inference
    assert inf is not None
    names = {
        "blob": "Blob, read directly",
        "files": "Azure Files premium share",
        "netapp": "Azure NetApp Files Premium",
        "nvme": "local NVMe (warm restart)",
    }
    names["files"] += f" of {fb(inf.files_share_bytes)}"
    names["netapp"] += f" of {fb(inf.netapp_volume_bytes)}"
    times = "; ".join(f"{names[k]} {fd(v)}" for k, v in inf.cold_start_s.items())
    sharing = (
        f"; the {inf.replicas_per_vm} replicas on each VM share its frontend NIC and NVMe"
        if inf.replicas_per_vm > 1
        else ""
    )
    rec = Recommendation(
        "model cache for inference",
        names[inf.chosen],
        f"{fb(inf.model_bytes, binary=False)} model x {inf.replicas} replicas",
        f"cold start with every replica loading at once (shared caches sized to load the fleet "
        f"in {fd(COLD_START_TARGET_S)}){sharing}: {times}; keep a copy on each VM's NVMe for "
        "restarts (stoker cache pull)",
    )
    if inf.replicas > inf.replicas_that_fit:
        per_vm = inf.replicas_that_fit // plan.nodes
        rec.warnings.append(
            f"{inf.replicas} replicas of a {fb(inf.model_bytes, binary=False)} model need "
            f"{fb(inf.replicas_per_vm * inf.model_bytes, binary=False)} of GPU memory per VM "
            f"for the weights alone; a VM has {fb(inf.vm_gpu_memory_bytes, binary=False)}: "
            + (
                f"at most {inf.replicas_that_fit} replicas fit on {plan.nodes} VM"
                f"{'s' if plan.nodes > 1 else ''} ({per_vm} per VM), before any KV cache"
                if per_vm
                else "one replica does not fit on one VM; spread it over VMs or quantize"
            )
        )
    return rec


def _scratch_bulk_team(plan: Plan, vm: VmSize, cat: Catalog) -> list[Recommendation]:
    nvme = Recommendation(
        "fast scratch",
        "local NVMe",
        f"{fb(vm.local_nvme)} per VM",
        (f"{fr(vm.nvme_read)} read per VM" if vm.nvme_read else "no published NVMe rate")
        + "; wiped when the VM is deallocated",
    )
    blob = cat.blob["standard"]
    price = (
        f"${blob.price_hot_gb_month}/GB-month hot, ${blob.price_cold_gb_month} cold"
        if blob.price_hot_gb_month
        else "no public price in the catalog"
    )
    bulk = Recommendation(
        "cheap bulk / cold data",
        "Blob standard (hot for the run, cool or cold after)",
        "-",
        f"the cold pool: {price}; egress {fr(blob.egress or 0)} per account",
    )
    anf = cat.netapp["Premium"]
    team = Recommendation(
        "shared team storage",
        anf.name,
        f"from {fb(anf.min_size)}",
        f"{fr(anf.throughput_per_tib)} per TiB, POSIX with snapshots, "
        "for home directories, code and small checkpoints",
    )
    return [nvme, bulk, team]
