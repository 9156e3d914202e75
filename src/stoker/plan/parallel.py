"""Tensor-, pipeline- and expert-parallel traffic per step, from the model's shape. Pure.

Given ``workload.layers`` and ``hidden_size`` (with ``seq_len`` and ``micro_batch``), each
data-parallel replica runs ``m = global_batch / (dp x micro_batch)`` micro-batches per step and
each GPU holds ``layers / pp`` layers. Activations of one micro-batch are
``A = micro_batch x seq_len x hidden_size x 2`` bytes (16-bit; fp32 runs 4). Per step and GPU:

- tensor parallel (Megatron-LM): 4 all-reduces of A per layer and micro-batch, 2 forward and 2
  backward (Narayanan et al., SC'21, arXiv:2104.04473, section 3.3), on the critical path;
- pipeline parallel: one send of A forward and one of its gradient back per micro-batch between
  neighbouring stages, hidden behind compute by ``overlap``; and the 1F1B schedule's bubble,
  ``(pp - 1) / m`` of the compute (same paper, section 2.2). The interleaved schedule
  (``virtual_stages = v`` model chunks per stage, section 2.2.2) shrinks the bubble to
  ``(pp - 1) / (m x v)`` and sends v times as often;
- expert parallel: 4 all-to-alls per (MoE) layer and micro-batch, dispatch and combine, forward
  and backward, of ``A x experts_per_token`` over the ep ranks (GShard-style), hidden by
  ``overlap``.

Without the shape the plan says the traffic is inside the measured step time.
"""

from __future__ import annotations

import math

from ..catalog import Catalog, VmSize
from . import collectives as c
from .result import ModelParallelPlan
from .shape import Shape
from .spec import PRECISION_BYTES, JobSpec

NOT_MODELLED = (
    "tp / pp / ep traffic is inside the measured step_time or tokens_per_s_per_gpu: give "
    "workload.layers and hidden_size to model it"
)


def _group_link(vm: VmSize, cat: Catalog, group_gpus: int) -> tuple[float, float, str]:
    """(bytes/s per rank, hop latency, where) for a group of ``group_gpus`` consecutive GPUs:
    inside the scale-up domain when it fits there, else over each GPU's InfiniBand rail (or
    its share of the frontend NIC)."""
    if group_gpus <= vm.gpus * vm.nvlink_domain_vms and vm.scaleup_links:
        bw = vm.scaleup_busbw_measured or vm.scaleup_links * (vm.scaleup_link_bw or 0.0)
        return bw, cat.fabric.nvlink_ring_latency, vm.scaleup
    if vm.has_infiniband:
        return vm.ib_per_vm / vm.gpus, cat.fabric.net_ring_latency, "InfiniBand"
    # NCCL over TCP sockets: the measured socket rate (or the line rate), as the dp exchange
    return vm.ethernet_rate / vm.gpus, cat.fabric.net_ring_latency, "frontend Ethernet"


def all_to_all_time(size: float, ranks: int, bw: float, alpha: float) -> float:
    """Pairwise all-to-all of ``size`` bytes per rank: (p-1) alpha + (p-1)/p x N/B."""
    if ranks <= 1:
        return 0.0
    return (ranks - 1) * alpha + (ranks - 1) / ranks * size / bw


def model_parallel_plan(
    spec: JobSpec, cat: Catalog, s: Shape, compute_s: float
) -> ModelParallelPlan:
    w = spec.workload
    if w.layers is None or w.hidden_size is None or w.seq_len is None:
        # A shape given in part: say which fields wait for layers and hidden_size.
        unused = sorted({"micro_batch", "experts_per_token", "virtual_stages"} & w.model_fields_set)
        if unused:
            fields = " and ".join(f"workload.{name}" for name in unused)
            verb = "is" if len(unused) == 1 else "are"
            note = f"{NOT_MODELLED}; {fields} {verb} unused without them"
            return ModelParallelPlan(False, note=note)
        return ModelParallelPlan(False, note=NOT_MODELLED)
    act = w.micro_batch * w.seq_len * w.hidden_size * max(2, PRECISION_BYTES[w.precision])
    m = max(1, math.ceil(w.global_batch / (s.dp * w.micro_batch)))
    per_stage = math.ceil(w.layers / w.pp)
    tp_bw, tp_alpha, tp_where = _group_link(s.vm, cat, w.tp)
    tp_s = m * per_stage * 4 * c.ring_allreduce_time(act, w.tp, tp_bw, tp_alpha)
    pp_s = bubble = 0.0
    if w.pp > 1:
        # Neighbouring stages sit tp GPUs apart: on one VM's links when the stage pair fits.
        pp_bw, pp_alpha, _ = _group_link(s.vm, cat, 2 * w.tp)
        v = w.virtual_stages
        pp_s = m * v * 2 * (act / pp_bw + pp_alpha)
        bubble = (w.pp - 1) / (m * v) * compute_s
    ep_s, ep_where = 0.0, ""
    if w.ep > 1:
        ep_bw, ep_alpha, ep_where = _group_link(s.vm, cat, w.ep * w.tp)
        ep_s = m * per_stage * 4 * all_to_all_time(act * w.experts_per_token, w.ep, ep_bw, ep_alpha)
    hidden = w.overlap
    exposed = tp_s + (pp_s + ep_s) * (1 - hidden) + bubble
    return ModelParallelPlan(
        True,
        tp_s=tp_s,
        pp_s=pp_s,
        pp_bubble_s=bubble,
        ep_s=ep_s,
        exposed_s=exposed,
        micro_batches=m,
        overlap=hidden,
        tp_network=tp_where if w.tp > 1 else "",
        ep_network=ep_where,
        note=(
            f"{m} micro-batches of {w.micro_batch} x {w.seq_len} tokens per replica per step; "
            f"{per_stage} layers per stage; compute time taken as compute alone"
        ),
    )
