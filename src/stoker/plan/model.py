"""Join the pieces: job spec + catalog -> Plan. No I/O; everything here is arithmetic.

Order matters only where one answer feeds the next: the interconnect gives the exposed
communication, which sets the ideal step that the data path must keep up with; the checkpoint
blocking time sets the interval; all of them set the step split, the run length and the cost.
"""

from __future__ import annotations

import dataclasses
import math

from ..catalog import Catalog
from ..errors import SpecError
from ..units import format_bytes as fb
from ..units import format_duration as fd
from . import _renewal as rn
from . import datapath as dpth
from .bandwidth import bandwidth_plan, ethernet_plan
from .checkpoints import checkpoint_plan, checkpoint_size
from .cost import cost_plan
from .fabric import collective, exchange, fabric_options, gradient_bytes, run_shape
from .facts import FabricLayout, ReadPattern
from .inference import inference_plan
from .interconnect import layout, single_vm_busbw
from .recommend import recommendations
from .result import (
    CheckpointPlan,
    CostPlan,
    DataPlan,
    InterconnectPlan,
    Plan,
    RunPlan,
    StepPlan,
)
from .shape import Shape, canonical, shape
from .spec import JobSpec


def compute_step_s(spec: JobSpec, s: Shape) -> float:
    w = spec.workload
    if w.step_time is not None:
        return w.step_time
    tokens = w.global_batch * (w.seq_len or 0)
    return tokens / ((w.tokens_per_s_per_gpu or 1.0) * s.gpus_used)


def interconnect_plan(spec: JobSpec, cat: Catalog, s: Shape, compute_s: float) -> InterconnectPlan:
    """The exchange of the shape the job runs (fabric.run_shape: one fabric, a declared split
    past one scale set, or InfiniBand off), and past one scale set every other shape it could
    take; ``compute_s`` is the run shape's compute per step."""
    run = run_shape(spec, cat, s)
    ex = exchange(run.spec, cat, run.shape, compute_s)
    lay = layout(
        run.shape.vm, run.shape.nodes, run.shape.dp, spec.workload.tp, run.shape.boundary_vms
    )
    needs_ib = lay.domains > 1
    ethernet = run.layout is FabricLayout.FLAT_ETHERNET
    fabric = (
        "none needed: the job fits in one scale-up domain"
        if not needs_ib
        else (
            f"InfiniBand {s.vm.ib_links} x {s.vm.ib_rate * 8 / 1e9:.0f} Gb/s per VM"
            + (", GPUDirect RDMA" if s.vm.gpudirect_rdma else "")
            + (f", {FABRIC_WORDS[run.layout]}" if run.layout in FABRIC_WORDS else "")
            if s.vm.has_infiniband and not ethernet
            else (
                "frontend Ethernet only (this size has no InfiniBand)"
                if not s.vm.has_infiniband
                else "frontend Ethernet only: InfiniBand off, the job spans scale sets"
            )
        )
    )
    return InterconnectPlan(
        needs_infiniband=needs_ib,
        scaleup=s.vm.scaleup,
        fabric=fabric,
        gradient_bytes=gradient_bytes(spec),
        collective=collective(spec)[1],
        algorithm=ex.estimate.algorithm,
        comm_s=ex.comm_s,
        exposed_s=ex.exposed_s,
        busbw_bps=ex.estimate.busbw,
        single_vm_busbw_bps=single_vm_busbw(s.vm, cat.fabric),
        single_vm_busbw_published_bps=s.vm.allreduce_busbw_measured,
        single_vm_busbw_floor_bps=s.vm.allreduce_busbw_floor,
        single_vm_busbw_measured_bps=s.vm.scaleup_busbw_measured,
        sharp_requested=spec.cluster.sharp,
        fabric_boundary_vms=run.shape.boundary_vms,
        vms_outside_fabric=max(0, s.nodes - s.boundary_vms) if needs_ib else 0,
        sharp=any(level.sharp for level in ex.levels),  # asked for, and on a level that has it
        levels=[dataclasses.asdict(level) for level in ex.levels],
        fabric_layout=run.layout,
        fabric_options=fabric_options(spec, cat, s, compute_s / run.compute_factor),
        model_parallel=ex.model_parallel,
    )


# What the fabric line adds for a job past one scale set that the spec declared.
FABRIC_WORDS = {
    FabricLayout.MICROSOFT_ARRANGED: "one fabric arranged with Microsoft (cluster.fabric)",
    FabricLayout.INDEPENDENT_JOBS: "one independent job per scale set (cluster.fabric)",
    FabricLayout.INDEPENDENT_REPLICAS: (
        "one data-parallel replica per scale set, none talking across (cluster.fabric)"
    ),
}


def data_plan(spec: JobSpec, cat: Catalog, s: Shape, need: dpth.DataNeed) -> DataPlan:
    d = spec.data
    # Staging from Blob is bound by the same GETs as reading in place.
    blob_rate = dpth.blob_read_rate(cat, d.blob_tier, d.blob_accounts, need.request_bytes)
    if d.lustre_sku != "auto" and d.lustre_sku not in cat.lustre:
        close = [w.removeprefix("lustre.") for w in cat.closest_entries(f"lustre.{d.lustre_sku}")]
        close = [c for c in close if c in cat.lustre]
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise SpecError(
            f"data.lustre_sku: unknown SKU {d.lustre_sku!r}; {hint}known: auto, "
            f"{', '.join(cat.lustre)}"
        )
    # A Lustre that holds the data also holds the checkpoints kept, when there are any.
    extra = 0.0
    if spec.workload.kind in ("pretrain", "fine-tune"):
        extra = checkpoint_size(spec) * spec.checkpoints.keep
    lustre = (
        dpth.cheapest_lustre(need, s.vm, cat, blob_rate, extra)
        if d.lustre_sku == "auto"
        else dpth.lustre_option(need, s.vm, cat, d.lustre_sku, blob_rate, extra)
    )
    options = [
        dpth.blob_option(need, s.vm, cat, d.blob_tier, d.blob_accounts),
        dpth.nvme_option(need, s.vm, cat, blob_rate),
        lustre,
        dpth.netapp_option(need, s.vm, cat, "Ultra"),
        dpth.files_option(need, s.vm, cat),
    ]
    chosen = (
        dpth.choose(options, need.ideal_step_s, need.au_target)
        if d.tier == "auto"
        else next(o for o in options if o.tier == d.tier)
    )
    stall = chosen.stall_per_step_s
    return DataPlan(
        need.rate,
        need.bytes_per_step,
        need.dataset_bytes,
        spec.workload.epochs,
        dpth.as_choice(chosen),
        [dpth.as_choice(o) for o in options],
        need.requests_per_s or 0.0,
        need.request_bytes or 0.0,
        _read_as(spec, need.request_bytes or 0.0),
        read_pattern=ReadPattern.PACKED if d.packed else ReadPattern.PER_SAMPLE,
        au_target=need.au_target,
        required_full_bps=need.full_rate,
        stall_budget_s=need.stall_budget_s,
        au=None
        if stall is None
        else (need.ideal_step_s / (need.ideal_step_s + stall) if need.ideal_step_s else 1.0),
    )


def _read_as(spec: JobSpec, request_bytes: float) -> str:
    """How the loader reads the dataset, and whether the spec says so or the plan assumes it."""
    d = spec.data
    if not d.packed:
        return "one object per sample (data.packed = false)"
    said = "set" if {"packed", "shard_size"} & d.model_fields_set else "assumed"
    return (
        f"samples packed in {fb(d.shard_size)} shards, read in "
        f"{dpth.format_request(request_bytes)} ranges (data.packed: {said})"
    )


def make_plan(spec: JobSpec, cat: Catalog) -> Plan:
    """The whole plan for one job spec; raises SpecError naming the field when it cannot."""
    try:
        return _make_plan(spec, cat)
    except (OverflowError, ZeroDivisionError) as exc:  # the arithmetic ran out of range
        raise SpecError(f"plan: {OUT_OF_RANGE} ({exc})") from exc


OUT_OF_RANGE = (
    "some figure in the spec or catalog is out of range (a rate near zero, a huge size or "
    "count); check the values it depends on"
)


def _make_plan(spec: JobSpec, cat: Catalog) -> Plan:
    spec = canonical(spec, cat)
    s = shape(spec, cat)
    w = spec.workload
    if w.kind == "inference":
        inference = inference_plan(spec, cat, s.vm, s.nodes)
        cost = cost_plan(spec, cat, s, None, None, None, inference)
        return _finish(spec, cat, s, cost, inference=inference)

    training = w.kind != "data-prep"
    # One job of a declared split past one scale set may take more compute per step (fabric.py).
    compute = compute_step_s(spec, s) * run_shape(spec, cat, s).compute_factor if training else 0.0
    ic = interconnect_plan(spec, cat, s, compute) if training else None
    model_parallel = ic.model_parallel.exposed_s if ic and ic.model_parallel else 0.0
    exposed = (ic.exposed_s if ic else 0.0) + model_parallel
    sample = w.sample_size or (w.seq_len or 0) * w.bytes_per_token
    dataset = _dataset_bytes(spec, sample)
    request = dpth.read_request_bytes(sample, spec.data.packed, spec.data.shard_size)
    if training:
        need = dpth.DataNeed(
            w.global_batch * sample, compute + exposed, dataset, s.nodes, request, w.au_target
        )
    elif spec.run.length is None:
        raise SpecError("run.length: a data-prep job needs the time it may take")
    else:  # read everything once and write it back once, spread over the run
        need = dpth.DataNeed(2 * dataset * w.epochs, spec.run.length, dataset, s.nodes, request)
    data = data_plan(spec, cat, s, need)
    step_guess = compute + exposed + (data.chosen.stall_per_step_s or 0.0)
    ckpt = checkpoint_plan(spec, cat, s, data, step_guess) if training else None
    step, run = _step_and_run(spec, need, compute, exposed, data, ckpt, sample)
    if step is not None:
        step.model_parallel_s = model_parallel
    cost = cost_plan(spec, cat, s, data, ckpt, run, None)
    if ic is not None:  # what the links carry per step, fewer links, and InfiniBand off
        stall = data.chosen.stall_per_step_s or 0.0
        ic.ethernet = ethernet_plan(spec, cat, s, compute, stall)
        ic.bandwidth = bandwidth_plan(spec, cat, s, compute, stall, cost)
    plan = _finish(
        spec, cat, s, cost, interconnect=ic, data=data, checkpoints=ckpt, step=step, run=run
    )
    if ckpt is not None and rn.beyond_checkpointing(
        ckpt.blocking_s, ckpt.job_mtbf_s, ckpt.restart_s
    ):
        plan.warnings.insert(0, beyond_checkpointing(ckpt))
    return plan


BEYOND_CHECKPOINTING_FIX = (
    "shorten reliability.restart_time (hot spares, a checkpoint kept in host memory), save "
    'faster (checkpoints.mode = "async", a faster tier, more writers), or fail less often '
    "(fewer GPUs per job, or a larger reliability.gpu_mtbf from screened hardware)"
)


def beyond_checkpointing(ck: CheckpointPlan) -> str:
    """The plan's word where the job fails sooner than it can restart and save once."""
    return (
        f"the job fails every {fd(ck.job_mtbf_s)}, sooner than a restart ({fd(ck.restart_s)}) "
        f"plus a save ({fd(ck.blocking_s)}): no checkpoint interval can save this run (goodput "
        f"{ck.goodput_at_optimal:.1%} at the best interval); " + BEYOND_CHECKPOINTING_FIX
    )


def _finish(spec: JobSpec, cat: Catalog, s: Shape, cost: CostPlan, **sections: object) -> Plan:
    plan = Plan(
        spec.name,
        spec.workload.kind,
        spec.cluster.vm_size,
        s.nodes,
        s.gpus,
        spec.cluster.region,
        cat.catalog.as_of.isoformat(),
        cost,
        **sections,
    )  # type: ignore[arg-type]
    if spec.workload.kind in ("pretrain", "fine-tune"):
        plan.gpus_idle = s.nodes * s.vm.gpus - s.gpus_used
    plan.recommendations = recommendations(plan, cat, s.vm, plan.warnings)
    _check_finite(plan.to_dict())
    return plan


def _check_finite(value: object, where: str = "plan") -> None:
    """JSON has no Infinity or NaN: a figure that overflowed means an input out of range."""
    if isinstance(value, float) and not math.isfinite(value):
        raise SpecError(f"{where} comes out as {value}: {OUT_OF_RANGE}")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_finite(item, f"{where}[{i}]")


def _tokens_per_step(spec: JobSpec) -> float:
    if spec.workload.seq_len is None:
        raise SpecError(
            "run.tokens: counting a run in tokens needs workload.seq_len; give "
            "run.steps or run.length instead"
        )
    return spec.workload.global_batch * spec.workload.seq_len


def _dataset_bytes(spec: JobSpec, sample: float) -> float:
    w, r = spec.workload, spec.run
    if w.dataset_size is not None:
        return w.dataset_size
    steps = r.steps or (r.tokens / _tokens_per_step(spec) if r.tokens else None)
    if steps is None:
        raise SpecError(
            "workload.dataset_size: give the dataset size (or run.steps / run.tokens "
            "so stoker can derive what the run reads)"
        )
    return steps * w.global_batch * sample / w.epochs


def _step_and_run(
    spec: JobSpec,
    need: dpth.DataNeed,
    compute: float,
    exposed: float,
    data: DataPlan,
    ckpt: CheckpointPlan | None,
    sample: float,
) -> tuple[StepPlan | None, RunPlan]:
    r = spec.run
    # A tier with no published figure has no known stall: the step and run are lower bounds.
    stall = data.chosen.stall_per_step_s or 0.0
    if ckpt is None:  # data-prep: no steps, the run is its length plus any stall
        wall = need.ideal_step_s + stall
        return None, RunPlan(1, wall, wall, need.ideal_step_s / wall if wall else 0.0)
    base = compute + exposed + stall
    # One renewal split (plan/_renewal.py) gives the step's save share, the failures' share and
    # the wall clock, so goodput and effective_training_fraction agree by construction.
    shares = rn.split(ckpt.goodput, ckpt.interval_s, ckpt.blocking_s)
    ckpt_s = base * ckpt.blocking_s / ckpt.interval_s if ckpt.interval_s else 0.0
    total = base + ckpt_s
    step = StepPlan(
        compute,
        exposed,
        data.chosen.stall_per_step_s,
        ckpt_s,
        total,
        compute / total if total else 0.0,
    )
    if shares.goodput <= 0:
        raise SpecError(
            f"reliability.gpu_mtbf: the job fails every {fd(ckpt.job_mtbf_s)}, so no stretch "
            "of training lasts to a safe checkpoint and the run never ends; "
            + BEYOND_CHECKPOINTING_FIX
        )
    asked, basis = _steps_asked(spec, need, sample)
    steps = asked
    if r.length is not None:  # a cap: the run stops at its length, done or not
        fit = shares.training_s(r.length) / base
        steps = fit if asked is None else min(asked, fit)
    assert steps is not None  # _steps_asked answers unless run.length is set
    productive = steps * total
    wall = shares.wall_s(steps * base)
    useful = steps * compute / wall if wall else 0.0
    return step, RunPlan(steps, productive, wall, useful, asked, basis)


def _steps_asked(spec: JobSpec, need: dpth.DataNeed, sample: float) -> tuple[float | None, str]:
    """The steps the spec asks for and the field that asks; (None, "run.length") when only the
    length says how long to train."""
    w, r = spec.workload, spec.run
    if r.steps is not None:
        return float(r.steps), "run.steps"
    if r.tokens is not None:
        return r.tokens / _tokens_per_step(spec), "run.tokens"
    if r.length is not None and "epochs" not in w.model_fields_set:
        return None, "run.length"
    return need.dataset_bytes * w.epochs / (w.global_batch * sample), "workload.epochs"
