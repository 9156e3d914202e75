"""Inference: replicas must fit the GPUs, share their VM's NIC, and caches compare like for like."""

import pytest

from stoker.catalog import load_catalog
from stoker.plan import plan_job


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def serve(cat, params, replicas, nodes):
    spec = {
        "cluster": {"vm_size": "ND96isr_H100_v5", "nodes": nodes},
        "workload": {"kind": "inference", "params": params, "replicas": replicas},
    }
    return plan_job(spec, cat)


def test_replicas_that_overflow_gpu_memory_are_flagged_with_what_fits(cat):
    p = serve(cat, "405B", 64, 1)  # 810 GB of weights; one VM has 8 x 80 GB
    assert any("one replica does not fit on one VM" in w for w in p.warnings)
    p = serve(cat, "70B", 8, 1)  # 140 GB each: 4 fit in 640 GB
    assert p.inference.replicas_that_fit == 4
    assert any("at most 4 replicas fit on 1 VM" in w for w in p.warnings)
    assert not any("GPU memory" in w for w in serve(cat, "70B", 16, 16).warnings)


def test_replicas_on_one_vm_share_its_nic(cat):
    one_each = serve(cat, "7B", 4, 4).inference
    four_on_one = serve(cat, "7B", 4, 1).inference
    assert four_on_one.replicas_per_vm == 4
    nic = cat.vm["ND96isr_H100_v5"].frontend_nic
    assert four_on_one.cold_start_s["blob"] == pytest.approx(14e9 / (nic / 4))
    assert four_on_one.cold_start_s["nvme"] == pytest.approx(4 * one_each.cold_start_s["nvme"])


def test_netapp_and_files_are_sized_for_the_same_target(cat):
    inf = serve(cat, "70B", 16, 16).inference
    # 16 x 140 GB in 300 s = 7.47 GB/s: both shared caches are sized to meet it.
    assert inf.cold_start_s["files"] == pytest.approx(300, rel=0.01)
    assert inf.cold_start_s["netapp"] == pytest.approx(300, rel=0.01)
    assert inf.netapp_volume_bytes > 50 * 2**40  # above the minimum volume
