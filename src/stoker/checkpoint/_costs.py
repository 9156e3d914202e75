"""What kept checkpoints cost per month on each tier (``stoker checkpoint ls``,
``Checkpointer.costs()``): the catalog's Blob price, or the caller's per GB-month."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import CheckpointError
from ._tier import Tier


@dataclass
class TierCost:
    tier: str
    where: str
    bytes: int | None  # None: the tier could not be listed
    usd_per_gb_month: float | None
    basis: str  # where the price comes from, or why there is none

    @property
    def usd_per_month(self) -> float | None:
        if self.usd_per_gb_month is None or self.bytes is None:
            return None
        return self.bytes / 1e9 * self.usd_per_gb_month


def check_prices(blob_tier: str, **usd_per_gb_month: float | None) -> None:
    """Refuse a Blob access tier the catalog does not price, and a negative or non-finite
    price (each error names the parameter)."""
    from ..catalog import BlobTier

    tiers = BlobTier.access_tiers()
    if blob_tier not in tiers:
        raise CheckpointError(
            f"blob_tier={blob_tier}: not a Blob access tier; choose one of {', '.join(tiers)}"
        )
    for name, price in usd_per_gb_month.items():
        if price is not None and not (math.isfinite(price) and price >= 0):
            raise CheckpointError(
                f"{name}={price}: give the tier's price in USD per GB-month, 0 or more"
            )


def tier_price(tier: Tier, blob_tier: str, override: float | None) -> tuple[float | None, str]:
    """Price per GB-month of what a tier keeps: the caller's figure, else the catalog's Blob
    price for Blob, else none (a local disk or a mount is billed with its VM or volume)."""
    if override is not None:
        return override, "given"
    if tier.store.service == "azure-blob":  # what the store is, not its URL's spelling
        from ..catalog import load_catalog

        blob = load_catalog().blob["standard"]
        price = getattr(blob, f"price_{blob_tier}_gb_month", None)
        if price is None:
            return None, f"no catalog price for Blob {blob_tier}"
        source = blob.source_of("price_region")
        return price, f"catalog: Blob {blob_tier}, {blob.price_region} ({source})"
    return None, "a folder: billed with its VM or volume"


def tier_costs(
    tiers: list[tuple[Tier | None, float | None]], blob_tier: str, kept: dict[str, int]
) -> list[TierCost]:
    """Each (tier, price given for it)'s kept bytes (from a listing: a tier missing from
    ``kept`` could not be listed) and price."""
    out = []
    for tier, override in tiers:
        if tier is None:
            continue
        price, basis = tier_price(tier, blob_tier, override)
        out.append(TierCost(tier.name, str(tier.store), kept.get(tier.name), price, basis))
    return out
