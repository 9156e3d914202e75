"""Every priced figure besides a VM's pay-as-you-go hour, read from the Azure Retail Prices API.

A rule names the rows that price one catalog figure by their exact ``serviceName``,
``productName`` and ``meterName`` (the first two go into the ``$filter``, so one request pages
through one product, not the whole Storage service) and turns the row's ``unitOfMeasure``
("1 Hour", "1 GiB/Month", "10K", "1/Month") into the unit of the catalog's field. Managed
Lustre's rows are told apart by the tier's MB/s in their names. The VM rows that the
pay-as-you-go refresh already reads also carry Spot (``meterName`` ends in "Spot") and the 1- and
3-year reservations (``type`` Reservation, ``retailPrice`` for the whole term).

The meter names are those public examples of the API show; a meter Azure names otherwise is
reported as not found and its figure stays as it was (unknown, or the built-in's), never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._schema import HOURS_PER_MONTH, Catalog

if TYPE_CHECKING:
    import httpx

HOURS_PER_YEAR = 8760.0
_UNIT = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*([KM])?\s*(GB|GiB|TB|TiB)?\s*/?\s*(Hours?|Days?|Months?)?\s*$", re.I
)
_BYTES = {"gb": 1e9, "gib": 2.0**30, "tb": 1e12, "tib": 2.0**40}
_HOURS = {"hour": 1.0, "day": 24.0, "month": HOURS_PER_MONTH}
# A catalog field's unit: (size it is priced per, period it is priced per); "10k" is per
# 10,000 operations.
_WANT: dict[str, tuple[str | None, str | None]] = {
    "hour": (None, "hour"),
    "month": (None, "month"),
    "10k": (None, None),
    "tib_hour": ("tib", "hour"),
    "tib_month": ("tib", "month"),
    "gib_month": ("gib", "month"),
    "gb_month": ("gb", "month"),
}


@dataclass(frozen=True, eq=False)
class Rule:
    """The API rows that price ``section.key``'s ``field``, in the field's ``unit``."""

    section: str
    key: str
    field: str
    unit: str  # a key of _WANT
    match: dict[str, str]  # exact values a row must have
    named: str | None = None  # a regex its product, SKU or meter name must match (Lustre tiers)

    @property
    def where(self) -> str:
        return f"{self.section}.{self.key}.{self.field}"

    def filter(self, region: str) -> str:
        parts = [
            f"{k} eq '{self.match[k]}'" for k in ("serviceName", "productName") if k in self.match
        ]
        return " and ".join([*parts, f"armRegionName eq '{region}'"])

    def takes(self, row: dict[str, Any]) -> bool:
        if any(str(row.get(k, "")) != v for k, v in self.match.items()):
            return False
        names = " ".join(str(row.get(k, "")) for k in ("productName", "skuName", "meterName"))
        return self.named is None or re.search(self.named, names) is not None


def convert(price: float, unit_of_measure: str, want: str) -> float | None:
    """``price`` for ``unit_of_measure`` in the catalog unit ``want``; None when the two do not
    measure the same thing (a per-hour row for a per-GiB field)."""
    m = _UNIT.match(unit_of_measure or "")
    if not m:
        return None
    amount = float(m[1]) * {"K": 1e3, "M": 1e6}.get((m[2] or "").upper(), 1.0)
    size = (m[3] or "").lower() or None
    period = (m[4] or "").lower().rstrip("s") or None
    want_size, want_period = _WANT[want]
    if (size is None) != (want_size is None) or (period is None) != (want_period is None):
        return None
    if amount <= 0:
        return None
    per = price / amount
    if size and want_size:
        per = per / _BYTES[size] * _BYTES[want_size]
    if period and want_period:
        per = per / _HOURS[period] * _HOURS[want_period]
    return per * 1e4 if want == "10k" else per


def rules(cat: Catalog) -> list[Rule]:
    """One rule per figure the API can price, for the entries this catalog has."""
    out = []
    for key in cat.lustre:
        tier = key.rsplit("-", 1)[-1]  # AMLFS-Durable-Premium-125 -> 125
        out.append(
            Rule(
                "lustre",
                key,
                "price_per_tib_hour",
                "tib_hour",
                {"serviceName": "Azure Managed Lustre"},
                rf"(?<!\d){tier}\s*MB",
            )  # fmt: skip
        )
    for key in cat.netapp:
        match = {"serviceName": "Azure NetApp Files", "meterName": f"{key} Capacity"}
        out.append(Rule("netapp", key, "price_per_tib_month", "tib_month", match))
    if "premium_v1" in cat.files:
        match = {
            "serviceName": "Storage",
            "productName": "Premium Files",
            "meterName": "Premium LRS Provisioned",
        }
        out.append(Rule("files", "premium_v1", "price_per_gib_month", "gib_month", match))
    if "standard" in cat.blob:
        for tier in ("hot", "cool", "cold", "archive"):
            match = {
                "serviceName": "Storage",
                "productName": "General Block Blob v2",
                "meterName": f"{tier.title()} LRS Data Stored",
            }
            out.append(Rule("blob", "standard", f"price_{tier}_gb_month", "gb_month", match))
    for key, meter in cat.meter.items():
        if meter.retail:
            out.append(Rule("meter", key, "price", meter.unit, dict(meter.retail)))
    return out


def _usable(row: dict[str, Any], region: str) -> bool:
    # The first tier of a tiered meter ("first 50 TB") is the price a plan of any size pays first.
    return (
        row.get("type") == "Consumption"
        and not row.get("reservationTerm")
        and str(row.get("armRegionName", "")) == region
        and float(row.get("tierMinimumUnits") or 0) == 0
    )


def price_rules(
    pages: Iterable[dict[str, Any]], chosen: list[Rule], region: str
) -> dict[str, float]:
    """{rule.where: the newest usable row's price} for each rule in ``chosen`` a row fits."""
    found: dict[str, tuple[str, float]] = {}
    for page in pages:
        for row in page["Items"]:
            if not _usable(row, region):
                continue
            for rule in chosen:
                if not rule.takes(row):
                    continue
                try:
                    value = convert(float(row["retailPrice"]), str(row["unitOfMeasure"]), rule.unit)
                except (KeyError, TypeError, ValueError):
                    continue
                effective = str(row.get("effectiveStartDate", ""))[:10]
                if value is None or value < 0:
                    continue
                if rule.where not in found or effective > found[rule.where][0]:
                    found[rule.where] = (effective, value)
    return {where: value for where, (_, value) in found.items()}


def vm_spot_and_reserved(pages: Iterable[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """{vm size: {"spot_price_per_hour" | "reserved_1y_per_hour" | "reserved_3y_per_hour": $}}
    from the Linux rows of the VM pages (a reservation's whole-term price spread per hour)."""
    found: dict[str, dict[str, tuple[str, float]]] = {}
    for page in pages:
        for row in page["Items"]:
            if "Windows" in str(row.get("productName", "")) or row.get("unitOfMeasure") != "1 Hour":
                continue
            try:
                price = float(row["retailPrice"])
            except (KeyError, TypeError, ValueError):
                continue
            meter, term = str(row.get("meterName", "")), str(row.get("reservationTerm") or "")
            if row.get("type") == "Consumption" and meter.endswith("Spot") and not term:
                name, value = "spot_price_per_hour", price
            elif row.get("type") == "Reservation" and term in ("1 Year", "3 Years"):
                years = 1 if term == "1 Year" else 3
                name, value = f"reserved_{years}y_per_hour", price / (HOURS_PER_YEAR * years)
            else:
                continue
            if value <= 0:
                continue
            sku = str(row.get("armSkuName", "")).removeprefix("Standard_")
            effective = str(row.get("effectiveStartDate", ""))[:10]
            have = found.setdefault(sku, {})
            if name not in have or effective > have[name][0]:
                have[name] = (effective, value)
    return {sku: {k: v for k, (_, v) in fields.items()} for sku, fields in found.items()}


@dataclass
class MeterPrices:
    """What a refresh found beyond the VMs' pay-as-you-go hour."""

    figures: dict[str, float] = field(default_factory=dict)  # "lustre.X.price_per_tib_hour": $
    not_found: list[str] = field(default_factory=list)  # figures the API listed no row for


def fetch_meters(
    cat: Catalog, region: str, *, client: httpx.Client | None = None
) -> tuple[MeterPrices, list[Rule]]:
    """Read every rule's product from the API (one paged request per product)."""
    from ._prices import fetch_filtered

    chosen = rules(cat)
    by_filter: dict[str, list[Rule]] = {}
    for rule in chosen:
        by_filter.setdefault(rule.filter(region), []).append(rule)
    priced: dict[str, float] = {}
    for flt, group in by_filter.items():
        priced.update(price_rules(fetch_filtered(flt, client=client), group, region))
    out = MeterPrices()
    for rule in chosen:
        if rule.where in priced:
            out.figures[rule.where] = priced[rule.where]
        else:
            out.not_found.append(rule.where)
    return out, chosen


def meter_override(
    prices: MeterPrices, chosen: list[Rule], region: str, source: str
) -> dict[str, dict[str, Any]]:
    """The override sections (see catalog/_load.py) holding ``prices``, each cited to ``source``."""
    sections: dict[str, dict[str, Any]] = {}
    for rule in chosen:
        value = prices.figures.get(rule.where)
        if value is None:
            continue
        entry = sections.setdefault(rule.section, {}).setdefault(rule.key, {"cite": {}})
        entry[rule.field] = value
        entry["price_region"] = region
        entry["cite"].update({rule.field: source, "price_region": source})
    return sections
