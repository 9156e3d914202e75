"""``stoker doctor``: is this node fit for the job?

The doctor reads the node once (NVML, sysfs, procfs, NCCL's settings and the Azure Instance
Metadata Service), then judges each part against the VM size the node should be: the one named
with ``vm`` (``--vm``), else the one IMDS reports, looked up in the catalog. Each check says
what was expected, what was found, ``ok``/``warn``/``fail``/``skip``, and what to do.

Without an expected size (a laptop, a CI runner) a missing GPU or HCA is a ``skip``: there is
nothing to hold the node against. With one, it is a ``fail``.

The node's own health marker (``stoker.node_markers``: ``/run/stoker/unhealthy``, left by a
failed ``stoker-node health``) is shown as its own line, a ``warn`` at most: never a ``fail``.
The node's health timer runs this doctor to decide whether to clear the marker, so a doctor
that failed on the marker would keep the node unhealthy forever.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._redact import printable
from ..catalog import Catalog, load_catalog
from ..errors import CatalogError
from ..node_markers import RUN_DIR, RUN_DIR_ENV
from ..node_markers import ready as ready_marker
from ..node_markers import unhealthy as unhealthy_marker
from ._check_fabric import _ib_checks, _nccl_env, _nccl_topo, _peermem
from ._check_gpus import _gpu_checks
from ._check_nvme import _nvme_checks
from ._checks import Check, _Node
from ._imds import IMDS_URL, ImdsUnreachable, Instance, check_url, fetch_instance
from ._node import (
    Gpu,
    GpuReading,
    NvmlSource,
    NvmlUnavailable,
    Pynvml,
    ib_ports,
    mdstat,
    module_loaded,
    mounts,
    nccl_settings,
    nvme_disks,
)

__all__ = ["IMDS_URL", "Check", "DoctorReport", "Gpu", "GpuReading", "NvmlUnavailable", "doctor"]


@dataclass
class DoctorReport:
    vm: str | None  # the VM size the node was held against, if any
    vm_source: str | None  # "--vm" or "imds"
    instance: Instance | None
    imds_error: str | None
    driver: str | None
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no check failed (warnings and skips do not make a node unfit)."""
        return all(c.status != "fail" for c in self.checks)

    def counts(self) -> dict[str, int]:
        tally = Counter(c.status for c in self.checks)
        return {status: tally.get(status, 0) for status in ("ok", "warn", "fail", "skip")}

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "vm": self.vm,
            "vm_source": self.vm_source,
            "imds": self.instance.to_dict() if self.instance else None,
            "imds_error": self.imds_error,
            "nvidia_driver": self.driver,
            "counts": self.counts(),
            "checks": [c.to_dict() for c in self.checks],
        }


def doctor(
    vm: str | None = None,
    *,
    sys_root: str | Path = "/sys",
    proc_root: str | Path = "/proc",
    root: str | Path = "/",
    imds_url: str = IMDS_URL,
    env: Mapping[str, str] = os.environ,
    nvml: NvmlSource | None = None,
    catalog: Catalog | Iterable[str | Path] | None = None,
    run_dir: str | Path | None = None,
) -> DoctorReport:
    """Check this node against VM size ``vm`` (or the one IMDS reports).

    ``root`` is where ``/etc/nccl.conf`` and the topology files are looked for; the roots and
    ``nvml`` exist so tests can fake a node. ``run_dir`` holds the node's markers (default
    ``STOKER_RUN`` in ``env``, else ``run/stoker`` under ``root``). Raises ``CatalogError`` for
    an unknown ``vm``.
    """
    check_url(imds_url)
    cat = catalog if isinstance(catalog, Catalog) else load_catalog(catalog or ())
    named = _lookup(cat, vm) if vm else None
    instance, imds_error = _ask_imds(imds_url)
    found = _lookup(cat, instance.vm_size, strict=False) if instance else None
    want_name = named or found
    gpus, nvml_error = _read_gpus(nvml or Pynvml())
    node = _Node(
        want=cat.vm[want_name] if want_name else None,
        want_name=want_name,
        named=named,
        instance=instance,
        imds_error=imds_error,
        gpus=gpus,
        nvml_error=nvml_error,
        ib=ib_ports(sys_root),
        peermem=module_loaded("nvidia-peermem", sys_root=sys_root, proc_root=proc_root),
        nvme=nvme_disks(sys_root),
        mounts=mounts(proc_root),
        arrays=mdstat(proc_root),
        nccl=nccl_settings(env, root),
        root=Path(root),
        sys_root=str(sys_root),
    )
    checks = [_vm_size(node), _scale_set(node), *_gpu_checks(node), *_ib_checks(node)]
    checks += [_peermem(node), _nccl_topo(node), _nccl_env(node), *_nvme_checks(node)]
    # The markers' folder as the node script finds it: $STOKER_RUN, else /run/stoker (under root).
    markers = run_dir or env.get(RUN_DIR_ENV) or Path(root, RUN_DIR.lstrip("/"))
    checks.append(_health_marker(markers))
    return DoctorReport(
        vm=want_name,
        vm_source="--vm" if named else ("imds" if found else None),
        instance=instance,
        imds_error=imds_error,
        driver=gpus.driver if gpus else None,
        checks=checks,
    )


# ---------------------------------------------------------------------------------------------
# reading


def _lookup(cat: Catalog, size: str, *, strict: bool = True) -> str | None:
    """The catalog's name for a VM size, IMDS's ``Standard_`` prefix and case ignored."""
    bare = size.removeprefix("Standard_").removeprefix("standard_")
    for name in cat.vm:
        if name.lower() == bare.lower():
            return name
    if strict:
        known = ", ".join(sorted(cat.vm))
        raise CatalogError(
            f"unknown VM size '{size}' (--vm): the catalog has {known}; "
            f"describe it in a catalog file ([vm.{bare}]) and pass it with --catalog"
        )
    return None


def _ask_imds(url: str) -> tuple[Instance | None, str | None]:
    try:
        return fetch_instance(url), None
    except ImdsUnreachable as exc:
        return None, str(exc)


def _read_gpus(source: NvmlSource) -> tuple[GpuReading | None, NvmlUnavailable | None]:
    try:
        return source.read(), None
    except NvmlUnavailable as exc:
        return None, exc


def _health_marker(folder: str | Path) -> Check:
    """The node set-up's verdict on this node, shown beside the doctor's own (never a fail:
    see the module docstring)."""
    expected = "no unhealthy marker"
    bad = unhealthy_marker(folder)
    if bad is not None:
        fix = (
            "informational, not counted as a failure: the node's health timer clears it once "
            "azurehpc-health-checks and this doctor pass (stoker-node health)"
        )
        return Check("node health", expected, f"{bad.path}: {bad}", "warn", fix)
    good = ready_marker(folder)
    if good is not None:
        since = f" since {good.at}" if good.at else ""
        return Check("node health", expected, f"ready{since} ({good.path})", "ok")
    where = printable(str(folder), lines=False)
    found = f"no marker in {where} (not a node stoker set up, or its set-up has not finished)"
    return Check("node health", expected, found, "skip")


# ---------------------------------------------------------------------------------------------
# Azure: VM size and scale set


def _not_on_azure(n: _Node) -> str:
    return f"not on Azure: IMDS unreachable ({n.imds_error})"


def _vm_size(n: _Node) -> Check:
    expected = n.named or "-"
    if n.instance is None:
        fix = (
            f"the hardware is held against --vm {n.named} instead"
            if n.named
            else "on an Azure VM, check that nothing blocks 169.254.169.254 (IMDS takes no proxy)"
        )
        return Check("vm size", expected, _not_on_azure(n), "skip", fix)
    size = n.instance.vm_size.removeprefix("Standard_")
    zone = f"zone {n.instance.zone}" if n.instance.zone else ""
    where = ", ".join(x for x in (n.instance.location, zone) if x)
    found = f"{size} ({where})" if where else size
    if n.named and size.lower() != n.named.lower():
        return Check(
            "vm size", expected, found, "fail", f"run on a {n.named} VM, or pass --vm {size}"
        )
    if n.want is None:
        return Check(
            "vm size",
            expected,
            found + ": not in the catalog, so the hardware has no expected figures",
            "warn",
            f"describe [vm.{size}] in a catalog file and pass it with --catalog",
        )
    return Check("vm size", expected if n.named else size, found, "ok")


def _scale_set(n: _Node) -> Check:
    expected = "one scale set (singlePlacementGroup=true)"
    if n.instance is None:
        return Check("scale set", expected, _not_on_azure(n), "skip")
    name, group = n.instance.scale_set, n.instance.placement_group
    if n.want is not None and not n.want.has_infiniband:
        found = f"{name or 'none'}: {n.want_name} has no InfiniBand, so none is needed"
        return Check("scale set", "-", found, "ok")
    if not name:
        return Check(
            "scale set",
            expected,
            "not in a scale set (compute.vmScaleSetName is empty)",
            "warn",
            "InfiniBand only works between VMs of one scale set or one availability set: "
            "deploy the job's VMs into one scale set (IMDS does not show availability sets; "
            "if this VM is in one with the others, ignore this)",
        )
    if not group:
        return Check(
            "scale set",
            expected,
            f"{name}, but compute.placementGroupId is empty",
            "warn",
            "InfiniBand reaches only VMs in the same placement group: create the scale set "
            "with singlePlacementGroup=true",
        )
    return Check("scale set", expected, f"{name}, placement group {group}", "ok")
