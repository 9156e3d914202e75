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
    # Ubuntu 24.04: its python3 (3.12) runs stoker; 22.04's (3.10) does not.
    assert ref["sku"] == "2404" and re.fullmatch(r"24\.04\.\d{10}", ref["version"])
    facts = load_catalog().provision
    for size, image in facts.hpc_images.items():
        assert not image.lower().endswith(":latest"), size
        assert facts.python_of(image) >= (3, 11), size


def _override(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "images.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("override", "message"),
    [
        # A 22.04 pin: the catalog knows its Python is 3.10, older than stoker's 3.11.
        (
            'hpc_images = { ND96isr_H100_v5 = "microsoft-dsvm:ubuntu-hpc:2204:22.04.2026072901" }',
            r"its python3 is 3\.10 \(provision\.image_python\) and stoker needs 3\.11",
        ),
        # An image the catalog says nothing about: refused, not guessed.
        (
            'hpc_images = { ND96isr_H100_v5 = "someone:their-image:v1:1.0.0" }',
            r"does not say which Python .* image_python = \{ \"someone:their-image:v1\" = ",
        ),
    ],
)
def test_an_image_whose_python_is_too_old_or_unknown_is_refused(tmp_path, override, message):
    catalog = _override(tmp_path, f'[provision]\nsource = "mine"\n{override}\n')
    catalog.write_text('[sources.mine]\ntitle = "t"\nwhere = "w"\nretrieved = "2026-12-01"\n'
                       + catalog.read_text())  # fmt: skip
    out = tmp_path / "out"
    with pytest.raises(ProvisionError, match=r"^catalog provision\.hpc_images\.ND96isr_H100_v5: "
                       + ".*" + message):  # fmt: skip
        stoker.provision(EXAMPLES / "pretrain-64vm.toml", out, catalog=catalog, now=NOW)
    assert not out.exists()
    # Listed as 3.11 or later, the same image is taken.
    image = override.split('"')[1]
    key = image.rsplit(":", 1)[0]
    catalog.write_text(catalog.read_text() + f'image_python = {{ "{key}" = "3.12" }}\n')
    stoker.provision(EXAMPLES / "pretrain-64vm.toml", out, catalog=catalog, now=NOW)
    ref = _vmss(json.loads((out / "main.json").read_text()))["properties"]
    assert ref["virtualMachineProfile"]["storageProfile"]["imageReference"]["offer"] in image


def test_the_cli_refuses_an_old_python_image_in_one_line_exit_2(tmp_path):
    from typer.testing import CliRunner

    from stoker.cli import app

    catalog = _override(
        tmp_path,
        '[provision]\nimage_python = { "microsoft-dsvm:ubuntu-hpc:2404" = "3.10" }\n',
    )
    out = tmp_path / "out"
    args = [
        "provision",
        str(EXAMPLES / "pretrain-64vm.toml"),
        "--out",
        str(out),
        "-c",
        str(catalog),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "provision.hpc_images.ND96isr_H100_v5" in line and "3.10" in line
    assert not out.exists()


@pytest.mark.parametrize("value", ['"3"', '"3.12.1"', '"three"'])
def test_image_python_takes_major_minor_only(tmp_path, value):
    from stoker.errors import CatalogError

    catalog = _override(
        tmp_path, f'[provision]\nimage_python = {{ "microsoft-dsvm:ubuntu-hpc:2404" = {value} }}\n'
    )
    with pytest.raises(CatalogError, match="image_python"):
        load_catalog([catalog])


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
