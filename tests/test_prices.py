"""Refreshing VM prices from the Azure Retail Prices API, against a loopback server.

The prices in tests/fixtures/retail_prices_page*.json are made up (round numbers: Linux 90.00,
Windows 100.00, Spot 20.00, Low Priority 30.00, a 1-year reservation 500,000.00, and 25.00 on
page 2); only the format is the API's.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stoker.catalog import load_catalog, refresh_prices
from stoker.catalog._prices import linux_on_demand
from stoker.cli import app
from stoker.errors import PriceError

FIXTURES = Path(__file__).parent / "fixtures"
SIZES = ["ND96isr_H100_v5", "ND96amsr_A100_v4", "ND96asr_v4"]


def _today() -> dt.date:
    return dt.date.today()


def _page1_rows() -> list[dict]:
    return json.loads((FIXTURES / "retail_prices_page1.json").read_text("utf-8"))["Items"]


def _no_tmp_left(directory: Path) -> bool:
    return not [p for p in directory.iterdir() if p.name.endswith(".tmp")]


@pytest.fixture
def existing(tmp_path) -> Path:
    """A prices file from an earlier refresh, which a failed refresh must leave alone."""
    path = tmp_path / "prices.toml"
    path.write_text(
        '[sources.retail-api-2026-01-01]\ntitle = "earlier refresh"\nwhere = "x"\n'
        'retrieved = "2026-01-01"\n\n[vm.ND96isr_H100_v5]\nprice_per_hour = 11.0\n'
        'cite = { price_per_hour = "retail-api-2026-01-01" }\n',
        "utf-8",
    )
    return path


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------ the fixture


def test_fixture_is_in_the_api_format():
    for name in ("retail_prices_page1.json", "retail_prices_page2.json"):
        page = json.loads((FIXTURES / name).read_text("utf-8"))
        assert page["BillingCurrency"] == "USD"
        assert page["CustomerEntityType"] == "Retail"
        assert page["Count"] == len(page["Items"])
        for row in page["Items"]:
            assert row["serviceName"] == "Virtual Machines"
            assert row["armSkuName"].startswith("Standard_")
            assert row["unitOfMeasure"] == "1 Hour"
            assert row["type"] in ("Consumption", "Reservation")
            assert ("reservationTerm" in row) == (row["type"] == "Reservation")


# ------------------------------------------------------------------------------------ refresh


def test_refresh_writes_linux_on_demand_prices(price_server, tmp_path):
    path = tmp_path / "cfg" / "prices.toml"
    found = refresh_prices(SIZES, "eastus", path)

    assert {k: v.per_hour for k, v in found.items()} == {
        "ND96isr_H100_v5": 90.0,
        "ND96amsr_A100_v4": 25.0,
    }
    assert found["ND96isr_H100_v5"].region == "eastus"
    assert found["ND96isr_H100_v5"].currency == "USD"
    assert found["ND96isr_H100_v5"].meter == "ND96isrH100v5"
    assert found["ND96isr_H100_v5"].effective == "2026-01-01"

    written = tomllib.loads(path.read_text("utf-8"))
    source = f"retail-api-{_today().isoformat()}"
    assert written["sources"][source]["retrieved"] == _today().isoformat()
    assert written["vm"] == {
        "ND96amsr_A100_v4": {
            "price_per_hour": 25.0,
            "price_region": "eastus",
            "cite": {"price_per_hour": source, "price_region": source},
        },
        "ND96isr_H100_v5": {
            "price_per_hour": 90.0,
            "price_region": "eastus",
            "cite": {"price_per_hour": source, "price_region": source},
        },
    }
    assert _no_tmp_left(path.parent)


def test_refresh_asks_for_the_sizes_and_region_then_follows_next_page(price_server, tmp_path):
    refresh_prices(SIZES, "eastus", tmp_path / "prices.toml")
    query = price_server.first_query()
    flt = query["$filter"][0]
    assert "serviceName eq 'Virtual Machines'" in flt
    assert "armRegionName eq 'eastus'" in flt
    for size in SIZES:
        assert f"armSkuName eq 'Standard_{size}'" in flt
    assert any(r.startswith("/page2") for r in price_server.requests)
    assert len(price_server.requests) == 2


def test_refreshed_prices_load_with_a_source_dated_today(price_server, tmp_path):
    path = tmp_path / "prices.toml"
    refresh_prices(SIZES, "eastus", path)
    cat = load_catalog([path], defaults=False)
    vm = cat.vm["ND96isr_H100_v5"]
    assert vm.price_per_hour == 90.0
    assert vm.price_region == "eastus"
    source = cat.sources[vm.source_of("price_per_hour")]
    assert source.date == _today()
    assert source.verified is True
    row = next(r for r in cat.figures("vm.ND96isr_H100_v5") if r["field"] == "price_per_hour")
    assert (row["value"], row["date"]) == (90.0, _today().isoformat())
    assert cat.vm["ND96amsr_A100_v4"].price_per_hour == 25.0
    # a size the API did not list keeps what it had (here: no public price)
    assert cat.vm["ND96asr_v4"].price_per_hour is None
    # and nothing but the price moved
    assert vm.source_of("gpus") == "cd-ndh100v5"
    assert vm.gpus == 8


def test_refresh_date_names_the_source(price_server, tmp_path):
    path = tmp_path / "prices.toml"
    refresh_prices(SIZES, "eastus", path, today=dt.date(2026, 11, 1))
    cat = load_catalog([path], defaults=False)
    assert cat.vm["ND96isr_H100_v5"].source_of("price_per_hour") == "retail-api-2026-11-01"
    assert cat.sources["retail-api-2026-11-01"].date == dt.date(2026, 11, 1)


def test_refresh_replaces_an_existing_file(price_server, existing):
    refresh_prices(SIZES, "eastus", existing)
    assert load_catalog([existing], defaults=False).vm["ND96isr_H100_v5"].price_per_hour == 90.0
    assert _no_tmp_left(existing.parent)


# ------------------------------------------------------------------------------------ row choice


@pytest.mark.parametrize(
    "which",
    [
        pytest.param(lambda r: "Windows" in r["productName"], id="windows"),
        pytest.param(lambda r: r["meterName"].endswith("Spot"), id="spot"),
        pytest.param(lambda r: r["meterName"].endswith("Low Priority"), id="low-priority"),
        pytest.param(lambda r: r["type"] == "Reservation", id="reservation"),
    ],
)
def test_only_linux_pay_as_you_go_rows_count(which):
    rows = [r for r in _page1_rows() if which(r)]
    assert len(rows) == 1
    assert linux_on_demand([{"Items": rows}]) == {}


def test_linux_row_is_chosen_whatever_the_order():
    rows = _page1_rows()
    for ordering in (rows, rows[::-1]):
        found = linux_on_demand([{"Items": ordering}])
        assert found["ND96isr_H100_v5"].per_hour == 90.0


def test_newest_linux_row_wins():
    linux = next(r for r in _page1_rows() if r["retailPrice"] == 90.0)
    older = {**linux, "retailPrice": 80.0, "effectiveStartDate": "2025-06-01T00:00:00Z"}
    for ordering in ([linux, older], [older, linux]):
        assert linux_on_demand([{"Items": ordering}])["ND96isr_H100_v5"].per_hour == 90.0


# ------------------------------------------------------------------------------------ failures


def test_server_error_raises_and_leaves_the_file_unchanged(price_server, existing):
    price_server.mode = "500"
    before = existing.read_bytes()
    with pytest.raises(PriceError) as info:
        refresh_prices(SIZES, "eastus", existing)
    assert "500" in str(info.value)
    assert "unchanged" in str(info.value)
    assert existing.read_bytes() == before
    assert _no_tmp_left(existing.parent)


def test_connection_refused_raises_and_leaves_the_file_unchanged(monkeypatch, existing):
    monkeypatch.setenv("STOKER_PRICES_API", f"http://127.0.0.1:{_closed_port()}/api/retail/prices")
    before = existing.read_bytes()
    with pytest.raises(PriceError) as info:
        refresh_prices(SIZES, "eastus", existing)
    message = str(info.value)
    assert "network" in message
    assert "unchanged" in message
    assert existing.read_bytes() == before
    assert _no_tmp_left(existing.parent)


@pytest.mark.parametrize(
    "mode, says", [("no-items", "Items"), ("not-json", "JSON"), ("empty", "none of")]
)
def test_unusable_answer_raises_and_leaves_the_file_unchanged(price_server, existing, mode, says):
    price_server.mode = mode
    before = existing.read_bytes()
    with pytest.raises(PriceError, match=says):
        refresh_prices(SIZES, "eastus", existing)
    assert existing.read_bytes() == before
    assert _no_tmp_left(existing.parent)


def test_failed_refresh_creates_no_file(price_server, tmp_path):
    price_server.mode = "500"
    path = tmp_path / "new" / "prices.toml"
    with pytest.raises(PriceError):
        refresh_prices(SIZES, "eastus", path)
    assert not path.exists()


# ------------------------------------------------------------------------------------ CLI


def test_cli_refresh_writes_the_output_file(price_server, tmp_path):
    out = tmp_path / "out" / "prices.toml"
    result = CliRunner().invoke(
        app, ["catalog", "prices", "--refresh", "--output", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert out.is_file()
    assert _no_tmp_left(out.parent)
    written = tomllib.loads(out.read_text("utf-8"))
    assert written["vm"]["ND96isr_H100_v5"]["price_per_hour"] == 90.0
    data = json.loads(result.stdout)
    # what the refresh did is in the JSON too, not only on stderr
    refresh = {k: data["refresh"][k] for k in ("path", "region", "written", "not_found")}
    assert refresh == {
        "path": str(out),
        "region": "eastus",
        "written": 2,
        "not_found": [
            v for v in load_catalog().vm if v not in ("ND96isr_H100_v5", "ND96amsr_A100_v4")
        ],
    }
    rows = {r["vm_size"]: r for r in data["prices"]}
    assert rows["ND96isr_H100_v5"]["price_per_hour"] == 90.0
    assert rows["ND96isr_H100_v5"]["date"] == _today().isoformat()
    assert rows["ND96isr_H100_v5"]["source"] == f"retail-api-{_today().isoformat()}"
    assert rows["ND96amsr_A100_v4"]["price_per_hour"] == 25.0
    assert rows["ND96asr_v4"]["price_per_hour"] is None
    assert "wrote 2 prices for eastus" in result.stderr


def test_cli_refresh_defaults_to_the_prices_file(price_server, isolated_env):
    # conftest points STOKER_PRICES at a file that does not exist yet
    assert not isolated_env.exists()
    result = CliRunner().invoke(app, ["catalog", "prices", "--refresh", "--json"])
    assert result.exit_code == 0, result.output
    assert isolated_env.is_file()
    data = json.loads(result.stdout)
    assert data["refresh"]["path"] == str(isolated_env) and data["refresh"]["written"] == 2
    rows = {r["vm_size"]: r for r in data["prices"]}
    assert rows["ND96isr_H100_v5"]["price_per_hour"] == 90.0
    # the prices file is now the first layer of every load
    assert load_catalog().vm["ND96isr_H100_v5"].price_per_hour == 90.0


def test_cli_refresh_failure_exits_2_and_keeps_the_file(price_server, existing):
    price_server.mode = "500"
    before = existing.read_bytes()
    result = CliRunner().invoke(app, ["catalog", "prices", "--refresh", "--output", str(existing)])
    assert result.exit_code == 2
    assert "error:" in result.stderr
    assert "Traceback" not in result.output
    assert existing.read_bytes() == before


def test_cli_prices_without_refresh_lists_the_catalog(price_server):
    result = CliRunner().invoke(app, ["catalog", "prices", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["vm_size"]: r for r in json.loads(result.stdout)}
    assert rows["ND96isr_H100_v5"]["price_per_hour"] == 98.32
    assert rows["ND96isr_H100_v5"]["verified"] is False
    assert rows["ND96asr_v4"] == {
        "vm_size": "ND96asr_v4",
        "price_per_hour": None,
        "region": None,
        "source": None,
        "date": None,
        "verified": None,
    }
    assert price_server.requests == []  # no refresh, no network


def test_price_rows_are_the_catalogs_and_a_zero_price_is_a_price():
    """The rows were built in the CLI, where ``if vm.price_per_hour`` took 0.0 for missing."""
    cat = load_catalog()
    rows = {r["vm_size"]: r for r in cat.vm_prices()}
    assert rows["ND96asr_v4"]["source"] is None and "ND96asr_v4" in cat.unpriced_vms()
    free = cat.vm["ND96isr_H100_v5"].model_copy(update={"price_per_hour": 0.0})
    cat = cat.model_copy(update={"vm": {**cat.vm, "ND96isr_H100_v5": free}})
    row = next(r for r in cat.vm_prices() if r["vm_size"] == "ND96isr_H100_v5")
    assert row["price_per_hour"] == 0.0 and row["source"] is not None and row["date"] is not None
    assert "ND96isr_H100_v5" not in cat.unpriced_vms()


@pytest.mark.parametrize("sub", ["prices", "sources"])
def test_json_options_say_what_they_print(sub):
    result = CliRunner().invoke(app, ["catalog", sub, "--help"])
    assert result.exit_code == 0
    line = next(x for x in result.stdout.splitlines() if "--json" in x)
    assert "JSON" in line.split("--json", 1)[1]
