"""The dated, sourced Azure facts stoker plans with, and the tools to override and refresh them."""

from ._load import catalog_layers, default_prices_path, load_catalog
from ._prices import VmPrice, refresh_prices
from ._schema import (
    BlobTier,
    Catalog,
    FilesTier,
    LustreSku,
    NetAppLevel,
    Source,
    VmSize,
)

__all__ = [
    "BlobTier",
    "Catalog",
    "FilesTier",
    "LustreSku",
    "NetAppLevel",
    "Source",
    "VmPrice",
    "VmSize",
    "catalog_layers",
    "default_prices_path",
    "load_catalog",
    "refresh_prices",
]
