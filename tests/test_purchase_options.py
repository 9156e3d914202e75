"""Purchase options (pay-as-you-go, Spot with the user's eviction rate, reservations) and
right-sizing, from catalog prices an override file sets (made-up round figures)."""

from __future__ import annotations

import pytest

from stoker.catalog import load_catalog
from stoker.plan import load_spec, plan_job
from stoker.plan.purchase import purchase_options, right_size, spot_wall_s

H100 = "ND96isr_H100_v5"


@pytest.fixture
def cat(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(
        f"[vm.{H100}]\nprice_per_hour = 100.0\nspot_price_per_hour = 20.0\n"
        "reserved_1y_per_hour = 60.0\nreserved_3y_per_hour = 40.0\n"
        "[vm.NC40ads_H100_v5]\nprice_per_hour = 7.0\n"
        "[vm.NC80adis_H100_v5]\nprice_per_hour = 14.0\n"
        "[meter.os_disk]\nprice = 36.5\n",
        "utf-8",
    )
    return load_catalog([path], defaults=False)


def _ckpt(spec_name: str, cat):
    spec = load_spec(f"examples/{spec_name}.toml")
    return plan_job(spec, cat)


def test_spot_is_cheapest_when_evictions_are_rare_and_says_why(cat):
    plan = _ckpt("pretrain-64vm", cat)
    wall = plan.run.wall_s
    got = purchase_options(cat.vm[H100], H100, plan.nodes, wall, plan.checkpoints, 0.01)
    by = {o.name: o for o in got.options}
    hours = plan.nodes * wall / 3600
    assert by["pay-as-you-go"].usd == pytest.approx(100.0 * hours)
    lost = plan.checkpoints.interval_s / 2 + plan.checkpoints.restart_s
    stretched = spot_wall_s(wall, plan.nodes, 0.01, lost)
    assert stretched > wall
    assert by["Spot"].usd == pytest.approx(20.0 * plan.nodes * stretched / 3600)
    # a reservation bills its whole term, however short the run
    assert by["1-year reservation"].usd == pytest.approx(60.0 * plan.nodes * max(8760, wall / 3600))
    assert by["savings plan"].usd is None
    assert got.cheapest == min((o for o in got.options if o.usd), key=lambda o: o.usd).name
    assert got.cheapest in got.why and "savings plan" in got.why  # unknown ones are named


def test_spot_that_never_finishes_is_not_chosen(cat):
    plan = _ckpt("pretrain-64vm", cat)
    got = purchase_options(cat.vm[H100], H100, plan.nodes, plan.run.wall_s, plan.checkpoints, 500.0)
    spot = next(o for o in got.options if o.name == "Spot")
    assert spot.usd is None and "never finishes" in spot.note
    assert got.cheapest != "Spot"


def test_more_evictions_cost_more(cat):
    plan = _ckpt("pretrain-64vm", cat)
    costs = [
        next(o.usd for o in purchase_options(
            cat.vm[H100], H100, plan.nodes, plan.run.wall_s, plan.checkpoints, rate
        ).options if o.name == "Spot")
        for rate in (0.0, 0.05, 0.2)
    ]  # fmt: skip
    assert costs[0] < costs[1] < costs[2]


def test_unknown_prices_stay_unknown():
    cat = load_catalog(defaults=False)
    vm = cat.vm["ND96asr_v4"]  # no public price at all
    got = purchase_options(vm, "ND96asr_v4", 4, 86400.0, None, 0.1)
    assert all(o.usd is None for o in got.options)
    assert got.cheapest is None


def test_a_one_vm_job_is_right_sized_to_the_cheapest_size_that_fits(cat):
    # 2 GPUs' worth of weights on an 8-GPU VM: the 2-GPU NC size is enough, the 1-GPU one is not
    need = 150e9
    got = right_size(cat, H100, 1, 2, need, 36000.0, uses_fabric=False)
    assert got is not None and got.vm_size == "NC80adis_H100_v5"
    assert got.saving_usd == pytest.approx((100.0 - 14.0) * 10)
    one_gpu = right_size(cat, H100, 1, 1, 80e9, 36000.0, uses_fabric=False)
    assert one_gpu is not None and one_gpu.vm_size == "NC40ads_H100_v5"


def test_a_fabric_job_is_not_right_sized_and_replicas_save_per_vm(cat):
    assert right_size(cat, H100, 1, 2, 150e9, 36000.0, uses_fabric=True) is None
    # four inference replicas, each on its own VM: the saving is four VMs'
    four = right_size(cat, H100, 4, 2, 150e9, 36000.0, uses_fabric=False)
    assert four is not None and four.saving_usd == pytest.approx((100.0 - 14.0) * 10 * 4)
    # nothing cheaper fits 8 GPUs' worth: no advice
    assert right_size(cat, H100, 1, 8, 600e9, 36000.0, uses_fabric=False) is None


def test_the_plan_compares_the_ways_to_pay_and_shows_them(cat, tmp_path):
    import tomllib

    import tomli_w

    from stoker.plan import markdown

    spec = tomllib.loads(open("examples/pretrain-64vm.toml", "rb").read().decode())
    spec["cluster"]["spot_evictions_per_day"] = 0.02
    path = tmp_path / "spot.toml"
    path.write_text(tomli_w.dumps(spec), "utf-8")
    plan = plan_job(load_spec(path), cat)
    by = {o.item: o for o in plan.cost.purchase}
    assert set(by) == {"pay-as-you-go", "Spot", "1-year reservation", "3-year reservation",
                       "savings plan"}  # fmt: skip
    cheapest = min((o for o in plan.cost.purchase if o.usd is not None), key=lambda o: o.usd)
    assert plan.cost.cheapest_purchase == cheapest.item
    assert cheapest.item in plan.cost.purchase_why
    text = markdown(plan)
    assert f"buy: {cheapest.item} (cheapest)" in text
    assert "idle day, GPU VMs deallocated" in text
    # the idle figures are the sum of the plan's own idle meters
    assert plan.cost.idle_per_hour_usd == pytest.approx(sum(i.usd for i in plan.cost.idle_meters))
    data = plan.to_dict()["cost"]
    assert data["cheapest_purchase"] == cheapest.item
    # without the eviction rate, Spot is not priced and says what to give
    plain = plan_job(load_spec("examples/pretrain-64vm.toml"), cat)
    spot = next(o for o in plain.cost.purchase if o.item == "Spot")
    assert spot.usd is None and "spot_evictions_per_day" in spot.note


def test_a_one_vm_job_gets_right_size_advice_in_the_plan(cat):
    plan = plan_job(load_spec("examples/finetune-1vm.toml"), cat)
    assert plan.vm_size == H100 and plan.nodes == 1
    need = plan.checkpoints.size_bytes
    fits = [
        n
        for n in ("NC40ads_H100_v5", "NC80adis_H100_v5")
        if cat.vm[n].gpus >= plan.gpus and cat.vm[n].gpus * cat.vm[n].gpu_memory >= need
    ]
    if fits:
        assert plan.cost.right_size.startswith(fits[0])
        assert plan.cost.right_size_saving_usd > 0
    else:
        assert plan.cost.right_size == ""
