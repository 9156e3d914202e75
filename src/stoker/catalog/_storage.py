"""Storage tiers and meters in the catalog: Blob, Managed Lustre, Azure Files, Azure NetApp
Files, and the prices that are no size's or tier's own (``Meter``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ..quantities import Bytes, Rate
from ._entry import Entry

# Azure's prices per month are per 730 hours: a GB-month or a disk-month spread over the hour.
HOURS_PER_MONTH = 730.0


class BlobTier(Entry):
    name: str
    ingress: Rate | None = None
    egress: Rate | None = None
    requests_per_s: int | None = None
    per_blob_requests_per_s: int | None = None
    max_block: Bytes | None = None
    max_blocks: int | None = None
    stream_write: Rate | None = None  # one writer process uploading one blob
    price_hot_gb_month: float | None = Field(default=None, ge=0)
    price_cool_gb_month: float | None = Field(default=None, ge=0)
    price_cold_gb_month: float | None = Field(default=None, ge=0)
    price_archive_gb_month: float | None = Field(default=None, ge=0)
    price_region: str | None = None

    @classmethod
    def access_tiers(cls) -> tuple[str, ...]:
        """The access tiers the catalog can price: ``("hot", "cool", "cold", "archive")``."""
        return tuple(
            name.removeprefix("price_").removesuffix("_gb_month")
            for name in cls.model_fields
            if name.startswith("price_") and name.endswith("_gb_month")
        )


class LustreSku(Entry):
    name: str
    throughput_per_tib: Rate  # the tier's label; the rated figure is per capacity step
    min_size: Bytes
    max_size: Bytes  # self-service
    step: Bytes
    # Nominal throughput of one capacity step (2,000 MB/s on every tier); None: size x per TiB.
    throughput_per_step: Rate | None = None
    max_size_on_request: Bytes | None = None  # the largest size Azure offers by request
    price_per_tib_hour: float | None = Field(default=None, gt=0)
    price_region: str | None = None


class LustreCommon(Entry):
    max_size_on_request: Bytes
    delivered_fraction: float = Field(gt=0, le=1)
    hsm_export_rate: Rate
    # Published (nominal, delivered) pairs, nominal ascending: what file systems of that rated
    # throughput delivered to reads (training) and to writes (checkpoints).
    delivered_read: list[tuple[Rate, Rate]] = Field(default_factory=list)
    delivered_write: list[tuple[Rate, Rate]] = Field(default_factory=list)
    stream_write: Rate | None = None  # one writer process (one torch.save) to the file system

    @model_validator(mode="after")
    def _ascending(self) -> LustreCommon:
        for name in ("delivered_read", "delivered_write"):
            nominal = [n for n, _ in getattr(self, name)]
            if nominal != sorted(nominal):
                raise ValueError(f"{name}: list the (nominal, delivered) pairs by nominal, rising")
        return self


class FilesTier(Entry):
    name: str
    min_size: Bytes
    max_size: Bytes
    base_iops: int
    iops_per_gib: float | None = None
    max_iops: int
    base_throughput: Rate
    throughput_per_gib: Rate | None = None
    max_throughput: Rate
    per_file_throughput: Rate | None = None
    price_per_gib_month: float | None = Field(default=None, gt=0)
    price_region: str | None = None


class NetAppLevel(Entry):
    name: str
    throughput_per_tib: Rate
    max_throughput: Rate
    min_size: Bytes
    max_size: Bytes
    price_per_tib_month: float | None = Field(default=None, gt=0)
    price_region: str | None = None


class Meter(Entry):
    """A price that is no size's or tier's own: the NAT gateway's hour, a public IP's, an OS
    disk's month, Blob operations per 10,000. ``price`` None: no public source stored (unknown).
    ``retail`` names the Retail Prices API row that prices it (exact field values)."""

    name: str
    unit: Literal["hour", "month", "10k"]  # $ per hour, per month, per 10,000 operations
    price: float | None = Field(default=None, ge=0)
    price_region: str | None = None
    retail: dict[str, str] | None = None

    @property
    def per_hour(self) -> float | None:
        """The price per hour of one (a month is 730 hours); None for operations or unknown."""
        if self.price is None or self.unit == "10k":
            return None
        return self.price if self.unit == "hour" else self.price / HOURS_PER_MONTH
