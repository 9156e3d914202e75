"""Unknown stays unknown: a tier with no published figure shows no figure (never a stall of 0 s),
and the plan says what it lacks and what to measure."""

import copy
import tomllib
from pathlib import Path

import pytest

from stoker.catalog import load_catalog
from stoker.plan import markdown, plan_job
from stoker.plan.facts import Limit
from stoker.plan.render import headline

VISION = tomllib.loads((Path(__file__).parent.parent / "examples/vision-32vm.toml").read_text())


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def on_mi300x(cat, **data):
    # ND MI300X v5 publishes no NVMe read rate (its size page gives none, nor does the ABG).
    spec = copy.deepcopy(VISION)
    spec["cluster"].update(vm_size="ND96isr_MI300X_v5", nodes=32)
    spec["data"].update(data)
    return plan_job(spec, cat)


def test_a_tier_without_a_figure_has_no_stall_and_says_what_to_measure(cat):
    p = on_mi300x(cat, tier="nvme")
    ch = p.data.chosen
    assert ch.deliverable_bps is None and ch.stall_per_step_s is None
    assert ch.limit == Limit.UNKNOWN and ch.unknown == ["ND MI300X v5 local NVMe read rate"]
    assert "stoker bench storage" in ch.measure and "--measured" in ch.measure
    assert p.step.data_stall_s is None and p.data.au is None
    assert p.to_dict()["step"]["data_stall_s"] is None
    warn = next(w for w in p.warnings if w.startswith("local NVMe (ND MI300X v5) has no published"))
    assert "cannot say whether the GPU waits" in warn and "stoker bench storage" in warn


def test_the_reports_print_unknown_never_0_s(cat):
    p = on_mi300x(cat, tier="nvme")
    text = markdown(p)
    assert "| unknown |" in text  # the data stall column of the step table
    assert "data stall 0 s" not in text and "stall 0 s" not in text
    step = dict(headline(p))["step"]
    assert "data stall unknown" in step
    rec = next(r for r in p.recommendations if r.need == "high-throughput training data")
    assert "stall unknown: no published figure for ND MI300X v5 local NVMe read rate" in rec.reason


def test_a_simpler_tier_without_a_figure_is_named_with_what_to_measure(cat):
    p = on_mi300x(cat)  # auto: Blob stalls, NVMe has no figure, a shared tier is chosen
    ch = p.data.chosen
    assert ch.tier not in ("blob", "nvme") and ch.stall_per_step_s is not None
    note = next(n for n in ch.notes if n.startswith("local NVMe (ND MI300X v5) might feed"))
    assert "ND MI300X v5 local NVMe read rate" in note and "stoker bench storage" in note


def test_a_measured_figure_makes_it_known(cat, tmp_path):
    measured = tmp_path / "m.json"
    measured.write_text('{"nvme": {"read": "40 GB/s", "write": "20 GB/s"}}')
    spec = copy.deepcopy(VISION)
    spec["cluster"].update(vm_size="ND96isr_MI300X_v5", nodes=32)
    spec["data"]["tier"] = "nvme"
    p = plan_job(spec, cat, measured=measured)
    assert p.data.chosen.deliverable_bps == pytest.approx(32 * 40e9)
    assert p.step.data_stall_s is not None and not p.data.chosen.unknown


def test_a_known_cap_with_an_unknown_one_before_it_is_an_upper_bound(cat):
    # Premium block blob publishes no account bandwidth: the NICs give a figure, an upper bound.
    p = on_mi300x(cat, tier="blob", blob_tier="premium")
    ch = p.data.chosen
    assert ch.limit == Limit.NIC and ch.stall_per_step_s is not None
    assert ch.unknown == ["Blob, premium block blob account egress"]
    warn = next(w for w in p.warnings if w.startswith("Blob, premium block blob delivers at most"))
    assert "may cap it sooner" in warn and "catalog override file" in warn  # not --measured
    assert "--measured" not in ch.measure
