"""The interleaved pipeline schedule and the gradient exchange's overlap window (issue 54).

Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC'21, arXiv:2104.04473, section 2.2.2: with v model chunks per stage the 1F1B
bubble is (p - 1) / (m x v) of the compute, and each micro-batch crosses v times as many stage
boundaries. A step that accumulates m micro-batches syncs gradients in the last one's backward
only, so only that micro-batch's compute hides the exchange. Exact arithmetic.
"""

import copy
import tomllib
from pathlib import Path

import pytest

from stoker.catalog import load_catalog
from stoker.errors import SpecError
from stoker.plan import plan_job

EXAMPLES = Path(__file__).parent.parent / "examples"
PRETRAIN = tomllib.loads((EXAMPLES / "pretrain-64vm.toml").read_text())
# Llama 2 70B's shape split 8 x 4 over 512 GPUs: dp 16, 4 micro-batches of 16 samples.
SHAPE = {"layers": 80, "hidden_size": 8192, "micro_batch": 16, "tp": 8, "pp": 4}


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def job(cat, **workload):
    spec = copy.deepcopy(PRETRAIN)
    spec["workload"].update(SHAPE | workload)
    return plan_job(spec, cat)


def test_interleaving_divides_the_bubble_and_multiplies_the_sends(cat):
    one = job(cat).interconnect.model_parallel
    five = job(cat, virtual_stages=5).interconnect.model_parallel
    assert one.micro_batches == five.micro_batches == 4
    compute = job(cat).step.compute_s
    assert one.pp_bubble_s == pytest.approx(3 / 4 * compute)
    assert five.pp_bubble_s == pytest.approx(3 / (4 * 5) * compute)
    assert five.pp_s == pytest.approx(5 * one.pp_s)
    assert five.tp_s == pytest.approx(one.tp_s)  # the layers' own traffic does not change


def test_more_chunks_than_layers_is_refused_naming_the_field(cat):
    with pytest.raises(SpecError) as err:
        job(cat, virtual_stages=21)  # pp 4 x 21 = 84 chunks of 80 layers
    assert "workload: pp x virtual_stages = 84 model chunks" in str(err.value)


def test_the_gradient_exchange_hides_only_behind_the_last_micro_batch(cat):
    # The exchange (over InfiniBand across 64 VMs) is longer than one micro-batch's compute but
    # far shorter than the step: all but that micro-batch's compute is exposed, even with
    # overlap = 1.
    p = job(cat, overlap=1.0, micro_batch=1, step_time="2 s")  # 64 micro-batches
    ic, st = p.interconnect, p.step
    window = st.compute_s / ic.model_parallel.micro_batches
    assert ic.comm_s > window
    assert ic.exposed_s == pytest.approx(ic.comm_s - window)
    # Without the model's shape the plan does not know m: the whole step may hide it.
    unshaped = copy.deepcopy(PRETRAIN)
    unshaped["workload"].update(overlap=1.0, step_time="2 s")
    assert plan_job(unshaped, cat).interconnect.exposed_s == 0
