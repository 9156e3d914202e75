"""The scale set model: terminate notifications on, the HPC image at a pinned version (never
``latest``), and one placement group only while the set fits one (100 VMs, or the limit an
approved support request declares)."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

import stoker
from stoker.catalog import load_catalog
from stoker.errors import ProvisionError
from stoker.provision import _res_compute
from stoker.provision._layout import ScaleSet

EXAMPLES = Path(__file__).parent.parent / "examples"
NOW = dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("vmss") / "out"
    stoker.provision(EXAMPLES / "pretrain-64vm.toml", out, now=NOW)
    return json.loads((out / "main.json").read_text())


def _vmss(template: dict) -> dict:
    (s,) = [r for r in template["resources"] if r["type"].endswith("virtualMachineScaleSets")]
    return s


def test_terminate_notifications_are_on(template):
    profile = _vmss(template)["properties"]["virtualMachineProfile"]["scheduledEventsProfile"]
    tn = profile["terminateNotificationProfile"]
    assert tn["enable"] is True
    # ISO 8601 minutes within what Azure takes (5 to 15).
    minutes = int(re.fullmatch(r"PT(\d+)M", tn["notBeforeTimeout"]).group(1))
    assert 5 <= minutes <= 15
    # Azure refuses terminate notifications on Spot: this scale set is regular priority.
    assert "priority" not in _vmss(template)["properties"]["virtualMachineProfile"]


def test_the_image_is_pinned_to_the_catalogs_version(template):
    ref = _vmss(template)["properties"]["virtualMachineProfile"]["storageProfile"]
    ref = ref["imageReference"]
    urn = load_catalog().provision.hpc_images["ND96isr_H100_v5"]
    assert ":".join([ref["publisher"], ref["offer"], ref["sku"], ref["version"]]) == urn
    assert re.fullmatch(r"22\.04\.\d{10}", ref["version"])
    for size, image in load_catalog().provision.hpc_images.items():
        assert not image.lower().endswith(":latest"), size


def test_an_unpinned_image_is_refused_naming_the_catalog_key():
    facts = SimpleNamespace(hpc_images={"ND96isr_H100_v5": "microsoft-dsvm:ubuntu-hpc:2204:latest"})
    with pytest.raises(ProvisionError, match=r"^catalog provision\.hpc_images\.ND96isr_H100_v5: "):
        _res_compute.image(facts, "ND96isr_H100_v5")


@pytest.mark.parametrize(
    ("vms", "limit", "single"),
    [(1, None, True), (100, None, True), (101, None, False), (300, 300, True), (301, 300, False)],
)
def test_one_placement_group_only_while_the_set_fits_one(vms, limit, single):
    lay = SimpleNamespace(placement_group_limit=limit)
    s = ScaleSet("vmss-x", vms, "ND96isr_H100_v5", 0)
    assert _res_compute.single_placement_group(lay, s) is single


def test_the_64_vm_example_is_one_placement_group(template):
    assert _vmss(template)["properties"]["singlePlacementGroup"] is True
