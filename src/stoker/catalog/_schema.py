"""Typed view of the catalog: every figure in base units, every entry with its sources.

Each entry names a default ``source`` and may ``cite`` another source for single fields. A figure
left out (``None``) is one no public source gives; the plan says so instead of inventing it.
The shared entry is ``_entry.py``; storage tiers and meters are ``_storage.py``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..quantities import Bytes, Duration, Rate
from ._entry import Entry, Source
from ._storage import (
    HOURS_PER_MONTH,
    BlobTier,
    FilesTier,
    LustreCommon,
    LustreSku,
    Meter,
    NetAppLevel,
)

__all__ = [
    "HOURS_PER_MONTH",
    "BlobTier",
    "Catalog",
    "CatalogInfo",
    "Entry",
    "EthernetRate",
    "Fabric",
    "FilesTier",
    "LustreCommon",
    "LustreSku",
    "Meter",
    "NetAppLevel",
    "Provisioning",
    "Reliability",
    "Source",
    "VmSize",
    "Writers",
    "vm_size_name",
]


class VmSize(Entry):
    family: str
    gpu: str
    gpus: int = Field(gt=0)
    gpu_memory: Bytes
    vcpus: int = Field(gt=0)
    memory: Bytes
    scaleup: str
    scaleup_bw: Rate | None = None
    scaleup_links: int = 0
    scaleup_link_bw: Rate | None = None
    nvls_efficiency: float | None = Field(default=None, gt=0, le=1)
    nvlink_domain_vms: int = Field(default=1, ge=1)
    ib_links: int = Field(default=0, ge=0)
    ib_rate: Rate | None = None
    ib_achievable: Rate | None = None
    gpudirect_rdma: bool = False
    local_nvme: Bytes
    nvme_read: Rate | None = None
    nvme_write: Rate | None = None
    nvme_stream_write: Rate | None = None  # one writer process (one torch.save) to the NVMe
    # One torch.save stream (serialising through the page cache), whatever the tier: set by
    # `--measured` from stoker.measure.single_writer's record; else [writers]' published one.
    torch_save_write: Rate | None = None
    frontend_nic: Rate
    # NCCL over TCP sockets between VMs (InfiniBand off): an all-reduce's busbw, per VM. Set
    # from [ethernet.<size>] (a published measurement) or `--measured`; None: only the line
    # rate is known, and the plan says its Ethernet figures are an upper bound.
    ethernet_busbw: Rate | None = None
    allreduce_busbw_measured: Rate | None = None
    allreduce_busbw_floor: Rate | None = None
    # Set by `stoker plan --measured` only: one VM's all-reduce busbw as measured on the VMs;
    # the scale-up level then runs at it instead of the NCCL-model figure.
    scaleup_busbw_measured: Rate | None = None
    # Set by `stoker plan --measured` only: an all-reduce's busbw measured across VMs over
    # InfiniBand; the VM's InfiniBand level then runs at it instead of links x achievable.
    ib_busbw_measured: Rate | None = None
    price_per_hour: float | None = Field(default=None, gt=0)
    price_region: str | None = None
    # Linux Spot, and a 1- or 3-year reservation's whole-term price spread per hour; None: the
    # catalog has no price (the plan then says the purchase option is unknown).
    spot_price_per_hour: float | None = Field(default=None, gt=0)
    reserved_1y_per_hour: float | None = Field(default=None, gt=0)
    reserved_3y_per_hour: float | None = Field(default=None, gt=0)
    # Regions that offer the size; None = not in the catalog (stoker provision then cannot
    # check it and says so). An override file can list them.
    regions: list[str] | None = None

    @property
    def has_infiniband(self) -> bool:
        return self.ib_links > 0 and self.ib_rate is not None

    @property
    def ethernet_rate(self) -> float:
        """Bytes/s one VM's collectives move over Ethernet: the measured NCCL-socket busbw, else
        the frontend NIC's line rate (an upper bound: TCP sockets reach a fraction of it)."""
        return self.ethernet_busbw or self.frontend_nic

    @property
    def ib_per_vm(self) -> float:
        """Achievable InfiniBand bytes/s of the whole VM (all rails): measured across VMs
        when `--measured` gave it, else links x the health-check floor (or line rate)."""
        if self.ib_busbw_measured and self.ib_links:
            return self.ib_busbw_measured
        return self.ib_links * (self.ib_achievable or self.ib_rate or 0.0)


class EthernetRate(Entry):
    """NCCL between VMs of one size over TCP sockets (InfiniBand off, ``NCCL_NET=Socket``): the
    nccl-tests all-reduce busbw measured across ``vms`` VMs at ``message`` bytes. The plan's
    Ethernet collectives run at it, not at the frontend NIC's line rate."""

    busbw: Rate
    vms: int = Field(ge=2)
    message: Bytes


class Fabric(Entry):
    scale_set_vms: int = Field(gt=0)
    scale_set_vms_on_request: int = Field(gt=0)
    availability_set_vms: int = Field(gt=0)
    net_ring_latency: Duration
    net_tree_latency: Duration
    nvlink_ring_latency: Duration


class Provisioning(Entry):
    """Facts ``stoker provision`` writes into templates: API versions, limits, ids, images."""

    api_versions: dict[str, str]  # resource provider namespace -> ARM apiVersion
    rdma_reserved_range: str  # a VNet must not overlap it
    amlfs_subnet_prefixes: list[list[int]]  # [[up to TiB, smallest prefix length], ...]
    # VM size -> marketplace image URN (publisher:offer:sku:version); a size absent here
    # has no image stoker knows fits it (GB200 is Arm64) and provision refuses it.
    hpc_images: dict[str, str]
    # Image (publisher:offer:sku) -> its python3, "major.minor": the node installs stoker with
    # it, so provision refuses an image whose Python is older than stoker's or not listed.
    image_python: dict[str, str] = Field(default_factory=dict)
    role_blob_data_contributor: str
    role_blob_data_reader: str
    role_account_contributor: str
    hpc_cache_rp_app_id: str  # "HPC Cache Resource Provider"; its object id differs per tenant
    ccws_release: str
    ccws_commit: str

    @field_validator("image_python")
    @classmethod
    def _major_minor(cls, value: dict[str, str]) -> dict[str, str]:
        for image, version in value.items():
            if image.count(":") != 2:
                raise ValueError(f"{image!r}: key an image as publisher:offer:sku")
            if not re.fullmatch(r"\d+\.\d+", version):
                raise ValueError(
                    f"{image} = {version!r}: write the Python as major.minor, e.g. 3.12"
                )
        return value

    def python_of(self, urn: str) -> tuple[int, int] | None:
        """The python3 of the image ``urn`` (publisher:offer:sku:version) as (major, minor);
        None where the catalog does not say."""
        version = self.image_python.get(urn.rsplit(":", 1)[0])
        return None if version is None else tuple(map(int, version.split(".")))  # type: ignore[return-value]


class Writers(Entry):
    """Checkpoint writers' own limits, whatever the tier: one ``torch.save`` stream pickles,
    zips and copies through the page cache on one core, far under the disks it writes to."""

    torch_save_write: Rate | None = None  # a VM's measured ``torch_save_write`` wins


class Reliability(Entry):
    gpu_mtbf: Duration = Field(gt=0)
    effective_training_fraction: float = Field(gt=0, le=1)


class CatalogInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    as_of: dt.date
    currency: str = "USD"


VM_PREFIX = "Standard_"


def vm_size_name(name: str) -> str:
    """A VM size as the catalog keys it: ARM, the Azure CLI and the metadata service write
    ``Standard_ND96isr_H100_v5``; the catalog and the docs ``ND96isr_H100_v5``."""
    name = name.strip()
    return name[len(VM_PREFIX) :] if name.lower().startswith(VM_PREFIX.lower()) else name


class Catalog(BaseModel):
    """The whole catalog. ``Catalog.sections()`` walks every entry for listing and checks."""

    model_config = ConfigDict(extra="forbid")
    catalog: CatalogInfo
    sources: dict[str, Source]
    vm: dict[str, VmSize]
    fabric: Fabric
    blob: dict[str, BlobTier]
    lustre: dict[str, LustreSku]
    lustre_common: LustreCommon
    files: dict[str, FilesTier]
    netapp: dict[str, NetAppLevel]
    meter: dict[str, Meter] = Field(default_factory=dict)
    ethernet: dict[str, EthernetRate] = Field(default_factory=dict)  # keyed by VM size
    reliability: Reliability
    provision: Provisioning
    writers: Writers | None = None

    @model_validator(mode="before")
    @classmethod
    def _vm_keys_without_prefix(cls, data: object) -> object:
        # An override file may key a size as ARM spells it: [vm.Standard_ND96isr_H100_v5].
        if isinstance(data, dict) and isinstance(data.get("vm"), dict):
            data = {**data, "vm": {vm_size_name(k): v for k, v in data["vm"].items()}}
        return data

    def vm_key(self, name: str) -> str | None:
        """The catalog's key for a VM size written with or without ``Standard_``, in any case;
        None when the catalog has no such size."""
        bare = vm_size_name(name)
        if bare in self.vm:
            return bare
        return next((key for key in self.vm if key.lower() == bare.lower()), None)

    def entries(self) -> Iterator[tuple[str, Entry]]:
        """("vm.ND96isr_H100_v5", entry) for every entry, singletons by section name."""
        for section in ("vm", "blob", "lustre", "files", "netapp", "meter", "ethernet"):
            for key, entry in getattr(self, section).items():
                yield f"{section}.{key}", entry
        for section in ("fabric", "lustre_common", "reliability", "provision", "writers"):
            if getattr(self, section) is not None:
                yield section, getattr(self, section)

    def closest_entries(self, name: str, n: int = 3) -> list[str]:
        """The entries spelt most like ``name`` (any case), for an error that names them."""
        import difflib

        by_lower = {where.lower(): where for where, _ in self.entries()}
        return [by_lower[c] for c in difflib.get_close_matches(name.lower(), by_lower, n=n)]

    def figures(self, prefix: str = "") -> Iterator[dict[str, object]]:
        """Every figure with its source and date: the rows of ``stoker catalog --json``."""
        for where, entry in self.entries():
            if prefix and not where.lower().startswith(prefix.lower()):  # "Lustre" or "lustre"
                continue
            for field, value in entry.figures():
                key = entry.source_of(field)
                source = self.sources[key]
                yield {
                    "entry": where,
                    "field": field,
                    "value": value,
                    "source": key,
                    "date": source.date.isoformat(),
                    "verified": source.verified,
                }

    def vm_prices(self) -> list[dict[str, object]]:
        """Each VM size's hourly price with its region, source, date and whether the source is
        verified: the rows of ``stoker catalog prices``. A size with no public price has
        ``None`` in every field but its name."""
        rows: list[dict[str, object]] = []
        for name, vm in self.vm.items():
            priced = vm.price_per_hour is not None  # 0.0 is a price, not a missing one
            key = vm.source_of("price_per_hour") if priced else None
            source = self.sources[key] if key is not None else None
            rows.append(
                {
                    "vm_size": name,
                    "price_per_hour": vm.price_per_hour,
                    "region": vm.price_region,
                    "source": key,
                    "date": source.date.isoformat() if source else None,
                    "verified": source.verified if source else None,
                }
            )
        return rows

    def meter_prices(self) -> list[dict[str, object]]:
        """Every price that is not a VM's pay-as-you-go hour (Lustre, NetApp, Files, Blob, the
        meters, Spot and reservations), priced or not, with its source and date: the second
        table of ``stoker catalog prices``. An unknown price has ``None`` as value and date."""
        rows: list[dict[str, object]] = []
        for where, entry in self.entries():
            for name in type(entry).model_fields:
                if name == "price_per_hour" and where.startswith("vm."):
                    continue
                if name != "price" and not (
                    name.startswith(("price_", "spot_price", "reserved_"))
                    and name != "price_region"
                ):
                    continue
                value = getattr(entry, name)
                key = entry.source_of(name) if value is not None else None
                source = self.sources[key] if key is not None else None
                rows.append(
                    {
                        "entry": where,
                        "field": name,
                        "value": value,
                        "unit": getattr(entry, "unit", None) if name == "price" else None,
                        "source": key,
                        "date": source.date.isoformat() if source else None,
                        "verified": source.verified if source else None,
                    }
                )
        return rows

    def unpriced_vms(self) -> list[str]:
        """The VM sizes with no public price in the catalog (a plan's cost leaves them out)."""
        return [name for name, vm in self.vm.items() if vm.price_per_hour is None]

    @model_validator(mode="after")
    def _ethernet_on_its_size(self) -> Catalog:
        # The measured socket rate lives in its own section; the VM size carries it (with its
        # source) so every model that prices Ethernet reads one field. A size's own
        # ethernet_busbw (an override file) wins.
        for key, eth in self.ethernet.items():
            name = self.vm_key(key)
            if name is None:
                raise ValueError(f"ethernet.{key}: no such VM size in [vm]")
            vm = self.vm[name]
            if vm.ethernet_busbw is None:
                cite = vm.cite | {"ethernet_busbw": eth.source}
                update = {"ethernet_busbw": eth.busbw, "cite": cite}
                self.vm[name] = vm.model_copy(update=update)
        return self

    @model_validator(mode="after")
    def _every_figure_sourced(self) -> Catalog:
        for where, entry in self.entries():
            for field, source in [("source", entry.source), *entry.cite.items()]:
                if source not in self.sources:
                    raise ValueError(
                        f"{where}.{field} cites source {source!r}, which is not in [sources]"
                    )
            for field in entry.cite:
                if field not in type(entry).model_fields:
                    raise ValueError(f"{where}.cite names {field!r}, which is not a field")
        return self
