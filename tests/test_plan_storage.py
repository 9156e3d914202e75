"""Data path and Lustre sizing against worked numbers and the published AMLFS figures."""

import pytest

from stoker.catalog import load_catalog
from stoker.plan import datapath as dp

TIB = 2**40


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def test_lustre_4096_tib_on_125_sku_is_rated_512_gb_s(cat):
    # MLPerf Storage v3.0 on AMLFS, v3.0-0037: 4,096 TiB of tier 125, nominal 512,000 MB/s
    # (learn.microsoft.com/azure/azure-managed-lustre/mlperf-storage-v3-results, 2026-09-01). Exact.
    sku = cat.lustre["AMLFS-Durable-Premium-125"]
    assert dp.lustre_rated(4096 * TIB, sku) == pytest.approx(512e9)


def test_lustre_size_is_the_larger_of_capacity_and_throughput_on_the_step(cat):
    sku = cat.lustre["AMLFS-Durable-Premium-125"]  # 16 TiB steps, 16 TiB minimum
    frac = cat.lustre_common.delivered_fraction
    # Capacity-bound: 100 TiB of data, a trickle of reads -> 112 TiB (next 16 TiB step).
    assert dp.lustre_size(100 * TIB, 1e6, sku, frac) == 112 * TIB
    # Throughput-bound: 100 GB/s at 125 MB/s/TiB x 0.956 delivered = 837 TiB -> 848 TiB.
    size = dp.lustre_size(1 * TIB, 100e9, sku, frac)
    assert size == 848 * TIB
    assert dp.lustre_rated(size, sku) * frac >= 100e9
    # Small needs get the minimum size.
    assert dp.lustre_size(1, 1, sku, frac) == 16 * TIB


def test_stall_is_the_read_that_outlasts_the_ideal_step():
    need = dp.DataNeed(bytes_per_step=10e9, ideal_step_s=1.0, dataset_bytes=1e12, nodes=10)
    assert need.rate == 10e9
    assert dp.stall(need, 20e9) == 0.0
    assert dp.stall(need, 5e9) == pytest.approx(1.0)  # 2 s of reading in a 1 s step
    assert dp.stall(need, None) is None


def test_blob_is_capped_by_account_egress_then_by_nics(cat):
    vm = cat.vm["ND96isr_H100_v5"]
    need = dp.DataNeed(1e9, 1.0, 1e12, nodes=64)
    opt = dp.blob_option(need, vm, cat, "standard", accounts=1)
    assert opt.deliverable == pytest.approx(120e9 / 8)  # 120 Gb/s per account
    assert "egress" in opt.limited_by
    small = dp.blob_option(dp.DataNeed(1e9, 1.0, 1e12, nodes=1), vm, cat, "standard", 1)
    assert small.deliverable == pytest.approx(80e9 / 8) and "NIC" in small.limited_by


def test_nvme_holds_only_each_vms_shard(cat):
    vm = cat.vm["ND96isr_H100_v5"]  # 28 TiB per VM, 80 % usable
    fits = dp.nvme_option(dp.DataNeed(1e9, 1.0, 64 * 20 * TIB, 64), vm, cat, 15e9)
    assert fits.fits and fits.size_bytes == 20 * TIB
    assert fits.deliverable == pytest.approx(64 * 55.3e9)
    too_big = dp.nvme_option(dp.DataNeed(1e9, 1.0, 64 * 25 * TIB, 64), vm, cat, 15e9)
    assert not too_big.fits and "does not fit" in too_big.notes[0]
    # Staging: each VM pulls its shard at its share of the Blob egress (15 GB/s / 64 VMs).
    assert fits.staging_s == pytest.approx(20 * TIB / (15e9 / 64))


def test_without_prices_lustre_picks_the_tier_that_overshoots_least(cat):
    vm = cat.vm["ND96isr_H100_v5"]
    # Capacity-bound (60 TB, 10 MB/s): the densest tier, 20 MB/s/TiB (96 TiB, 2 GB/s rated).
    dense = dp.cheapest_lustre(dp.DataNeed(10e6, 1.0, 60e12, 64), vm, cat, 15e9)
    assert dense.sku == "AMLFS-Durable-Premium-20"
    # Throughput-bound (50 GB/s over 10 TB): the fast 500 MB/s/TiB tier, smallest size.
    fast = dp.cheapest_lustre(dp.DataNeed(50e9, 1.0, 10e12, 64), vm, cat, 15e9)
    assert fast.sku == "AMLFS-Durable-Premium-500"
    assert fast.deliverable >= 50e9


def test_prices_decide_when_the_catalog_has_them(cat):
    priced = cat.model_copy(deep=True)
    for i, sku in enumerate(priced.lustre.values()):
        sku.price_per_tib_hour = [0.05, 0.1, 0.5, 0.9, 1.5][i]
    vm = priced.vm["ND96isr_H100_v5"]
    pick = dp.cheapest_lustre(dp.DataNeed(50e9, 1.0, 10e12, 64), vm, priced, 15e9)
    prices = [
        dp.lustre_option(dp.DataNeed(50e9, 1.0, 10e12, 64), vm, priced, k, 15e9)
        for k in priced.lustre
    ]
    assert pick.price_per_hour == min(o.price_per_hour for o in prices if o.fits)


def test_files_v1_formula(cat):
    # 100 + 0.04 x 10240 + 0.06 x 10240 MiB/s = 1124 MiB/s for a 10 TiB share
    assert dp.files_throughput(10 * TIB, cat) == pytest.approx(1124 * 2**20)
    assert dp.files_throughput(100 * TIB, cat) == pytest.approx(10340 * 2**20)  # capped


def test_choose_prefers_the_simplest_tier_that_feeds_the_gpu():
    def opt(tier, stall, fits=True):
        return dp.TierOption(tier, tier, 1.0, 1.0, "", stall, fits)

    assert dp.choose([opt("blob", 0.0), opt("nvme", 0.0)], 1.0).tier == "blob"
    assert dp.choose([opt("blob", 0.5), opt("nvme", 0.0)], 1.0).tier == "nvme"
    assert (
        dp.choose([opt("blob", 0.5), opt("nvme", 0.0, fits=False), opt("lustre", 0.2)], 1.0).tier
        == "lustre"
    )


def test_lustre_is_not_sized_past_what_the_nics_take_and_overrun_is_a_warning():
    from stoker.catalog import load_catalog
    from stoker.plan import make_plan, parse_spec

    spec = {
        "cluster": {"vm_size": "NC96ads_A100_v4", "nodes": 8},
        "workload": {"kind": "data-prep", "dataset_size": "500 TB"},
        "data": {"tier": "lustre"},
        "run": {"length": "1 h"},
    }
    p = make_plan(parse_spec(spec), load_catalog(defaults=False))
    nics = 8 * 10e9  # 8 VMs x 80 Gb/s frontend NIC
    ch = p.data.chosen
    assert ch.deliverable_bps == nics and ch.limited_by == "the VMs' frontend NICs"
    assert ch.size_bytes <= 460 * 2**40  # the capacity (456 TiB), not 584 TiB for 292 GB/s
    warn = next(w for w in p.warnings if w.startswith("data-prep takes"))
    assert "not the 1 h of run.length" in warn and "add VMs" in warn
