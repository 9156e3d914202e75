"""Calibration: plan with figures measured on the VMs instead of the catalog's.

``stoker plan job.toml --measured results.json`` reads a file of measurements, replaces the VM
size's catalog figures with them (the catalog then cites "measured: FILE" for each), and the
plan lists every replaced figure beside the catalog's. The file is JSON:

    {"vm": "ND96isr_H100_v5",                     optional: the spec's VM size by default
     "nvme": [... `stoker bench storage --json` rows, run on the local NVMe ...],
     "allreduce": [... `stoker bench allreduce --json` rows, one VM ...]}

A seq-write row run with one job (``"jobs": 1``, one of `stoker bench storage`'s defaults) is
one writer stream: it becomes ``nvme_stream_write``, the limit of one checkpoint writer (a lone
``torch.save``) that no source publishes.

A ``stoker.measured/1`` record of ``stoker.measure.single_writer`` (one ``torch.save``, timed
on the tier) gives ``torch_save_write``: the limit of a checkpoint one process writes by
serialising (``checkpoints.writers = "single"``), on any tier.

``nvme`` may also be ``{"read": "20 GB/s", "write": "12 GB/s", "stream_write": "3 GB/s"}`` and
``allreduce``
``{"busbw": "450 GB/s"}``; the whole file may be the raw output of ``stoker bench allreduce
--json`` (the ``allreduce`` value may be too). A sweep from one rank is refused (busbw is 0
there); one from CPU ranks (gloo) is used with a warning: it does not measure the GPU fabric.

From storage rows the best cold sequential read and the best sequential write are taken;
from all-reduce rows, the busbw at the largest message size (the catalog's published figure is
the 8 GB one). An all-reduce run across one VM's GPUs becomes the VM size's
``scaleup_busbw_measured``: the bandwidth of the plan's scale-up level. One run across VMs
(``world_size`` above ``ranks_per_node``) becomes ``ib_busbw_measured``, the VM's InfiniBand
bandwidth as a collective sees it, or, run with ``NCCL_NET=Socket`` (the sweep's ``nccl_net``),
``ethernet_busbw``, the rate of the plan's Ethernet collectives. The ``{"busbw": ...}`` form
takes ``"network": "infiniband"`` or ``"ethernet"`` for a figure measured across VMs.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._user_files import load_user_json
from ..catalog import Catalog, Source, vm_size_name
from ..errors import SpecError
from ..units import parse_rate

SOURCE = "measured"
MEASURED_KIND, SINGLE_WRITER = "stoker.measured/1", "single_writer"  # measure.single_writer
MIN_RATE = 1e6  # bytes/s


@dataclass(frozen=True)
class Calibration:
    figure: str  # the catalog field, e.g. "nvme_read"
    catalog_bps: float | None
    measured_bps: float
    source: str  # the file and what in it
    warning: str | None = None  # why the figure may not mean what the catalog's does


_KEYS = ("vm", "nvme", "allreduce")


def read_measured(path: str | Path) -> dict[str, Any]:
    data = load_user_json(path, "measured JSON", SpecError, name=f"--measured {path}")
    if not isinstance(data, dict):
        raise SpecError(f"--measured {path}: expected an object with nvme and/or allreduce")
    if _is_sweep(data):  # the raw output of `stoker bench allreduce --json`
        data = {"allreduce": data}
    if data.get("kind") == MEASURED_KIND and data.get("name") == SINGLE_WRITER:
        # stoker.measure.single_writer's record: one torch.save stream on the VM
        summary = data.get("summary") if isinstance(data.get("summary"), dict) else {}
        rate = summary.get("torch_save_write_bps")
        data = {"nvme": {"torch_save_write": _rate(rate, f"--measured {path}: summary")}}
    unknown = set(data) - set(_KEYS)
    if unknown:
        raise SpecError(
            f"--measured {path}: unknown keys {sorted(unknown)}; use {', '.join(_KEYS)}"
        )
    if "nvme" not in data and "allreduce" not in data:
        raise SpecError(f"--measured {path}: nothing measured; give nvme and/or allreduce")
    return data


def _is_sweep(data: Any) -> bool:
    return isinstance(data, dict) and "rows" in data and "world_size" in data


def _rate(value: Any, where: str) -> float:
    # bool is an int to Python: `true` must not read as 1 B/s.
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise SpecError(f"{where}: {value!r} is not a rate (e.g. '20 GB/s')")
    try:
        rate = float(parse_rate(value)) if isinstance(value, str) else float(value)
    except (ValueError, TypeError, OverflowError) as exc:
        raise SpecError(f"{where}: {value!r} is not a rate (e.g. '20 GB/s')") from exc
    if not 0 < rate < math.inf:
        raise SpecError(f"{where}: {value!r} is not a rate above zero; measure it again")
    if rate < MIN_RATE:  # a broken run (or bits for bytes): it would plan steps of centuries
        raise SpecError(
            f"{where}: {value!r} is below 1 MB/s, which no NVMe or GPU fabric runs at; "
            "check the run and measure it again"
        )
    return rate


def _field(row: Any, key: str, where: str) -> Any:
    if not isinstance(row, dict):
        raise SpecError(f"{where}: {row!r} is not a row of `stoker bench ... --json`")
    if key not in row:
        raise SpecError(f"{where}: no {key!r} in {row!r}")
    return row[key]


def _storage(rows: Any, where: str) -> dict[str, float]:
    if isinstance(rows, dict):
        unknown = set(rows) - {"read", "write", "stream_write", "torch_save_write"}
        if unknown or not rows:
            raise SpecError(
                f"{where}: unknown keys {sorted(unknown)}; use read, write and/or stream_write"
                if unknown
                else f"{where}: empty; use read and/or write (e.g. '20 GB/s')"
            )
        # torch_save_write is the VM's (serialising is CPU work), not its NVMe's
        return {
            (k if k == "torch_save_write" else f"nvme_{k}"): _rate(v, f"{where}.{k}")
            for k, v in rows.items()
        }
    if not isinstance(rows, list):
        raise SpecError(
            f"{where}: expected the rows of `stoker bench storage --json` or "
            '{"read": "20 GB/s", "write": "12 GB/s"}'
        )
    out: dict[str, float] = {}
    reads, writes, single = [], [], []
    for i, r in enumerate(rows):
        test = _field(r, "test", f"{where}[{i}]")
        if (test, r.get("cache")) == ("seq-read", "cold") or test == "seq-write":
            mbps = _field(r, "mb_per_s", f"{where}[{i}]")
            rate = _rate(mbps * 1e6 if _number(mbps) else mbps, f"{where}[{i}] mb_per_s")
            (reads if test == "seq-read" else writes).append(rate)
            if test == "seq-write" and r.get("jobs") == 1:
                single.append(rate)
    if reads:
        out["nvme_read"] = max(reads)
    if writes:
        out["nvme_write"] = max(writes)
    if single:
        out["nvme_stream_write"] = max(single)
    if not out:
        raise SpecError(
            f"{where}: no seq-read (cold) or seq-write rows from `stoker bench storage --json`"
        )
    return out


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# Which figure a measured all-reduce replaces: inside one VM, across VMs on InfiniBand, on sockets.
_NETWORK_FIGURE = {
    "scaleup": "scaleup_busbw_measured",
    "infiniband": "ib_busbw_measured",
    "ethernet": "ethernet_busbw",
}


def _allreduce_figure(data: Any, where: str) -> str:
    """The catalog figure an all-reduce measurement stands for (see the module's docstring)."""
    if _is_sweep(data):
        per_node, ranks = data.get("ranks_per_node"), data["world_size"]
        if not (_number(per_node) and _number(ranks)) or per_node >= ranks:
            return _NETWORK_FIGURE["scaleup"]
        socket = str(data.get("nccl_net", "")).lower() == "socket"
        return _NETWORK_FIGURE["ethernet" if socket else "infiniband"]
    network = data.get("network", "scaleup") if isinstance(data, dict) else "scaleup"
    if network not in _NETWORK_FIGURE:
        raise SpecError(f"{where}.network: {network!r}; use {', '.join(_NETWORK_FIGURE)}")
    return _NETWORK_FIGURE[network]


def _allreduce(data: Any, where: str) -> tuple[float, str | None]:
    """The busbw at the largest all-reduce size, and a warning when it is not the GPU fabric's."""
    warning = None
    if _is_sweep(data):
        ranks, backend, device = data["world_size"], data.get("backend"), data.get("device")
        if not _number(ranks):
            raise SpecError(
                f"{where}: world_size {ranks!r} is not a number of ranks; give the unedited "
                "output of `stoker bench allreduce --json`"
            )
        if ranks < 2:
            raise SpecError(
                f"{where}: measured on {ranks} rank(s), where an all-reduce moves nothing "
                "(busbw 0); run it with one rank per GPU (torchrun --nproc-per-node 8)"
            )
        if "nccl" not in str(backend) or str(device).startswith("cpu"):
            warning = (
                f"the all-reduce busbw was measured with {backend} on {device}: CPU ranks do not "
                "measure the GPU fabric; run `stoker bench allreduce` with NCCL on the GPUs"
            )
        data = data["rows"]
    elif isinstance(data, dict):
        if "busbw" not in data or set(data) - {"busbw", "network"}:
            raise SpecError(f"{where}: unknown keys {sorted(set(data) - {'busbw'})}; use busbw")
        return _rate(data["busbw"], f"{where}.busbw"), None
    if not isinstance(data, list):
        raise SpecError(
            f"{where}: expected the output of `stoker bench allreduce --json`, its rows, or "
            '{"busbw": "450 GB/s"}'
        )
    ours = []
    for i, r in enumerate(data):
        _field(r, "size", f"{where}[{i}]")  # a row at all
        if str(r.get("collective", "all_reduce")).replace("-", "_") == "all_reduce":
            size = _field(r, "size", f"{where}[{i}]")
            if not _number(size):
                raise SpecError(f"{where}[{i}].size: {size!r} is not a number of bytes")
            ours.append((size, i, r))
    if not ours:
        raise SpecError(f"{where}: no all-reduce rows from `stoker bench allreduce --json`")
    _, i, largest = max(ours, key=lambda x: x[0])
    key = "busbw_bps" if "busbw_bps" in largest else "busbw"
    return _rate(_field(largest, key, f"{where}[{i}]"), f"{where}[{i}].{key}"), warning


def calibrate(
    catalog: Catalog, vm_size: str, path: str | Path
) -> tuple[Catalog, list[Calibration]]:
    """The catalog with ``vm_size``'s figures replaced by the file's, and what was replaced."""
    data = read_measured(path)
    vm_name = vm_size if data.get("vm") is None else data["vm"]
    if not isinstance(vm_name, str) or not vm_name.strip():
        raise SpecError(
            f"--measured {path}: vm: {vm_name!r} is not a VM size name; give the size the "
            "figures were measured on (e.g. Standard_ND96isr_H100_v5), or leave vm out"
        )
    # IMDS and the portal write "Standard_ND96isr_H100_v5"; the catalog drops the prefix.
    if vm_size_name(vm_name).lower() != vm_size.lower():
        raise SpecError(f"--measured {path} was taken on {vm_name}; the job runs on {vm_size}")
    vm = catalog.vm[vm_size]
    measured: dict[str, float] = {}
    warnings: dict[str, str | None] = {}
    if "nvme" in data:
        measured |= _storage(data["nvme"], f"--measured {path}: nvme")
    if "allreduce" in data:
        where = f"--measured {path}: allreduce"
        name = _allreduce_figure(data["allreduce"], where)
        measured[name], warnings[name] = _allreduce(data["allreduce"], where)
    # The catalog's counterpart of a one-VM busbw is the published one (the benchmarking guide);
    # of one across VMs, the InfiniBand the catalog gives the VM (links x achievable).
    counterpart = {
        "scaleup_busbw_measured": "allreduce_busbw_measured",
        "ib_busbw_measured": "ib_per_vm",
    }
    # A VM's torch.save stream is unpublished; the catalog's is the writers' (any VM).
    published = {"torch_save_write": catalog.writers.torch_save_write if catalog.writers else None}
    rows = [
        Calibration(
            name,
            getattr(vm, counterpart.get(name, name)) or published.get(name),
            value,
            f"{Path(path).name}: {name}",
            warnings.get(name),
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
