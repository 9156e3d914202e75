"""What the plan tells a user about Ethernet (issue 54): how to force NCCL onto TCP on Azure's
ND sizes, and the rate it runs at, labelled by what it rests on.

On ND H100 v5, NCCL_IB_DISABLE=1 alone left NCCL on InfiniBand through Azure's RDMA plugin and
NCCL_NET=Socket forced TCP (the catalog's [ethernet.ND96isr_H100_v5], its note and source). Where
the catalog has a measured NCCL-socket busbw the plan quotes it with its source; elsewhere only
the frontend NIC's line rate is known, an upper bound.
"""

import tomllib
from pathlib import Path

import pytest

from stoker.catalog import load_catalog
from stoker.plan import make_plan, parse_spec
from stoker.plan.facts import FabricLayout

EXAMPLES = Path(__file__).parent.parent / "examples"
H100 = "ND96isr_H100_v5"
NO_IB = "NC80adis_H100_v5"  # two H100 NVL, frontend Ethernet only


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def with_vm(cat, name: str, **update):
    vm = cat.vm[name].model_copy(update=update)
    return cat.model_copy(update={"vm": cat.vm | {name: vm}})


def llama_undeclared() -> dict:
    data = tomllib.loads((EXAMPLES / "llama3-405b-2048vm.toml").read_text())
    data["cluster"]["fabric"] = "scale-set"  # no declaration: planned with InfiniBand off
    return data


def flat(plan):
    return next(
        o for o in plan.interconnect.fabric_options if o.layout is FabricLayout.FLAT_ETHERNET
    )


def network_warnings(plan) -> list[str]:
    rec = next(r for r in plan.recommendations if r.need == "GPU-to-GPU interconnect")
    return rec.warnings


def test_the_flat_ethernet_shape_says_nccl_net_socket_and_the_measured_rate(cat):
    plan = make_plan(parse_spec(llama_undeclared()), cat)
    assert plan.interconnect.fabric_layout is FabricLayout.FLAT_ETHERNET
    note = flat(plan).note
    assert "NCCL_NET=Socket" in note
    assert "NCCL_IB_DISABLE=1 alone leaves NCCL on InfiniBand" in note
    assert "at the measured NCCL-socket busbw, 3.19 GB/s per VM (ib-vs-eth-finetune-2026)" in note
    assert "frontend NIC's pace" not in note
    # The plan's own line for the shape it runs says how, too.
    assert any("InfiniBand off (NCCL_NET=Socket" in w for w in network_warnings(plan))


def test_without_a_measured_socket_rate_the_line_rate_is_an_upper_bound(cat):
    line_only = with_vm(cat, H100, ethernet_busbw=None)
    note = flat(make_plan(parse_spec(llama_undeclared()), line_only)).note
    assert "at most 10 GB/s per VM, the frontend NIC's line rate (an upper bound" in note
    assert "measured" not in note.split("NCCL_NET=Socket")[1].split("(an upper bound")[0]


def no_ib_job(nodes: int = 4) -> dict:
    return {
        "cluster": {"vm_size": NO_IB, "nodes": nodes},
        "workload": {
            "kind": "fine-tune",
            "params": "7B",
            "tokens_per_s_per_gpu": 3000,
            "seq_len": 2048,
            "global_batch": 64,
            "dataset_size": "1 GB",
        },
        "checkpoints": {"size": "1 GB"},
    }


def test_a_size_without_infiniband_is_described_by_its_upper_bound(cat):
    warning = next(
        w for w in network_warnings(make_plan(parse_spec(no_ib_job()), cat)) if NO_IB in w
    )
    line = cat.vm[NO_IB].frontend_nic
    assert f"at most {line / 1e9:g} GB/s per VM, the frontend NIC's line rate" in warning
    assert "an upper bound" in warning and "NCCL over TCP sockets" in warning


def test_a_size_without_infiniband_quotes_a_measured_socket_rate_with_its_source(cat):
    vm = cat.vm[NO_IB]
    measured = with_vm(
        cat, NO_IB, ethernet_busbw=2.5e9, cite=dict(vm.cite) | {"ethernet_busbw": "measured: x"}
    )
    warning = next(
        w for w in network_warnings(make_plan(parse_spec(no_ib_job()), measured)) if NO_IB in w
    )
    assert "at the measured NCCL-socket busbw, 2.5 GB/s per VM (measured: x)" in warning
    assert "upper bound" not in warning


def test_no_plan_text_advises_nccl_ib_disable_as_the_way_to_tcp():
    # NCCL_IB_DISABLE=1 may appear only beside the warning that it is not enough on Azure.
    root = EXAMPLES.parent / "src" / "stoker" / "plan"
    for path in root.glob("*.py"):
        text = " ".join(path.read_text().split())
        for at in [i for i in range(len(text)) if text.startswith("NCCL_IB_DISABLE=1", i)]:
            assert "alone" in text[at : at + 40] or "is not enough" in text[at - 80 : at + 80], (
                path,
                text[at - 80 : at + 80],
            )
