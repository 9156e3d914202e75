"""Calibration: plan with figures measured on the VMs instead of the catalog's.

``stoker plan job.toml --measured results.json`` reads a file of measurements, replaces the VM
size's catalog figures with them (the catalog then cites "measured: FILE" for each), and the
plan lists every replaced figure beside the catalog's. The file is JSON:

    {"vm": "ND96isr_H100_v5",                     optional: the spec's VM size by default
     "nvme": [... `stoker bench storage --json` rows, run on the local NVMe ...],
     "allreduce": [... `stoker bench allreduce --json` rows, one VM ...]}

``nvme`` may also be ``{"read": "20 GB/s", "write": "12 GB/s"}`` and ``allreduce``
``{"busbw": "450 GB/s"}``. From storage rows the best cold sequential read and the best
sequential write are taken; from all-reduce rows, the busbw at the largest message size (the
catalog's published figure is the 8 GB one). The all-reduce was run across one VM's GPUs, so it
becomes the VM size's ``scaleup_busbw_measured``: the bandwidth of the plan's scale-up level.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..catalog import Catalog
from ..catalog._schema import Source
from ..errors import SpecError
from ..units import parse_rate

SOURCE = "measured"


@dataclass(frozen=True)
class Calibration:
    figure: str  # the catalog field, e.g. "nvme_read"
    catalog_bps: float | None
    measured_bps: float
    source: str  # the file and what in it


def read_measured(path: str | Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except FileNotFoundError as exc:
        raise SpecError(f"--measured {path}: no such file") from exc
    except IsADirectoryError as exc:
        raise SpecError(f"--measured {path}: is a folder; give the JSON file") from exc
    except UnicodeDecodeError as exc:
        raise SpecError(f"--measured {path}: not UTF-8 text ({exc.reason})") from exc
    except json.JSONDecodeError as exc:
        raise SpecError(f"--measured {path}: not JSON ({exc.msg}, line {exc.lineno})") from exc
    except OSError as exc:
        raise SpecError(f"--measured {path}: cannot be read: {exc.strerror}") from exc
    if not isinstance(data, dict):
        raise SpecError(f"--measured {path}: expected an object with nvme and/or allreduce")
    unknown = set(data) - {"vm", "nvme", "allreduce"}
    if unknown:
        raise SpecError(
            f"--measured {path}: unknown keys {sorted(unknown)}; use vm, nvme, allreduce"
        )
    return data


def _rate(value: Any, where: str) -> float:
    try:
        rate = float(parse_rate(value)) if isinstance(value, str) else float(value)
    except (ValueError, TypeError) as exc:
        raise SpecError(f"{where}: {value!r} is not a rate (e.g. '20 GB/s')") from exc
    if not 0 < rate < math.inf:
        raise SpecError(f"{where}: {value!r} is not a rate above zero; measure it again")
    return rate


def _storage(rows: Any, where: str) -> dict[str, float]:
    if isinstance(rows, dict):
        return {
            f"nvme_{k}": _rate(v, f"{where}.{k}") for k, v in rows.items() if k in ("read", "write")
        }
    out: dict[str, float] = {}
    reads = [
        _rate(r["mb_per_s"] * 1e6, f"{where}: seq-read mb_per_s")
        for r in rows
        if r.get("test") == "seq-read" and r.get("cache") == "cold"
    ]
    writes = [
        _rate(r["mb_per_s"] * 1e6, f"{where}: seq-write mb_per_s")
        for r in rows
        if r.get("test") == "seq-write"
    ]
    if reads:
        out["nvme_read"] = max(reads)
    if writes:
        out["nvme_write"] = max(writes)
    if not out:
        raise SpecError(
            f"{where}: no seq-read (cold) or seq-write rows from `stoker bench storage --json`"
        )
    return out


def _allreduce(rows: Any, where: str) -> float:
    if isinstance(rows, dict):
        return _rate(rows.get("busbw"), f"{where}.busbw")
    ours = [r for r in rows if r.get("collective", "all_reduce").replace("-", "_") == "all_reduce"]
    if not ours:
        raise SpecError(f"{where}: no all-reduce rows from `stoker bench allreduce --json`")
    largest = max(ours, key=lambda r: r["size"])
    return _rate(largest["busbw_bps"] if "busbw_bps" in largest else largest["busbw"], where)


def calibrate(
    catalog: Catalog, vm_size: str, path: str | Path
) -> tuple[Catalog, list[Calibration]]:
    """The catalog with ``vm_size``'s figures replaced by the file's, and what was replaced."""
    data = read_measured(path)
    vm_name = data.get("vm") or vm_size
    if vm_name != vm_size:
        raise SpecError(f"--measured {path} was taken on {vm_name}; the job runs on {vm_size}")
    vm = catalog.vm[vm_size]
    measured: dict[str, float] = {}
    if "nvme" in data:
        measured |= _storage(data["nvme"], f"--measured {path}: nvme")
    if "allreduce" in data:
        measured["scaleup_busbw_measured"] = _allreduce(
            data["allreduce"], f"--measured {path}: allreduce"
        )
    # The catalog's counterpart of a one-VM busbw is the published one (the benchmarking guide).
    counterpart = {"scaleup_busbw_measured": "allreduce_busbw_measured"}
    rows = [
        Calibration(
            name, getattr(vm, counterpart.get(name, name)), value, f"{Path(path).name}: {name}"
        )
        for name, value in measured.items()
    ]
    cite = dict(vm.cite) | {name: SOURCE for name in measured}
    measured_source = Source(
        title=f"measured on the VMs: {path}", where=str(path), retrieved=dt.date.today()
    )
    sources = dict(catalog.sources) | {SOURCE: measured_source}
    new_vm = vm.model_copy(update=measured | {"cite": cite})
    updated = catalog.model_copy(update={"vm": catalog.vm | {vm_size: new_vm}, "sources": sources})
    return updated, rows
