"""Request and IOPS limits on the data path: small objects hit them long before bandwidth."""

import copy
import tomllib
from pathlib import Path

import pytest

from stoker.catalog import load_catalog
from stoker.plan import datapath as dp
from stoker.plan import plan_job

EXAMPLES = Path(__file__).parent.parent / "examples"
VISION = tomllib.loads((EXAMPLES / "vision-32vm.toml").read_text())


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def vision(cat, **data):
    spec = copy.deepcopy(VISION)
    spec["workload"]["sample_size"] = "10 KB"  # 102,400 samples / 0.224 s = 457k samples/s
    spec["data"].update(data)
    return plan_job(spec, cat)


def test_one_object_per_sample_is_capped_by_blob_requests(cat):
    p = vision(cat, packed=False, tier="blob")
    blob = p.data.chosen
    # At the default 90 % accelerator-utilization target.
    assert p.data.requests_per_s == pytest.approx(0.9 * 102400 / (0.224 + p.step.exposed_comm_s))
    assert "requests" in blob.limited_by
    assert blob.deliverable_bps == pytest.approx(40000 * 10e3)  # 40,000 GETs/s x 10 kB
    assert blob.stall_per_step_s > 2  # 1.02 GB per step at 400 MB/s
    warning = next(w for w in p.warnings if "request rate" in w)
    assert "stoker shards write" in warning and "data.blob_accounts" in warning


def test_auto_moves_off_request_bound_blob(cat):
    p = vision(cat, packed=False)
    assert p.data.chosen.tier != "blob"
    assert p.data.chosen.stall_per_step_s == 0


def test_packed_shards_need_few_requests_and_the_plan_says_it_assumes_so(cat):
    p = vision(cat, tier="blob")
    assert p.data.request_bytes == 16 * 2**20  # 64 MiB shards, read in 16 MiB ranges
    assert "requests" not in p.data.chosen.limited_by
    assert "data.packed: assumed" in p.recommendations[1].reason
    assert "data.packed = false" in vision(cat, packed=False).recommendations[1].reason


def test_staging_from_blob_pays_the_same_request_limit(cat):
    packed = vision(cat)
    per_sample = vision(cat, packed=False)
    nvme = {o.tier: o for o in per_sample.data.options}["nvme"]
    assert nvme.staging_s > 10 * {o.tier: o for o in packed.data.options}["nvme"].staging_s


def test_files_share_is_capped_by_iops_and_sized_for_them(cat):
    vm = cat.vm["ND96asr_v4"]
    small = dp.DataNeed(1e9, 1.0, 1e12, nodes=4, request_bytes=10e3)  # 100k reads/s
    opt = dp.files_option(small, vm, cat)
    # 100,000 IOPS needs a share of 97,000 GiB (3,000 + 1 per GiB), within the 100 TiB limit.
    assert opt.size_bytes == pytest.approx(97000 * 2**30)
    tiny = dp.DataNeed(10e9, 1.0, 1e12, nodes=4, request_bytes=10e3)  # 1M reads/s
    capped = dp.files_option(tiny, vm, cat)
    assert "IOPS" in capped.limited_by
    assert capped.deliverable == pytest.approx(100_000 * 10e3)


def test_tiers_without_an_iops_figure_say_the_request_rate_is_unchecked(cat):
    p = vision(cat, packed=False)
    opts = {o.tier: o for o in p.data.options}
    for tier in ("nvme", "lustre", "netapp"):
        assert any("not checked" in n for n in opts[tier].notes), tier
    assert not any("not checked" in n for o in vision(cat).data.options for n in o.notes)
