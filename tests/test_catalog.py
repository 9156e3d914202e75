"""The built-in catalog: complete, sourced and dated; user overrides and their provenance."""

from __future__ import annotations

import datetime as dt
import json
import os
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from stoker.catalog import Catalog, catalog_layers, load_catalog
from stoker.catalog._load import merge_override
from stoker.errors import CatalogError, StokerError
from stoker.units import parse_bytes, parse_rate

TIB = 2**40


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog(defaults=False)


@pytest.fixture(scope="module")
def raw() -> dict:
    text = resources.files("stoker.catalog").joinpath("azure.toml").read_text("utf-8")
    return tomllib.loads(text)


def _write(path: Path, text: str, mtime: dt.datetime | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    if mtime is not None:
        stamp = mtime.timestamp()
        os.utime(path, (stamp, stamp))
    return path


# ------------------------------------------------------------------------------------ built-in


def test_builtin_catalog_loads(cat):
    assert isinstance(cat, Catalog)
    assert cat.catalog.currency == "USD"
    assert isinstance(cat.catalog.as_of, dt.date)
    assert len(cat.vm) >= 8


def test_default_load_with_no_user_layers_is_the_builtin(cat):
    # conftest points STOKER_PRICES at a missing file and unsets STOKER_CATALOG
    assert catalog_layers() == []
    assert load_catalog() == cat


def test_every_figure_has_a_dated_source(cat):
    rows = list(cat.figures())
    assert len(rows) > 200
    for row in rows:
        assert set(row) == {"entry", "field", "value", "source", "date", "verified"}
        assert row["source"] in cat.sources, row
        source = cat.sources[row["source"]]
        assert row["date"] == source.date.isoformat()
        date = dt.date.fromisoformat(row["date"])
        assert dt.date(2000, 1, 1) <= date <= cat.catalog.as_of, row
        assert row["value"] is not None
        assert row["field"] not in {"source", "cite", "note", "name", "family"}


def test_every_entry_has_figures_and_every_source_a_date(cat):
    where = {row["entry"] for row in cat.figures()}
    assert where == {name for name, _ in cat.entries()}
    for key, source in cat.sources.items():
        assert source.published or source.retrieved, key
        assert source.title and source.where, key


def test_figures_cover_every_value_written_in_the_toml(cat, raw):
    """No figure set in azure.toml is left out of the sourced listing."""
    listed = {(row["entry"], row["field"]) for row in cat.figures()}
    bookkeeping = {"source", "cite", "note", "name", "family"}
    for section in ("vm", "blob", "lustre", "files", "netapp"):
        for key, entry in raw[section].items():
            for field in set(entry) - bookkeeping:
                assert (f"{section}.{key}", field) in listed
    for section in ("fabric", "lustre_common", "reliability"):
        for field in set(raw[section]) - bookkeeping:
            assert (section, field) in listed


def test_cited_figures_name_their_own_source(cat):
    rows = {(r["entry"], r["field"]): r for r in cat.figures("vm.ND96isr_H100_v5")}
    assert rows[("vm.ND96isr_H100_v5", "gpus")]["source"] == "cd-ndh100v5"
    assert rows[("vm.ND96isr_H100_v5", "nvme_read")]["source"] == "abg"
    assert rows[("vm.ND96isr_H100_v5", "allreduce_busbw_floor")]["source"] == "nhc"
    price = rows[("vm.ND96isr_H100_v5", "price_per_hour")]
    assert price["source"] == "retail-api-h100-eastus"
    assert price["verified"] is False  # a third party's figure, flagged as such
    assert {r["entry"] for r in rows.values()} == {"vm.ND96isr_H100_v5"}


# ------------------------------------------------------------------------------------ VM sizes

# Microsoft calls the NC H100 v5 series "NCads H100 v5"; the catalog uses that name.
FAMILIES = {
    "ND H100 v5": "ND96isr_H100_v5",
    "ND H200 v5": "ND96isr_H200_v5",
    "ND MI300X v5": "ND96isr_MI300X_v5",
    "ND A100 v4": "ND96asr_v4",
    "NDm A100 v4": "ND96amsr_A100_v4",
    "ND GB200 v6": "ND128isr_NDR_GB200_v6",
    "NCads H100 v5": "NC40ads_H100_v5",
    "NC A100 v4": "NC24ads_A100_v4",
}


def test_the_eight_vm_families_are_present(cat):
    families = {vm.family for vm in cat.vm.values()}
    assert families == set(FAMILIES)
    for family, size in FAMILIES.items():
        assert cat.vm[size].family == family


def test_nd_h100_v5_figures_in_base_units(cat):
    vm = cat.vm["ND96isr_H100_v5"]
    assert vm.gpus == 8
    assert vm.gpu_memory == 80e9
    assert vm.local_nvme == 28 * TIB
    assert vm.ib_links == 8
    assert vm.ib_rate == 50e9  # 400 Gb/s
    assert vm.ib_per_vm == pytest.approx(8 * 47.5e9)  # 8 rails at the 380 Gb/s floor
    assert vm.frontend_nic == 10e9  # 80 Gb/s
    assert vm.has_infiniband
    assert not cat.vm["NC40ads_H100_v5"].has_infiniband


def test_nvl72_domain_spans_eighteen_vms(cat):
    assert cat.vm["ND128isr_NDR_GB200_v6"].nvlink_domain_vms == 18
    assert cat.vm["ND128isr_NDR_GB200_v6"].gpus == 4


def test_fabric_limits(cat):
    assert cat.fabric.scale_set_vms == 100
    assert cat.fabric.scale_set_vms_on_request == 300
    assert cat.fabric.availability_set_vms == 200
    assert cat.fabric.net_ring_latency == pytest.approx(9.6e-6)


@pytest.mark.parametrize(
    "sku, mb_per_tib, min_tib, max_tib, step_tib",
    [
        ("AMLFS-Durable-Premium-40", 40, 48, 768, 48),
        ("AMLFS-Durable-Premium-125", 125, 16, 128, 16),
        ("AMLFS-Durable-Premium-250", 250, 8, 128, 8),
        ("AMLFS-Durable-Premium-500", 500, 4, 128, 4),
    ],
)
def test_lustre_skus(cat, raw, sku, mb_per_tib, min_tib, max_tib, step_tib):
    lustre = cat.lustre[sku]
    assert lustre.throughput_per_tib == mb_per_tib * 1e6
    assert (lustre.min_size, lustre.max_size, lustre.step) == (
        min_tib * TIB,
        max_tib * TIB,
        step_tib * TIB,
    )
    written = raw["lustre"][sku]
    assert lustre.throughput_per_tib == parse_rate(written["throughput_per_tib"])
    assert lustre.min_size == parse_bytes(written["min_size"])
    assert lustre.max_size == parse_bytes(written["max_size"])
    assert lustre.step == parse_bytes(written["step"])


def test_lustre_has_exactly_the_five_tiers(cat):
    # The tiers MLPerf Storage v3.0 ran on AMLFS (learn.microsoft.com/azure/azure-managed-lustre/
    # mlperf-storage-v3-results, 2026-09-01): 20, 40, 125, 250 and 500.
    assert set(cat.lustre) == {f"AMLFS-Durable-Premium-{n}" for n in (20, 40, 125, 250, 500)}


def test_vm_without_public_price_has_none(cat):
    vm = cat.vm["ND96asr_v4"]
    assert vm.price_per_hour is None
    assert vm.price_region is None
    fields = {row["field"] for row in cat.figures("vm.ND96asr_v4")}
    assert "price_per_hour" not in fields
    assert cat.vm["ND96isr_H100_v5"].price_per_hour == pytest.approx(98.32)


# ------------------------------------------------------------------------------------ overrides

OVERRIDE = """
[vm.ND96isr_H100_v5]
price_per_hour = 77.5

[vm.ND96isr_B300_v7]
family = "ND B300 v7"
gpu = "B300"
gpus = 8
gpu_memory = "288 GB"
vcpus = 128
memory = "2000 GB"
scaleup = "NVLink 5 + NVSwitch"
local_nvme = "32 TiB"
frontend_nic = "200 Gb/s"
price_per_hour = 150.0
"""


@pytest.fixture
def override(tmp_path) -> Path:
    return _write(tmp_path / "mine.toml", OVERRIDE, mtime=dt.datetime(2026, 10, 15, 12, 0))


def test_override_changes_a_price_and_adds_a_vm(override, cat):
    over = load_catalog([override], defaults=False)
    assert over.vm["ND96isr_H100_v5"].price_per_hour == 77.5
    new = over.vm["ND96isr_B300_v7"]
    assert new.gpus == 8
    assert new.gpu_memory == 288e9
    assert new.local_nvme == 32 * TIB
    assert new.frontend_nic == 25e9
    assert new.price_per_hour == 150.0
    # the rest of the built-in is untouched
    assert over.vm["ND96isr_H200_v5"] == cat.vm["ND96isr_H200_v5"]
    assert over.fabric == cat.fabric


def test_overridden_figure_is_cited_to_the_override_file(override):
    over = load_catalog([override], defaults=False)
    vm = over.vm["ND96isr_H100_v5"]
    assert vm.source_of("price_per_hour") == "user:mine.toml"
    source = over.sources["user:mine.toml"]
    assert source.where == str(override)
    assert source.date == dt.date(2026, 10, 15)  # the file's modification date
    row = next(r for r in over.figures("vm.ND96isr_H100_v5") if r["field"] == "price_per_hour")
    assert (row["source"], row["date"], row["value"]) == ("user:mine.toml", "2026-10-15", 77.5)


def test_untouched_figures_keep_their_original_source(override, cat):
    over = load_catalog([override], defaults=False)
    before = {r["field"]: r for r in cat.figures("vm.ND96isr_H100_v5")}
    after = {r["field"]: r for r in over.figures("vm.ND96isr_H100_v5")}
    assert set(before) == set(after)
    for field in before:
        if field == "price_per_hour":
            continue
        assert after[field] == before[field], field
    assert after["gpus"]["source"] == "cd-ndh100v5"
    assert after["nvme_read"]["source"] == "abg"


def test_a_new_vm_is_sourced_to_the_override_file(override):
    over = load_catalog([override], defaults=False)
    rows = list(over.figures("vm.ND96isr_B300_v7"))
    assert rows
    assert {r["source"] for r in rows} == {"user:mine.toml"}
    assert {r["date"] for r in rows} == {"2026-10-15"}


def test_override_may_cite_its_own_source(tmp_path):
    path = _write(
        tmp_path / "quote.toml",
        """
[sources.account-team]
title = "Quote from our account team"
where = "email of 2026-10-01"
retrieved = "2026-10-01"

[vm.ND96isr_H100_v5]
price_per_hour = 70.0
cite = { price_per_hour = "account-team" }
""",
    )
    over = load_catalog([path], defaults=False)
    vm = over.vm["ND96isr_H100_v5"]
    assert vm.price_per_hour == 70.0
    assert vm.source_of("price_per_hour") == "account-team"
    assert over.sources["account-team"].date == dt.date(2026, 10, 1)
    assert vm.source_of("gpus") == "cd-ndh100v5"


def test_override_naming_a_source_does_not_reattribute_untouched_figures(tmp_path):
    # The override sets `source` for the one figure it changes; the built-in figures it does not
    # touch (gpus, local_nvme, ...) must stay cited to the VM size documentation.
    path = _write(
        tmp_path / "quote.toml",
        """
[sources.account-team]
title = "Quote from our account team"
where = "email of 2026-10-01"
retrieved = "2026-10-01"

[vm.ND96isr_H100_v5]
source = "account-team"
price_per_hour = 70.0
""",
    )
    over = load_catalog([path], defaults=False)
    vm = over.vm["ND96isr_H100_v5"]
    assert vm.source_of("price_per_hour") == "account-team"
    assert vm.source_of("gpus") == "cd-ndh100v5"
    assert vm.source_of("local_nvme") == "cd-ndh100v5"


def test_two_override_files_with_the_same_name_keep_their_own_provenance(tmp_path):
    first = _write(
        tmp_path / "team-a" / "override.toml", "[vm.ND96isr_H100_v5]\nprice_per_hour = 71.0\n"
    )
    second = _write(
        tmp_path / "team-b" / "override.toml", "[vm.ND96isr_H200_v5]\nprice_per_hour = 72.0\n"
    )
    over = load_catalog([first, second], defaults=False)
    h100 = over.sources[over.vm["ND96isr_H100_v5"].source_of("price_per_hour")]
    h200 = over.sources[over.vm["ND96isr_H200_v5"].source_of("price_per_hour")]
    assert h100.where == str(first)
    assert h200.where == str(second)


def test_merge_override_does_not_change_its_arguments(tmp_path, raw):
    path = _write(tmp_path / "o.toml", "[vm.ND96isr_H100_v5]\nprice_per_hour = 1.0\n")
    base = tomllib.loads(
        resources.files("stoker.catalog").joinpath("azure.toml").read_text("utf-8")
    )
    override = {"vm": {"ND96isr_H100_v5": {"price_per_hour": 1.0}}}
    merged = merge_override(base, override, path)
    assert merged["vm"]["ND96isr_H100_v5"]["price_per_hour"] == 1.0
    assert base == raw
    assert override == {"vm": {"ND96isr_H100_v5": {"price_per_hour": 1.0}}}
    assert load_catalog(defaults=False).vm["ND96isr_H100_v5"].price_per_hour == 98.32


def test_later_override_wins(tmp_path):
    first = _write(tmp_path / "first.toml", "[vm.ND96isr_H100_v5]\nprice_per_hour = 71.0\n")
    second = _write(tmp_path / "second.toml", "[vm.ND96isr_H100_v5]\nprice_per_hour = 72.0\n")
    over = load_catalog([first, second], defaults=False)
    assert over.vm["ND96isr_H100_v5"].price_per_hour == 72.0
    assert over.vm["ND96isr_H100_v5"].source_of("price_per_hour") == "user:second.toml"
    back = load_catalog([second, first], defaults=False)
    assert back.vm["ND96isr_H100_v5"].price_per_hour == 71.0


def test_override_of_a_singleton_section(tmp_path):
    path = _write(tmp_path / "fabric.toml", "[fabric]\nscale_set_vms = 120\n")
    over = load_catalog([path], defaults=False)
    assert over.fabric.scale_set_vms == 120
    assert over.fabric.source_of("scale_set_vms") == "user:fabric.toml"
    assert over.fabric.availability_set_vms == 200
    assert over.fabric.source_of("availability_set_vms") == "cd-setup-infiniband"


# ------------------------------------------------------------------------------------ bad overrides


BAD_OVERRIDES = [
    ("section.toml", "[gpus.H100]\nprice = 1\n", ["[gpus]"]),
    (
        "unit.toml",
        '[vm.ND96isr_H100_v5]\nfrontend_nic = "80 Gbs"\n',
        ["vm.ND96isr_H100_v5.frontend_nic", "'80 Gbs'", "400 Gb/s"],
    ),
    (
        "cite.toml",
        '[vm.ND96isr_H100_v5]\nprice_per_hour = 1.0\ncite = { price_per_hour = "nowhere" }\n',
        ["vm.ND96isr_H100_v5.price_per_hour", "'nowhere'"],
    ),
    (
        "typo.toml",
        "[vm.ND96isr_H100_v5]\nprice_per_hr = 1.0\n",
        ["vm.ND96isr_H100_v5.price_per_hr", "unknown field"],
    ),
    (
        "negative.toml",
        "[vm.ND96isr_H100_v5]\nprice_per_hour = -1.0\n",
        ["vm.ND96isr_H100_v5.price_per_hour"],
    ),
    ("blobprice.toml", "[blob.standard]\nprice_hot_gb_month = -1\n", ["blob.standard.price_hot"]),
    ("incomplete.toml", '[vm.ND_new]\nfamily = "x"\ngpu = "x"\n', ["vm.ND_new.gpus"]),
    (
        "cite-field.toml",
        '[vm.ND96isr_H100_v5]\ncite = { price_per_hr = "abg" }\n',
        ["price_per_hr"],
    ),
    ("notable.toml", "[vm]\nND96isr_H100_v5 = 3\n", ["vm.ND96isr_H100_v5", "table"]),
    ("toml.toml", "[vm.ND96isr_H100_v5\nprice_per_hour = 1.0\n", ["not valid TOML", "line 1"]),
]


@pytest.mark.parametrize(
    "name, text, names", [pytest.param(*case, id=case[0]) for case in BAD_OVERRIDES]
)
def test_bad_override_raises_catalog_error_naming_file_and_field(tmp_path, name, text, names):
    path = _write(tmp_path / name, text)
    with pytest.raises(CatalogError) as info:
        load_catalog([path], defaults=False)
    message = str(info.value)
    assert str(path) in message
    for part in names:
        assert part in message, (part, message)


def test_missing_override_file(tmp_path):
    path = tmp_path / "absent.toml"
    with pytest.raises(CatalogError, match="does not exist") as info:
        load_catalog([path], defaults=False)
    assert str(path) in str(info.value)


def test_catalog_error_is_a_stoker_error(tmp_path):
    with pytest.raises(StokerError):
        load_catalog([tmp_path / "absent.toml"], defaults=False)


# ------------------------------------------------------------------------------------ layering


def test_stoker_catalog_env_layers_in_order(tmp_path, monkeypatch):
    first = _write(tmp_path / "one.toml", "[vm.ND96isr_H100_v5]\nprice_per_hour = 71.0\n")
    second = _write(
        tmp_path / "two.toml",
        "[vm.ND96isr_H100_v5]\nprice_per_hour = 72.0\n"
        "[vm.ND96isr_H200_v5]\nprice_per_hour = 62.0\n",
    )
    monkeypatch.setenv("STOKER_CATALOG", f"{first}{os.pathsep}{second}")
    assert catalog_layers() == [first, second]
    over = load_catalog()
    assert over.vm["ND96isr_H100_v5"].price_per_hour == 72.0
    assert over.vm["ND96isr_H200_v5"].price_per_hour == 62.0
    assert over.vm["ND96isr_H100_v5"].source_of("price_per_hour") == "user:two.toml"
    # without defaults the environment is ignored
    assert load_catalog(defaults=False).vm["ND96isr_H100_v5"].price_per_hour == 98.32


def test_explicit_overrides_go_on_top_of_the_env(tmp_path, monkeypatch):
    env = _write(tmp_path / "env.toml", "[vm.ND96isr_H100_v5]\nprice_per_hour = 71.0\n")
    cli = _write(tmp_path / "cli.toml", "[vm.ND96isr_H100_v5]\nprice_per_hour = 73.0\n")
    monkeypatch.setenv("STOKER_CATALOG", str(env))
    assert catalog_layers([cli]) == [env, cli]
    assert load_catalog([cli]).vm["ND96isr_H100_v5"].price_per_hour == 73.0


def test_prices_file_is_the_first_layer(tmp_path, monkeypatch):
    prices = _write(tmp_path / "prices.toml", "[vm.ND96isr_H100_v5]\nprice_per_hour = 60.0\n")
    monkeypatch.setenv("STOKER_PRICES", str(prices))
    assert load_catalog().vm["ND96isr_H100_v5"].price_per_hour == 60.0
    env = _write(tmp_path / "env.toml", "[vm.ND96isr_H100_v5]\nprice_per_hour = 61.0\n")
    monkeypatch.setenv("STOKER_CATALOG", str(env))
    assert catalog_layers() == [prices, env]
    assert load_catalog().vm["ND96isr_H100_v5"].price_per_hour == 61.0


def test_missing_prices_file_is_skipped_but_missing_env_layer_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("STOKER_PRICES", str(tmp_path / "nope.toml"))
    assert catalog_layers() == []
    monkeypatch.setenv("STOKER_CATALOG", str(tmp_path / "typo.toml"))
    with pytest.raises(CatalogError, match="typo.toml"):
        load_catalog()


def test_bad_env_layer_error_names_the_file(tmp_path, monkeypatch):
    bad = _write(tmp_path / "bad.toml", '[vm.ND96isr_H100_v5]\nib_rate = "400 Gbs"\n')
    monkeypatch.setenv("STOKER_CATALOG", str(bad))
    with pytest.raises(CatalogError) as info:
        load_catalog()
    assert str(bad) in str(info.value)
    assert "vm.ND96isr_H100_v5.ib_rate" in str(info.value)


@pytest.mark.parametrize(
    "name",
    ["Standard_ND96isr_H100_v5", "ND96isr_H100_v5", "standard_nd96isr_h100_v5", "ND96ISR_H100_V5"],
)
def test_vm_sizes_are_found_with_or_without_the_standard_prefix(cat, name):
    # ARM, the Azure CLI and the metadata service write Standard_ND96isr_H100_v5.
    assert cat.vm_key(name) == "ND96isr_H100_v5"
    assert cat.vm_key("Standard_ND96isr_H999_v9") is None


def test_an_override_may_key_a_vm_as_arm_spells_it(tmp_path):
    mine = tmp_path / "mine.toml"
    mine.write_text("[vm.Standard_ND96asr_v4]\nprice_per_hour = 27.20\n")
    cat = load_catalog([mine], defaults=False)
    assert "Standard_ND96asr_v4" not in cat.vm
    vm = cat.vm["ND96asr_v4"]
    assert vm.price_per_hour == 27.20 and vm.gpus == 8  # merged into the built-in entry


def test_catalog_cli_entry_takes_the_arm_spelling(tmp_path):
    from typer.testing import CliRunner

    from stoker.cli import app

    runner = CliRunner()
    bare = runner.invoke(app, ["catalog", "--entry", "vm.ND96isr_H100_v5", "--json"])
    for entry in ("Standard_ND96isr_H100_v5", "vm.Standard_ND96isr_H100_v5", "vm.nd96isr_h100_v5"):
        result = runner.invoke(app, ["catalog", "--entry", entry, "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == json.loads(bare.stdout), entry


def test_lustre_tiers_are_rated_2000_mb_s_per_step_as_mlperf_storage_v3_states(cat):
    # learn.microsoft.com/azure/azure-managed-lustre/mlperf-storage-v3-results (2026-09-01):
    # "Each capacity increment provides 2,000 MB/s"; increments 96/48/16/8/4 TiB; file systems
    # up to 25,632 TiB.
    for tier, step in ((20, 96), (40, 48), (125, 16), (250, 8), (500, 4)):
        sku = cat.lustre[f"AMLFS-Durable-Premium-{tier}"]
        assert sku.step == step * TIB and sku.throughput_per_step == 2000e6
        assert sku.max_size_on_request >= sku.max_size
    assert cat.lustre_common.max_size_on_request == 25632 * TIB
    reads = cat.lustre_common.delivered_read
    assert reads[0] == (20000e6, pytest.approx(18.6e9)) and len(reads) == 5
