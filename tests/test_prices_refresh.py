"""``stoker catalog prices --refresh`` reads every meter, not only VM hours, against a loopback
Retail Prices API that answers each ``$filter`` as the API does: ``{"Items", "NextPageLink",
"Count"}``, several pages where a product has many rows.

The prices are made up (round numbers chosen for the tests); only the rows' shape is the API's.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import tomllib
from urllib.parse import parse_qs, urlsplit

import pytest
from typer.testing import CliRunner

from loopback_http import Quiet, serving
from stoker.catalog import load_catalog, refresh_all
from stoker.catalog._retail_meters import convert
from stoker.cli import app

REGION = "westus3"


def _row(service: str, product: str, meter: str, price: float, unit: str, **extra) -> dict:
    return {
        "currencyCode": "USD",
        "tierMinimumUnits": 0.0,
        "retailPrice": price,
        "unitPrice": price,
        "armRegionName": REGION,
        "location": "US West 3",
        "effectiveStartDate": "2026-10-01T00:00:00Z",
        "meterName": meter,
        "productName": product,
        "skuName": extra.pop("sku", meter),
        "serviceName": service,
        "unitOfMeasure": unit,
        "type": "Consumption",
        "isPrimaryMeterRegion": True,
        "armSkuName": extra.pop("arm", ""),
        **extra,
    }


def _vm(meter: str, price: float, **extra) -> dict:
    return _row(
        "Virtual Machines",
        "Virtual Machines NDsr H100 v5 Series",
        meter,
        price,
        "1 Hour",
        arm="Standard_ND96isr_H100_v5",
        **extra,
    )


AML = "Azure Managed Lustre"
ROWS = [
    _vm("ND96isr H100 v5", 90.0),
    _vm("ND96isr H100 v5 Spot", 20.0),
    _vm("ND96isr H100 v5", 438000.0, type="Reservation", reservationTerm="1 Year"),
    _vm("ND96isr H100 v5", 876000.0, type="Reservation", reservationTerm="3 Years"),
    # Lustre, per GiB-hour; tier 125's older row must lose to its newer one
    _row(AML, AML, "Durable Premium 40 MBps Capacity", 0.0001, "1 GiB/Hour"),
    _row(
        AML,
        AML,
        "Durable Premium 125 MBps Capacity",
        0.0002,
        "1 GiB/Hour",
        effectiveStartDate="2025-01-01T00:00:00Z",
    ),  # fmt: skip
    _row(AML, AML, "Durable Premium 125 MBps Capacity", 0.0003, "1 GiB/Hour"),
    _row(AML, AML, "Durable Premium 250 MBps Capacity", 0.0004, "1 GiB/Hour"),
    _row(AML, AML, "Durable Premium 500 MBps Capacity", 0.0008, "1 GiB/Hour"),
    _row("Azure NetApp Files", "Azure NetApp Files", "Premium Capacity", 0.0004, "1 GiB/Hour"),
    _row("Azure NetApp Files", "Azure NetApp Files", "Ultra Capacity", 0.0005, "1 GiB/Hour"),
    _row("Storage", "Premium Files", "Premium LRS Provisioned", 0.16, "1 GiB/Month"),
    _row("Storage", "General Block Blob v2", "Hot LRS Data Stored", 0.02, "1 GB/Month"),
    # the second tier of a tiered meter ("over 50 TB") is not the first price a plan pays
    _row(
        "Storage",
        "General Block Blob v2",
        "Hot LRS Data Stored",
        0.019,
        "1 GB/Month",
        tierMinimumUnits=51200.0,
    ),  # fmt: skip
    _row("Storage", "General Block Blob v2", "Cool LRS Data Stored", 0.01, "1 GB/Month"),
    _row("Storage", "General Block Blob v2", "Hot LRS Write Operations", 0.05, "10K"),
    _row("Storage", "General Block Blob v2", "Hot Read Operations", 0.004, "10K"),
    _row("NAT Gateway", "NAT Gateway", "Standard Gateway", 0.05, "1 Hour"),
    _row("Virtual Network", "IP Addresses", "Standard IPv4 Static Public IP", 0.006, "1 Hour"),
    _row("Storage", "Premium SSD Managed Disks", "P10 LRS Disk", 20.0, "1/Month"),
    _row("Storage", "Premium SSD Managed Disks", "P15 LRS Disk", 36.5, "1/Month"),
    # another region's row, answered by a careless server, is never taken
    {
        **_row("Storage", "Premium SSD Managed Disks", "P15 LRS Disk", 99.0, "1/Month"),
        "armRegionName": "eastus",
    },  # fmt: skip
]
PAGE = 3  # rows per page: Lustre's five rows come on two pages


class Api:
    """Answers a ``$filter`` of ``eq`` clauses joined by ``and`` (``or`` inside parentheses for
    VM sizes) with the rows that fit, PAGE at a time, each page linking to the next."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    @staticmethod
    def fits(row: dict, flt: str) -> bool:
        for group in re.split(r"\s+and\s+(?![^()]*\))", flt):
            options = re.findall(r"(\w+) eq '([^']*)'", group)
            if not any(str(row.get(k)) == v for k, v in options):
                return False
        return True

    def handler(self) -> type:
        api = self

        class Handler(Quiet):
            def do_GET(self) -> None:  # noqa: N802
                query = parse_qs(urlsplit(self.path).query)
                flt = query["$filter"][0]
                start = int(query.get("$skip", ["0"])[0])
                api.queries.append(flt)
                rows = [r for r in ROWS if Api.fits(r, flt)]
                items = rows[start : start + PAGE]
                more = start + PAGE < len(rows)
                base = f"http://127.0.0.1:{self.server.server_port}/api/retail/prices"
                link = None
                if more:
                    from urllib.parse import urlencode

                    link = f"{base}?{urlencode({'$filter': flt, '$skip': start + PAGE})}"
                body = json.dumps(
                    {
                        "BillingCurrency": "USD",
                        "CustomerEntityId": "Default",
                        "CustomerEntityType": "Retail",
                        "Items": items,
                        "NextPageLink": link,
                        "Count": len(items),
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


@pytest.fixture
def api(monkeypatch):
    state = Api()
    with serving(state.handler()) as server:
        url = f"http://127.0.0.1:{server.server_port}/api/retail/prices"
        monkeypatch.setenv("STOKER_PRICES_API", url)
        yield state


def test_units_convert_to_the_catalog_fields():
    assert convert(0.0001, "1 GiB/Hour", "tib_hour") == pytest.approx(0.1024)
    assert convert(0.0004, "1 GiB/Hour", "tib_month") == pytest.approx(0.0004 * 1024 * 730)
    assert convert(36.5, "1/Month", "month") == 36.5
    assert convert(0.05, "10K", "10k") == pytest.approx(0.05)
    assert convert(5.0, "100 GB/Month", "gb_month") == pytest.approx(0.05)
    # a per-hour row never prices a per-GiB field, nor the reverse
    assert convert(0.05, "1 Hour", "gib_month") is None
    assert convert(0.05, "1 GiB/Month", "hour") is None


def test_refresh_prices_every_meter_and_cites_the_api(api, tmp_path):
    path = tmp_path / "prices.toml"
    cat = load_catalog(defaults=False)
    done = refresh_all(cat, REGION, path, today=dt.date(2026, 12, 1))
    got = load_catalog([path], defaults=False)
    tib_hour = 1024  # GiB per TiB
    assert got.lustre["AMLFS-Durable-Premium-40"].price_per_tib_hour == pytest.approx(
        0.0001 * tib_hour
    )
    # the newer of two rows wins; page two's rows are read
    assert got.lustre["AMLFS-Durable-Premium-125"].price_per_tib_hour == pytest.approx(
        0.0003 * tib_hour
    )
    assert got.lustre["AMLFS-Durable-Premium-500"].price_per_tib_hour == pytest.approx(
        0.0008 * tib_hour
    )
    assert got.lustre["AMLFS-Durable-Premium-20"].price_per_tib_hour is None
    assert "lustre.AMLFS-Durable-Premium-20.price_per_tib_hour" in done.not_found
    assert got.netapp["Ultra"].price_per_tib_month == pytest.approx(0.0005 * 1024 * 730)
    assert got.netapp["Standard"].price_per_tib_month is None
    assert got.files["premium_v1"].price_per_gib_month == 0.16
    assert got.blob["standard"].price_hot_gb_month == 0.02  # the first tier, not "over 50 TB"
    assert got.blob["standard"].price_cool_gb_month == 0.01
    assert got.meter["nat_gateway"].price == 0.05
    assert got.meter["public_ip"].price == 0.006
    assert got.meter["os_disk"].price == 36.5  # P15, this region's row
    assert got.meter["blob_write_10k"].price == pytest.approx(0.05)
    vm = got.vm["ND96isr_H100_v5"]
    assert (vm.price_per_hour, vm.spot_price_per_hour) == (90.0, 20.0)
    assert vm.reserved_1y_per_hour == pytest.approx(438000.0 / 8760)
    assert vm.reserved_3y_per_hour == pytest.approx(876000.0 / (3 * 8760))
    # every refreshed figure cites the dated API source, and its region
    for where, entry, field in (
        ("lustre", got.lustre["AMLFS-Durable-Premium-40"], "price_per_tib_hour"),
        ("meter", got.meter["os_disk"], "price"),
        ("vm", vm, "spot_price_per_hour"),
    ):
        key = entry.source_of(field)
        assert key == "retail-api-2026-12-01", where
        assert got.sources[key].date == dt.date(2026, 12, 1)
    assert got.meter["os_disk"].price_region == REGION
    # what the refresh found is what it wrote
    written = tomllib.loads(path.read_text("utf-8"))
    assert written["meter"]["nat_gateway"]["price"] == 0.05
    assert done.figures["meter.nat_gateway.price"] == 0.05


def test_refresh_filters_by_region_and_product_and_follows_each_next_page(api, tmp_path):
    refresh_all(load_catalog(defaults=False), REGION, tmp_path / "p.toml")
    assert all(f"armRegionName eq '{REGION}'" in q for q in api.queries)
    lustre = [q for q in api.queries if "Azure Managed Lustre" in q]
    assert len(lustre) == 2  # five rows, three a page: the NextPageLink was followed
    # one product per request, not the whole Storage service
    storage = [q for q in api.queries if "serviceName eq 'Storage'" in q]
    assert storage and all("productName eq" in q for q in storage)


def test_cli_refresh_reports_meters_and_shows_them(api, tmp_path):
    out = tmp_path / "prices.toml"
    args = ["catalog", "prices", "--refresh", "--region", REGION, "--output", str(out)]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    refresh = json.loads(result.stdout)["refresh"]
    assert refresh["region"] == REGION
    assert "lustre.AMLFS-Durable-Premium-20.price_per_tib_hour" in refresh["meters_not_found"]
    assert refresh["meters_written"] >= 15
    shown = CliRunner().invoke(app, ["catalog", "prices", "-c", str(out)])
    assert shown.exit_code == 0, shown.output
    line = next(x for x in shown.stdout.splitlines() if "meter.nat_gateway" in x)
    assert "0.05 /h" in line and "retail-api-" in line
    unknown = next(x for x in shown.stdout.splitlines() if "AMLFS-Durable-Premium-20" in x)
    assert "unknown" in unknown


def test_a_failed_meter_request_leaves_the_old_file(api, tmp_path, monkeypatch):
    path = tmp_path / "prices.toml"
    path.write_text("# earlier\n", "utf-8")
    monkeypatch.setenv("STOKER_PRICES_API", "http://127.0.0.1:9/api/retail/prices")
    from stoker.errors import PriceError

    with pytest.raises(PriceError, match="unchanged"):
        refresh_all(load_catalog(defaults=False), REGION, path)
    assert path.read_text("utf-8") == "# earlier\n"
