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


def _cache(cat, params, replicas, nodes):
    from stoker.plan.inference import cache_plan

    spec = stoker_spec(params, replicas, nodes)
    plan = plan_job(spec, cat)
    return plan, cache_plan(plan.inference, spec, cat, cat.vm["ND96isr_H100_v5"])


def stoker_spec(params, replicas, nodes):
    from stoker.plan import parse_spec

    return parse_spec(
        {
            "cluster": {"vm_size": "ND96isr_H100_v5", "nodes": nodes},
            "workload": {"kind": "inference", "params": params, "replicas": replicas},
        }
    )


def test_cache_plan_cold_starts_with_and_without_the_share(cat):
    from stoker.plan.volumes import files_throughput

    plan, cp = _cache(cat, "70B", 16, 16)
    vm, tier, blob = cat.vm["ND96isr_H100_v5"], cat.files["premium_v1"], cat.blob["standard"]
    model = 70e9 * 2
    assert cp.model_bytes == model and cp.replicas == 16
    # Without: 16 downloads from Blob, each replica held to its share of the account's egress.
    assert cp.blob_downloads_without == 16 and cp.blob_downloads_with == 1
    assert cp.cold_start_without_s == pytest.approx(model / min(vm.frontend_nic, blob.egress / 16))
    # With: the share's provisioned-v1 throughput (100 MiB/s + 0.1 MiB/s per GiB) split 16 ways.
    share = plan.inference.files_share_bytes
    rate = min(tier.base_throughput + tier.throughput_per_gib * share / 2**30, tier.max_throughput)
    assert cp.share_rate == pytest.approx(rate) == pytest.approx(files_throughput(share, cat))
    assert cp.cold_start_with_s == pytest.approx(model / min(vm.frontend_nic, rate / 16))
    # One warm-up download, bounded by one VM's NIC, Blob and the share, before the first start.
    assert cp.warmup_s == pytest.approx(model / min(vm.frontend_nic, blob.egress, rate))
    assert cp.first_start_with_s == pytest.approx(cp.warmup_s + cp.cold_start_with_s)
    # 16 NICs want 160 GB/s; one share gives at most 10,340 MiB/s: it cannot meet that demand.
    assert cp.demand_rate == pytest.approx(16 * vm.frontend_nic)
    assert cp.share_max_rate == tier.max_throughput and not cp.share_covers_demand
    assert any(
        "files-scale-targets" in s and "storage-files-scale-targets" in s for s in cp.sources
    )
    assert any(s.startswith("Blob egress") for s in cp.sources)


def test_cache_plan_replicas_on_one_vm_share_its_nic(cat):
    _, one_vm = _cache(cat, "7B", 4, 1)
    vm = cat.vm["ND96isr_H100_v5"]
    assert one_vm.replicas_per_vm == 4
    assert one_vm.demand_rate == pytest.approx(vm.frontend_nic)  # four replicas, one NIC
    assert one_vm.share_covers_demand == (one_vm.share_rate >= vm.frontend_nic)
