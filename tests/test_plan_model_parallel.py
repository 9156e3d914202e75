"""Tensor-, pipeline- and expert-parallel traffic from the model's shape; without the shape the
plan says the traffic is inside the measured step time.

Formulas: Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC'21, arXiv:2104.04473 (2021-04-09): tensor parallelism does 2 all-reduces of the
activations per layer forward and 2 backward (section 3.3); the 1F1B pipeline bubble is
(p - 1) / m of the compute (section 2.2). Exact arithmetic: no tolerance beyond rounding.
"""

import copy
import math
import tomllib
from pathlib import Path

import pytest

from stoker.catalog import load_catalog
from stoker.errors import SpecError
from stoker.plan import collectives as c
from stoker.plan import plan_job
from stoker.plan.parallel import NOT_MODELLED, all_to_all_time

EXAMPLES = Path(__file__).parent.parent / "examples"
PRETRAIN = tomllib.loads((EXAMPLES / "pretrain-64vm.toml").read_text())
SHAPE = {"layers": 80, "hidden_size": 8192, "micro_batch": 1}  # Llama 2 70B's shape


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def job(cat, **workload):
    spec = copy.deepcopy(PRETRAIN)
    spec["workload"].update(workload)
    return plan_job(spec, cat)


def test_without_the_shape_the_traffic_is_said_to_be_inside_the_measured_time(cat):
    p = job(cat)
    mp = p.interconnect.model_parallel
    assert mp.modelled is False and mp.note == NOT_MODELLED
    assert p.step.model_parallel_s == 0
    assert NOT_MODELLED in next(r.reason for r in p.recommendations if r.need.startswith("step"))


def test_tensor_parallel_all_reduces_inside_the_vm(cat):
    base, shaped = job(cat), job(cat, **SHAPE)
    mp = shaped.interconnect.model_parallel
    vm = cat.vm["ND96isr_H100_v5"]
    m = math.ceil(1024 / 64)  # global batch over dp (512 GPUs / tp 8) x micro-batch 1
    act = 1 * 8192 * 8192 * 2
    per_call = c.ring_allreduce_time(
        act, 8, vm.scaleup_links * vm.scaleup_link_bw, cat.fabric.nvlink_ring_latency
    )
    assert mp.micro_batches == m and mp.tp_network == vm.scaleup
    assert mp.tp_s == pytest.approx(m * 80 * 4 * per_call)
    assert mp.pp_s == mp.ep_s == mp.pp_bubble_s == 0
    assert shaped.step.model_parallel_s == pytest.approx(mp.tp_s)
    assert shaped.step.exposed_comm_s == pytest.approx(base.step.exposed_comm_s + mp.tp_s)
    assert shaped.step.total_s > base.step.total_s


def test_pipeline_bubble_and_sends(cat):
    p = job(cat, pp=4, **SHAPE)
    mp = p.interconnect.model_parallel
    m = math.ceil(1024 / (512 // 32))  # dp = 512 / (tp 8 x pp 4) = 16
    assert mp.micro_batches == m
    assert mp.pp_bubble_s == pytest.approx((4 - 1) / m * p.step.compute_s)
    vm = cat.vm["ND96isr_H100_v5"]
    rail = vm.ib_per_vm / vm.gpus  # stages 8 GPUs apart sit on different VMs
    act = 8192 * 8192 * 2
    assert mp.pp_s == pytest.approx(m * 2 * (act / rail + cat.fabric.net_ring_latency))
    assert mp.exposed_s == pytest.approx(mp.tp_s + mp.pp_s * (1 - 0.8) + mp.pp_bubble_s)


def test_expert_parallel_all_to_alls_cross_vms(cat):
    p = job(cat, ep=8, experts_per_token=2, **SHAPE)
    mp = p.interconnect.model_parallel
    vm = cat.vm["ND96isr_H100_v5"]
    act = 8192 * 8192 * 2
    one = all_to_all_time(act * 2, 8, vm.ib_per_vm / vm.gpus, cat.fabric.net_ring_latency)
    assert mp.ep_network == "InfiniBand"  # ep 8 x tp 8 = 64 GPUs: more than one VM
    assert mp.ep_s == pytest.approx(mp.micro_batches * 80 * 4 * one)


def test_expert_parallel_must_divide_data_parallel(cat):
    with pytest.raises(SpecError, match="workload.ep: 3 expert-parallel ranks must divide dp"):
        job(cat, ep=3)


def test_a_large_model_parallel_share_is_warned_about_with_its_largest_part(cat):
    p = plan_job(EXAMPLES / "moe-3d-parallel-128vm.toml", cat)
    mp = p.interconnect.model_parallel
    assert mp.modelled and mp.overlap == 0.7 and mp.ep_network == "InfiniBand"
    assert p.interconnect.exposed_s < 0.1 * p.step.total_s < mp.exposed_s
    warn = next(w for w in p.warnings if w.startswith("tensor-, pipeline- and expert-parallel"))
    assert "most of it the pipeline bubble" in warn  # 3 / 16 micro-batches of the compute
    assert mp.pp_bubble_s == pytest.approx(3 / 16 * p.step.compute_s)
    assert not any(w.startswith("tensor-, pipeline") for w in job(cat).warnings)  # no shape
