"""The dated, sourced Azure facts stoker plans with, and the tools to override and refresh them."""

from ._load import catalog_layers, default_prices_path, load_catalog
from ._prices import VmPrice, refresh_prices
from ._schema import (
    BlobTier,
    Catalog,
    Fabric,
    FilesTier,
    LustreCommon,
    LustreSku,
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
    "LustreSku",
    "NetAppLevel",
    "Provisioning",
    "Source",
    "VmPrice",
    "VmSize",
    "catalog_layers",
    "default_prices_path",
    "load_catalog",
    "refresh_prices",
    "vm_size_name",
]
