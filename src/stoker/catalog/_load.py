"""Load the built-in catalog and lay the user's files over it, keeping every figure's source.

Order of layers, later wins: the built-in ``azure.toml``; the refreshed price file
(``$STOKER_PRICES`` or ``~/.config/stoker/prices.toml``) when it exists; then each file the user
names (``--catalog``) or lists in ``$STOKER_CATALOG`` (``os.pathsep``-separated).

An override entry only needs the fields it changes. Figures it sets without citing a source are
attributed to the override file itself, dated by the file's modification time.
"""

from __future__ import annotations

import copy
import datetime as dt
import os
import tomllib
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._user_files import load_user_toml
from .._validation import describe
from ..errors import CatalogError
from ._schema import Catalog, vm_size_name

_KEYED_SECTIONS = ("vm", "blob", "lustre", "files", "netapp", "meter", "ethernet", "sources")
_SINGLE_SECTIONS = ("fabric", "lustre_common", "reliability", "provision", "writers", "catalog")
_BOOKKEEPING = {"source", "cite", "note"}


def default_prices_path() -> Path:
    env = os.environ.get("STOKER_PRICES")
    if env:
        return Path(env)
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return config / "stoker" / "prices.toml"


def catalog_layers(extra: Iterable[str | Path] = ()) -> list[Path]:
    """The override files that apply, in order, before the built-in is counted."""
    layers: list[Path] = []
    prices = default_prices_path()
    if prices.is_file():
        layers.append(prices)
    env = os.environ.get("STOKER_CATALOG")
    if env:
        layers.extend(Path(p) for p in env.split(os.pathsep) if p)
    layers.extend(Path(p) for p in extra)
    return layers


def load_catalog(overrides: Iterable[str | Path] = (), *, defaults: bool = True) -> Catalog:
    """The built-in catalog with ``overrides`` applied (and, if ``defaults``, the env layers)."""
    data = _read_builtin()
    paths = catalog_layers(overrides) if defaults else [Path(p) for p in overrides]
    for path in paths:
        data = merge_override(data, _read_toml(path), path)
    try:
        return Catalog.model_validate(data)
    except ValidationError as exc:
        where = ", ".join(str(p) for p in paths) or "the built-in catalog"
        raise CatalogError(f"catalog invalid after applying {where}:\n{describe(exc)}") from exc


def _read_builtin() -> dict[str, Any]:
    text = resources.files("stoker.catalog").joinpath("azure.toml").read_text("utf-8")
    return tomllib.loads(text)


def _read_toml(path: Path) -> dict[str, Any]:
    return load_user_toml(path, "catalog", CatalogError)


def merge_override(base: dict[str, Any], override: dict[str, Any], path: Path) -> dict[str, Any]:
    """``base`` with ``override`` laid over it; pure, neither argument is changed."""
    merged = copy.deepcopy(base)
    sources = merged.setdefault("sources", {})
    own_source, n = f"user:{path.name}", 2
    while own_source in sources and sources[own_source].get("where") != str(path):
        own_source, n = f"user:{path.name}#{n}", n + 1  # two files of one name, two sources
    sources[own_source] = {
        "title": f"user catalog override {path}",
        "where": str(path),
        "retrieved": dt.date.fromtimestamp(path.stat().st_mtime).isoformat(),
    }
    for section, value in override.items():
        if section in _KEYED_SECTIONS:
            if not isinstance(value, dict):
                raise CatalogError(f"{path}: [{section}] must be a table of entries")
            for key, entry in value.items():
                if section == "vm":  # [vm.Standard_ND96isr_H100_v5] is the same size
                    key = vm_size_name(key)
                target = merged.setdefault(section, {})
                if section == "sources":
                    target[key] = entry
                else:
                    where = f"{section}.{key}"
                    target[key] = _merge_entry(target.get(key), entry, own_source, path, where)
        elif section in _SINGLE_SECTIONS:
            if not isinstance(value, dict):
                raise CatalogError(f"{path}: [{section}] must be a table")
            if section == "catalog":
                merged["catalog"] = {**merged.get("catalog", {}), **value}
            else:
                merged[section] = _merge_entry(
                    merged.get(section), value, own_source, path, section
                )
        else:
            known = ", ".join(_KEYED_SECTIONS + _SINGLE_SECTIONS)
            raise CatalogError(f"{path}: unknown section [{section}]; known sections: {known}")
    return merged


def _merge_entry(
    old: dict[str, Any] | None, new: Any, own_source: str, path: Path, where: str
) -> dict:
    if not isinstance(new, dict):
        raise CatalogError(f"{path}: {where} must be a table of figures, got {new!r}")
    entry = copy.deepcopy(old) if old else {"source": new.get("source", own_source)}
    cite = dict(entry.get("cite", {}))
    cite.update(new.get("cite", {}))
    for field, value in new.items():
        if field in _BOOKKEEPING:
            continue
        entry[field] = value
        if field not in new.get("cite", {}):
            # A figure the user changed belongs to the user's file, not the old source.
            cite[field] = new.get("source", own_source)
    if "note" in new:
        entry["note"] = new["note"]
    entry["cite"] = cite
    return entry
