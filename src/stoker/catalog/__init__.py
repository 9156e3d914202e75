"""The dated, sourced Azure facts stoker plans with, and the tools to override and refresh them."""

from ._load import catalog_layers, default_prices_path, load_catalog
from ._prices import Refreshed, VmPrice, refresh_all, refresh_prices
from ._schema import (
    HOURS_PER_MONTH,
    BlobTier,
    Catalog,
    Fabric,
    FilesTier,
    LustreCommon,
    LustreSku,
    Meter,
    NetAppLevel,
    Provisioning,
    Source,
    VmSize,
    vm_size_name,
)

__all__ = [
    "BlobTier",
    "Catalog",
    "Fabric",
    "FilesTier",
    "LustreCommon",
    "HOURS_PER_MONTH",
    "LustreSku",
    "Meter",
    "NetAppLevel",
    "Provisioning",
    "Refreshed",
    "Source",
    "VmPrice",
    "VmSize",
    "catalog_layers",
    "default_prices_path",
    "load_catalog",
    "refresh_all",
    "refresh_prices",
    "vm_size_name",
]
