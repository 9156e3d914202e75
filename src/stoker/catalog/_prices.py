"""Refresh VM prices from the Azure Retail Prices API into a dated override file.

The API (``GET https://prices.azure.com/api/retail/prices?$filter=...``, no authentication)
answers pages of ``{"Items": [...], "NextPageLink": ...}``. Linux and Windows rows share a
``meterName``; Windows rows say so in ``productName``; Spot and Low Priority are marked in
``meterName``; reservations carry ``reservationTerm`` and a whole-term price. We keep the Linux
pay-as-you-go hourly row.

``$STOKER_PRICES_API`` points the client elsewhere (the tests serve a recorded response).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._user_files import check_user_output
from ..errors import PriceError

if TYPE_CHECKING:
    import httpx

    from ._schema import Catalog

API = "https://prices.azure.com/api/retail/prices"
MAX_PAGES = 50


@dataclass(frozen=True)
class VmPrice:
    vm_size: str  # catalog key, without "Standard_"
    region: str
    per_hour: float
    currency: str
    effective: str
    meter: str


def _filter(region: str, vm_sizes: Iterable[str]) -> str:
    skus = " or ".join(f"armSkuName eq 'Standard_{v}'" for v in vm_sizes)
    return f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' and ({skus})"


def fetch_pages(
    region: str,
    vm_sizes: Iterable[str],
    *,
    client: httpx.Client | None = None,
    api: str | None = None,
) -> list[dict[str, Any]]:
    """Every page the API returns for these sizes in ``region``."""
    return fetch_filtered(_filter(region, vm_sizes), client=client, api=api)


def fetch_filtered(
    flt: str, *, client: httpx.Client | None = None, api: str | None = None
) -> list[dict[str, Any]]:
    """Every page the API returns for one OData ``$filter``, following ``NextPageLink``."""
    import httpx  # here, not at the top: it costs every other command start-up time

    url: str | None = api or os.environ.get("STOKER_PRICES_API") or API
    params: dict[str, str] | None = {"$filter": flt}
    own = client is None
    client = client or httpx.Client(timeout=30.0, follow_redirects=True)
    pages = []
    try:
        while url and len(pages) < MAX_PAGES:
            response = client.get(url, params=params)
            response.raise_for_status()
            page = response.json()
            if not isinstance(page, dict) or not isinstance(page.get("Items"), list):
                raise PriceError(f"the Retail Prices API at {url} answered without an Items list")
            pages.append(page)
            url, params = page.get("NextPageLink"), None  # the link carries the query
    except httpx.HTTPStatusError as exc:
        raise PriceError(
            f"the Retail Prices API answered HTTP {exc.response.status_code}; "
            "the catalog's prices are unchanged"
        ) from exc
    except httpx.TransportError as exc:
        raise PriceError(
            f"could not reach the Retail Prices API ({type(exc).__name__}): no "
            "network? The catalog's prices are unchanged"
        ) from exc
    except ValueError as exc:
        raise PriceError("the Retail Prices API answered with something that is not JSON") from exc
    finally:
        if own:
            client.close()
    return pages


def linux_on_demand(pages: list[dict[str, Any]]) -> dict[str, VmPrice]:
    """The Linux pay-as-you-go hourly price of each VM size found in ``pages``."""
    found: dict[str, VmPrice] = {}
    for page in pages:
        for row in page["Items"]:
            meter = str(row.get("meterName", ""))
            if (
                row.get("type") != "Consumption"
                or row.get("reservationTerm")
                or "Windows" in str(row.get("productName", ""))
                or "Spot" in meter
                or "Low Priority" in meter
                or row.get("unitOfMeasure") != "1 Hour"
            ):
                continue
            sku = str(row.get("armSkuName", "")).removeprefix("Standard_")
            try:
                price = float(row["retailPrice"])
                region = str(row["armRegionName"])
            except (KeyError, TypeError, ValueError) as exc:
                raise PriceError(
                    f"a Retail Prices API row for {sku or '?'} lacks a usable "
                    "retailPrice or armRegionName; prices are unchanged"
                ) from exc
            effective = str(row.get("effectiveStartDate", ""))[:10]
            if price <= 0:
                continue
            current = found.get(sku)
            if current is None or effective > current.effective:  # newest row wins
                found[sku] = VmPrice(
                    sku,
                    region,
                    price,
                    str(row.get("currencyCode", "USD")),
                    effective,
                    meter,
                )
    return found


def price_override(
    prices: dict[str, VmPrice], fetched: dt.date, where: str = API
) -> dict[str, Any]:
    """A catalog override (see catalog/_load.py) holding these prices and their source."""
    source = f"retail-api-{fetched.isoformat()}"
    return {
        "sources": {
            source: {
                "title": "Azure Retail Prices API, Linux pay-as-you-go (stoker catalog prices)",
                "where": where,
                "retrieved": fetched.isoformat(),
            }
        },
        "vm": {
            p.vm_size: {
                "price_per_hour": p.per_hour,
                "price_region": p.region,
                "cite": {"price_per_hour": source, "price_region": source},
            }
            for p in sorted(prices.values(), key=lambda p: p.vm_size)
        },
    }


def refresh_prices(
    vm_sizes: Iterable[str],
    region: str,
    path: Path,
    *,
    client: httpx.Client | None = None,
    today: dt.date | None = None,
) -> dict[str, VmPrice]:
    """Fetch, then write ``path`` atomically; on any failure the old file stays as it was."""
    check_user_output(path, "--out", PriceError)  # (before the API's minutes)
    sizes = list(vm_sizes)
    prices = linux_on_demand(fetch_pages(region, sizes, client=client))
    if not prices:
        raise PriceError(
            f"the Retail Prices API listed none of {', '.join(sizes)} in {region}; "
            "the catalog's prices are unchanged"
        )
    import tomli_w

    from .._atomic import write_whole

    where = os.environ.get("STOKER_PRICES_API") or API
    text = tomli_w.dumps(price_override(prices, today or dt.date.today(), where))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, text.encode())  # (a temporary of this writer's own: two refreshes at once)
    return prices


@dataclass(frozen=True)
class Refreshed:
    """What ``refresh_all`` wrote: VM pay-as-you-go prices, every other figure it priced
    ("lustre.X.price_per_tib_hour": value), and the figures the API listed no row for."""

    vm: dict[str, VmPrice]
    figures: dict[str, float]
    not_found: list[str]


def refresh_all(
    cat: Catalog,
    region: str,
    path: Path,
    *,
    client: httpx.Client | None = None,
    today: dt.date | None = None,
) -> Refreshed:
    """Every meter the catalog prices (VMs pay-as-you-go, Spot and reserved; Lustre, NetApp,
    Files, Blob capacity and operations, NAT gateway, public IP, OS disk) for ``region``, written
    to ``path`` atomically as one override file; on any failure the old file stays as it was."""
    from ._retail_meters import fetch_meters, meter_override, vm_spot_and_reserved

    check_user_output(path, "--out", PriceError)
    sizes = list(cat.vm)
    pages = fetch_pages(region, sizes, client=client)
    prices = linux_on_demand(pages)
    if not prices:
        raise PriceError(
            f"the Retail Prices API listed none of {', '.join(sizes)} in {region}; "
            "the catalog's prices are unchanged"
        )
    extra = vm_spot_and_reserved(pages)
    meters, chosen = fetch_meters(cat, region, client=client)
    fetched = today or dt.date.today()
    where = os.environ.get("STOKER_PRICES_API") or API
    override = price_override(prices, fetched, where)
    source = next(iter(override["sources"]))
    override["sources"][source]["title"] = (
        "Azure Retail Prices API: Linux pay-as-you-go, Spot and reserved VM hours, and the "
        "storage and network meters (stoker catalog prices --refresh)"
    )
    figures = dict(meters.figures)
    for size, fields in extra.items():
        if size not in cat.vm:
            continue
        entry = override["vm"].setdefault(size, {"cite": {}})
        for name, value in fields.items():
            entry[name] = value
            entry["cite"][name] = source
            figures[f"vm.{size}.{name}"] = value
    override.update(meter_override(meters, chosen, region, source))
    import tomli_w

    from .._atomic import write_whole

    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, tomli_w.dumps(override).encode())
    return Refreshed(prices, figures, meters.not_found)
