"""The bandwidth a job really uses (issue 54 item 5): InfiniBand bytes and busy time per step,
average and peak use, the what-if of fewer links and SHARP, in the plan, its JSON and its
renderings; and `stoker bench allreduce` across VMs fed back with --measured."""

import json
import typing
from dataclasses import fields, replace
from pathlib import Path

import pytest

from stoker.catalog import load_catalog
from stoker.measure.collectives import SweepResult, make_row, with_plan
from stoker.plan import make_plan, parse_spec, plan_job, render, result
from stoker.plan import plan_json as pj

PARAMS = 7.62e9  # bf16: 15.24 GB of gradients and parameters


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def fsdp(vms: int, **cluster: object) -> dict:
    return {
        "cluster": {"vm_size": "ND96isr_H100_v5", "nodes": vms, **cluster},
        "workload": {
            "kind": "fine-tune",
            "params": PARAMS,
            "precision": "bf16",
            "sharding": "fsdp",
            "seq_len": 2048,
            "global_batch": 16 * vms,
            "tokens_per_s_per_gpu": 8159,
            "dataset_size": "1 GB",
        },
        "checkpoints": {"size": "1 GB"},
    }


def test_bytes_per_step_are_the_flat_rings_share_of_the_fsdp_traffic(cat):
    plan = make_plan(parse_spec(fsdp(8)), cat)
    ic = plan.interconnect
    assert ic.algorithm == "flat ring over NVLink + InfiniBand"
    b = ic.bandwidth
    # FSDP: a reduce-scatter and two all-gathers of the 15.24 GB, each sending (n-1)/n of it
    # through every VM's NIC on a ring through all 64 GPUs.
    n = 64
    assert b.bytes_per_vm == pytest.approx(3 * (n - 1) / n * PARAMS * 2, rel=1e-9)
    assert b.network == "InfiniBand" and b.capacity_bps == cat.vm["ND96isr_H100_v5"].ib_per_vm
    assert b.busy_s == pytest.approx(ic.comm_s)  # a flat ring: all of the exchange on the links
    assert b.average_use == pytest.approx(b.bytes_per_vm / b.step_s / b.capacity_bps)
    assert b.peak_use == pytest.approx(b.bytes_per_vm / b.busy_s / b.capacity_bps)
    assert 0 < b.average_use < b.peak_use <= 1
    # the step the links are measured against is the plan's (before checkpoints)
    assert b.step_s == pytest.approx(plan.step.compute_s + plan.step.exposed_comm_s)


def test_the_what_if_table_has_every_link_count_and_sharp_and_the_plans_row(cat):
    plan = make_plan(parse_spec(fsdp(8)), cat)
    b = plan.interconnect.bandwidth
    assert [(o.links_per_vm, o.sharp) for o in b.options] == [
        (links, sharp) for links in (8, 4, 2, 1) for sharp in (False, True)
    ]
    (mine,) = [o for o in b.options if o.planned]
    assert (mine.links_per_vm, mine.sharp) == (8, False)
    assert mine.step_s == pytest.approx(b.step_s)
    assert mine.exposed_s == pytest.approx(plan.step.exposed_comm_s)
    assert mine.cost_usd == pytest.approx(plan.cost.total_usd)
    off = {o.links_per_vm: o for o in b.options if not o.sharp}
    # fewer links: never faster, and at one 400 Gb/s link per 8 GPUs the exchange is exposed
    assert off[8].step_s <= off[4].step_s <= off[2].step_s < off[1].step_s
    assert off[1].exposed_s > 5 * off[8].exposed_s
    # the VM's price does not change with the links: the cost follows the step
    extra = off[1].cost_usd - off[8].cost_usd
    vm_usd = plan.cost.gpu_vm_hours * plan.cost.price_per_vm_hour_usd
    assert extra == pytest.approx(vm_usd * (off[1].step_s / off[8].step_s - 1))


def test_sharp_helps_where_the_links_are_few_and_the_table_agrees_with_the_plan(cat):
    b = make_plan(parse_spec(fsdp(8)), cat).interconnect.bandwidth
    one = {o.sharp: o for o in b.options if o.links_per_vm == 1}
    # SHARP sends each byte up once instead of a ring's 2(p-1)/p: less exposed at one link
    assert one[True].exposed_s < one[False].exposed_s
    # the SHARP row is the plan a spec with SHARP on gets
    sharp = make_plan(parse_spec(fsdp(8, sharp=True)), cat).interconnect.bandwidth
    (mine,) = [o for o in sharp.options if o.planned]
    assert mine.sharp and mine.links_per_vm == 8


def test_the_plan_json_carries_the_bandwidth_key_for_key(cat):
    doc = make_plan(parse_spec(fsdp(4)), cat).to_dict()["interconnect"]
    for key, typed, cls in (
        ("bandwidth", pj.BandwidthJson, result.BandwidthPlan),
        ("ethernet", pj.EthernetJson, result.EthernetPlan),
    ):
        assert set(doc[key]) == set(typing.get_type_hints(typed)) == {f.name for f in fields(cls)}
    assert all(
        set(o) == set(typing.get_type_hints(pj.LinkOptionJson)) for o in doc["bandwidth"]["options"]
    )
    json.dumps(doc, allow_nan=False)  # finite figures only


def test_the_rendered_plan_shows_the_links_table(cat):
    plan = make_plan(parse_spec(fsdp(4)), cat)
    md = render.markdown(plan)
    assert "## The links a step uses" in md
    assert "| 8 (plan) | off |" in md and "| 1 | on |" in md
    b = plan.interconnect.bandwidth
    assert f"{100 * b.average_use:.0f} % of 380 GB/s on average" in md
    assert f"{plan.interconnect.ethernet.ratio:.1f}x the step with InfiniBand" in md
    from rich.console import Console

    console = Console(width=160, record=True)
    console.print(render.rich_report(plan))
    assert "The links a step uses" in console.export_text()


def _multi_vm_sweep(busbw: float, nccl_net: str = "") -> dict:
    """What `stoker bench allreduce --json` prints for 2 VMs x 8 GPUs, rows from its own maker."""
    size = 1 << 30
    rows = tuple(make_row("all_reduce", s, 16, 2 * 15 / 16 * s / busbw) for s in (size >> 4, size))
    sweep = SweepResult(
        "nccl", "cuda:0", 16, 8, 20, 5, "max", rows, {"all_reduce": "all_reduce"}, nccl_net=nccl_net
    )
    return sweep.to_dict()


def test_a_sweep_across_vms_feeds_the_infiniband_rate_back(tmp_path: Path, cat):
    path = tmp_path / "ib.json"
    path.write_text(json.dumps(_multi_vm_sweep(200e9)))
    base = plan_job(fsdp(4), cat)
    plan = plan_job(fsdp(4), cat, measured=path)
    (row,) = plan.calibration
    assert row.figure == "ib_busbw_measured" and row.measured_bps == pytest.approx(200e9)
    assert row.catalog_bps == cat.vm["ND96isr_H100_v5"].ib_per_vm
    b = plan.interconnect.bandwidth
    assert b.busbw_measured_bps == pytest.approx(200e9) and b.capacity_bps == pytest.approx(200e9)
    assert plan.interconnect.comm_s > 1.5 * base.interconnect.comm_s  # 200 GB/s, not 380
    assert plan.interconnect.single_vm_busbw_measured_bps is None  # not a one-VM figure


def test_a_socket_sweep_feeds_the_ethernet_rate_back(tmp_path: Path, cat):
    path = tmp_path / "eth.json"
    path.write_text(json.dumps(_multi_vm_sweep(1.5e9, nccl_net="Socket")))
    plan = plan_job(fsdp(4), cat, measured=path)
    (row,) = plan.calibration
    assert row.figure == "ethernet_busbw" and row.measured_bps == pytest.approx(1.5e9)
    eth = plan.interconnect.ethernet
    assert eth.measured and eth.source == "measured" and eth.busbw_bps == pytest.approx(1.5e9)
    published = plan_job(fsdp(4), cat).interconnect.ethernet
    assert eth.ratio > 1.8 * published.ratio  # half the published 3.19 GB/s


def test_bench_allreduce_predicts_the_socket_rate_when_nccl_runs_on_sockets(cat):
    sweep = _multi_vm_sweep(3.19e9, nccl_net="Socket")
    result_ = SweepResult(
        **{k: v for k, v in sweep.items() if k != "rows"},
        rows=tuple(make_row(r["collective"], r["size"], 16, r["time_s"]) for r in sweep["rows"]),
    )
    planned = with_plan(result_, "ND96isr_H100_v5", cat)
    big = planned.rows[-1]
    assert big.predicted_busbw == pytest.approx(3.19e9, rel=0.02)
    infiniband = with_plan(replace(result_, nccl_net=""), "ND96isr_H100_v5", cat)
    assert infiniband.rows[-1].predicted_busbw > 50 * big.predicted_busbw


def test_bench_allreduce_names_the_socket_transport_in_its_table(cat):
    from rich.console import Console

    from stoker.cli.bench_allreduce import _table

    sweep = _multi_vm_sweep(3.19e9, nccl_net="Socket")
    rows = tuple(make_row(r["collective"], r["size"], 16, r["time_s"]) for r in sweep["rows"])
    planned = with_plan(
        SweepResult(**{k: v for k, v in sweep.items() if k != "rows"}, rows=rows),
        "ND96isr_H100_v5",
        cat,
    )
    console = Console(width=200, record=True)
    console.print(_table(planned, "all_reduce"))
    text = console.export_text()
    assert "16 ranks, nccl on cuda:0, max across ranks, NCCL_NET=Socket" in text
    assert "plan busbw on ND96isr_H100_v5" in text and "3.19" in text  # predicted and measured


def test_a_real_sweep_over_two_nodes_on_sockets_feeds_the_plan(tmp_path: Path, cat):
    # Two torchrun "nodes" of one CPU rank each (gloo) with NCCL_NET=Socket: the JSON the verb
    # prints is an Ethernet figure for --measured, with the warning that CPU ranks are not GPUs.
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = os.environ | {"NCCL_NET": "Socket"}
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={r}"]
            + ["--nproc-per-node=1", "--master-addr=127.0.0.1", f"--master-port={port}"]
            + ["-m", "stoker.cli.bench_allreduce", "--json", "-b", "1MiB", "-e", "1MiB"]
            + ["--iters", "2", "--warmup", "1", "--op", "all_reduce"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for r in (0, 1)
    ]
    out = [p.communicate(timeout=300) for p in runs]
    assert all(p.returncode == 0 for p in runs), out[0][1][-2000:]
    sweep = json.loads(out[0][0])  # node 0's rank 0 prints
    assert (sweep["world_size"], sweep["ranks_per_node"], sweep["nccl_net"]) == (2, 1, "Socket")
    path = tmp_path / "sweep.json"
    path.write_text(out[0][0])
    plan = plan_job(fsdp(4), cat, measured=path)
    (row,) = plan.calibration
    assert row.figure == "ethernet_busbw" and "CPU ranks do not measure" in row.warning
    busbw = sweep["rows"][-1]["busbw"]
    assert plan.interconnect.ethernet.busbw_bps == pytest.approx(busbw)
