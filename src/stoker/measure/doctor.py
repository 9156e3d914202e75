"""``stoker doctor``: is this node fit for the job?

The doctor reads the node once (NVML, sysfs, procfs, NCCL's settings and the Azure Instance
Metadata Service), then judges each part against the VM size the node should be: the one named
with ``vm`` (``--vm``), else the one IMDS reports, looked up in the catalog. Each check says
what was expected, what was found, ``ok``/``warn``/``fail``/``skip``, and what to do.

Without an expected size (a laptop, a CI runner) a missing GPU or HCA is a ``skip``: there is
nothing to hold the node against. With one, it is a ``fail``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..catalog import Catalog, VmSize, load_catalog
from ..errors import CatalogError
from ..units import format_bytes
from ._imds import IMDS_URL, ImdsUnreachable, Instance, fetch_instance
from ._node import (
    Gpu,
    GpuReading,
    IbPort,
    NvmeDisk,
    NvmlSource,
    NvmlUnavailable,
    Pynvml,
    ib_ports,
    mdstat,
    module_loaded,
    mount_of,
    mounts,
    nccl_settings,
    nvme_disks,
)

__all__ = ["IMDS_URL", "Check", "DoctorReport", "Gpu", "GpuReading", "NvmlUnavailable", "doctor"]

Status = Literal["ok", "warn", "fail", "skip"]
_RANK = {"ok": 0, "skip": 1, "warn": 2, "fail": 3}

# The topology files the Azure HPC images install (azhpc-images customizations/ndv4.sh, ndv5.sh):
# NCCL cannot see the real PCIe layout through the hypervisor, so these tell it which HCA is
# near which GPU.
_TOPO_FILES = {
    "ND96isr_H100_v5": "/opt/microsoft/ndv5/topo.xml",
    "ND96isr_H200_v5": "/opt/microsoft/ndv5/topo.xml",
    "ND96asr_v4": "/opt/microsoft/ndv4/topo.xml",
    "ND96amsr_A100_v4": "/opt/microsoft/ndv4/topo.xml",
}
_NVME_MOUNT = "/mnt/resource_nvme"  # where the Azure HPC image's nvme-raid service mounts it
_HOT_MARGIN_C = 5  # warn this close to the slowdown temperature
_HOT_DEFAULT_C = 85  # when the driver publishes no slowdown threshold


@dataclass(frozen=True)
class Check:
    check: str
    expected: str
    found: str
    status: Status
    fix: str = ""  # what to do; empty when there is nothing to do

    def to_dict(self) -> dict[str, str]:
        return {
            "check": self.check,
            "expected": self.expected,
            "found": self.found,
            "status": self.status,
            "fix": self.fix,
        }


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


@dataclass(frozen=True)
class _Node:
    """Everything read from the node, and what it is held against."""

    want: VmSize | None
    want_name: str | None
    named: str | None  # the --vm argument, canonical
    instance: Instance | None
    imds_error: str | None
    gpus: GpuReading | None
    nvml_error: NvmlUnavailable | None
    ib: list[IbPort] | None
    peermem: bool
    nvme: list[NvmeDisk]
    mounts: dict[str, str]
    arrays: dict[str, Any]
    nccl: dict[str, tuple[str, str]]
    root: Path
    sys_root: str

    @property
    def strict(self) -> bool:
        return self.want is not None

    @property
    def nvidia(self) -> bool:
        """Whether NVIDIA's stack (NVML, NCCL, peermem) applies to this node."""
        if self.want is not None:
            return not _amd(self.want)
        return bool(self.gpus and self.gpus.gpus)

    @property
    def infiniband(self) -> list[IbPort]:
        """The InfiniBand ports; Azure's accelerated-networking HCA (Ethernet) left out."""
        return [p for p in self.ib or [] if p.link_layer == "InfiniBand"]


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
) -> DoctorReport:
    """Check this node against VM size ``vm`` (or the one IMDS reports).

    ``root`` is where ``/etc/nccl.conf`` and the topology files are looked for; the roots and
    ``nvml`` exist so tests can fake a node. Raises ``CatalogError`` for an unknown ``vm``.
    """
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


def _amd(vm: VmSize) -> bool:
    # The catalog names AMD Instinct GPUs "MI...": NVML, NCCL and nvidia-peermem do not apply.
    return vm.gpu.startswith("MI")


def _gbps(rate: float) -> float:
    return rate * 8 / 1e9


def _worst(statuses: Iterable[Status]) -> Status:
    return max(statuses, key=_RANK.__getitem__, default="ok")


def _join(fixes: Iterable[str]) -> str:
    return "; ".join(dict.fromkeys(f for f in fixes if f))


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


# ---------------------------------------------------------------------------------------------
# GPUs


def _gpu_checks(n: _Node) -> list[Check]:
    if n.want is not None and _amd(n.want):
        why = f"{n.want.gpu} GPUs are AMD's: NVML does not see them (use rocm-smi)"
        return [Check(name, "-", why, "skip") for name in ("gpus", "gpu health", "nvlink fabric")]
    if n.gpus is None:
        return [_no_nvml(n)] + [
            Check(name, "-", "no NVML: not checked", "skip")
            for name in ("gpu health", "nvlink fabric")
        ]
    return [_gpu_count(n, n.gpus.gpus), _gpu_health(n.gpus.gpus), _gpu_fabric(n.gpus.gpus)]


def _gpu_expected(vm: VmSize | None) -> str:
    if vm is None:
        return "-"
    return f"{vm.gpus} x {vm.gpu}, {format_bytes(vm.gpu_memory, binary=False)}"


def _no_nvml(n: _Node) -> Check:
    err = n.nvml_error
    assert err is not None
    expected = _gpu_expected(n.want)
    if err.no_driver and not n.strict:
        return Check("gpus", expected, f"no NVIDIA driver: GPU checks skipped ({err})", "skip")
    status: Status = "fail" if n.strict else "warn"
    what = "no NVIDIA driver" if err.no_driver else "NVML failed"
    fix = (
        "install the NVIDIA driver (the Azure HPC images ship it), then run nvidia-smi"
        if err.no_driver
        else "run nvidia-smi and look for NVRM lines in dmesg; reboot the VM if the driver hung"
    )
    return Check("gpus", expected, f"{what} ({err})", status, fix)


def _gpu_count(n: _Node, gpus: Sequence[Gpu]) -> Check:
    expected = _gpu_expected(n.want)
    names = Counter(g.name for g in gpus if not g.lost)
    memory = min((g.memory_bytes for g in gpus if not g.lost), default=0)
    found = ", ".join(f"{k} x {name}" for name, k in names.items()) or "0 GPUs"
    if memory:
        found += f", {format_bytes(memory, binary=False)}"
    if n.want is None:
        if not gpus:
            return Check("gpus", expected, found, "warn", "the driver sees no GPU: run nvidia-smi")
        return Check("gpus", expected, found, "ok")
    vm = n.want
    if len(gpus) != vm.gpus:
        fix = f"{n.want_name} has {vm.gpus} GPUs: run nvidia-smi; drain the node and report it"
        return Check("gpus", expected, f"{len(gpus)} GPUs: {found}", "fail", fix)
    model = vm.gpu.split()[0].lower()  # "H100 SXM" -> "h100", as in "NVIDIA H100 80GB HBM3"
    if any(model not in name.lower() for name in names):
        fix = f"run on a {n.want_name}, or pass the --vm these GPUs belong to"
        return Check("gpus", expected, found, "fail", fix)
    if memory < 0.9 * vm.gpu_memory:
        fix = "check for MIG mode (nvidia-smi -q | grep -i mig) and disable it for training"
        return Check("gpus", expected, found + " each: less than expected", "warn", fix)
    return Check("gpus", expected, found, "ok")


def _gpu_problems(g: Gpu) -> list[tuple[Status, str, str]]:
    """(status, what is wrong, what to do) for one GPU."""
    who = f"GPU {g.index} ({g.bus_id})"
    drain = "drain the node and report the GPU to Azure support"
    reset = f"stop the jobs and reset it (sudo nvidia-smi -r -i {g.index}) or reboot the VM"
    if g.lost:
        return [("fail", f"GPU {g.index}: NVML cannot read it ({g.lost})", drain)]
    out: list[tuple[Status, str, str]] = []
    if g.remap_failed:
        out.append(("fail", f"{who}: a memory row could not be remapped", drain))
    if g.remap_pending or g.retired_pending:
        what = "remapped rows" if g.remap_pending else "retired pages"
        out.append(("fail", f"{who}: {what} wait for a GPU reset", reset))
    if g.ecc_uncorrected:
        what = f"{who}: {g.ecc_uncorrected} uncorrectable ECC errors since the driver loaded"
        out.append(("warn", what, f"{reset}; if they come back, {drain}"))
    hot = (g.slowdown_c or _HOT_DEFAULT_C + _HOT_MARGIN_C) - _HOT_MARGIN_C
    if g.temperature_c is not None and g.temperature_c >= hot:
        limit = f" (slows down at {g.slowdown_c} C)" if g.slowdown_c else ""
        out.append(("warn", f"{who}: {g.temperature_c} C{limit}", drain))
    return out


def _gpu_health(gpus: Sequence[Gpu]) -> Check:
    expected = "no failed or pending row remaps, no uncorrectable ECC errors, not hot"
    problems = [p for g in gpus for p in _gpu_problems(g)]
    if not gpus:
        return Check("gpu health", expected, "no GPUs", "skip")
    if problems:
        return Check(
            "gpu health",
            expected,
            "; ".join(p[1] for p in problems),
            _worst(p[0] for p in problems),
            _join(p[2] for p in problems),
        )
    temps = [g.temperature_c for g in gpus if g.temperature_c is not None]
    hottest = f", hottest {max(temps)} C" if temps else ""
    return Check("gpu health", expected, f"{len(gpus)} GPUs healthy{hottest}", "ok")


def _gpu_fabric(gpus: Sequence[Gpu]) -> Check:
    reporting = [g for g in gpus if g.fabric is not None]
    if not reporting:
        why = "NVML reports no NVLink fabric state (GPU before Hopper, or no NVSwitch)"
        return Check("nvlink fabric", "-", why, "skip")
    expected = "every GPU registered with the fabric manager"
    bad = [g for g in reporting if g.fabric != "completed" or g.fabric_error]
    if not bad:
        return Check("nvlink fabric", expected, f"{len(reporting)} GPUs: completed", "ok")
    found = "; ".join(f"GPU {g.index}: {g.fabric_error or g.fabric}" for g in bad)
    fix = (
        "start the fabric manager (sudo systemctl restart nvidia-fabricmanager; its version "
        "must match the driver's) and read journalctl -u nvidia-fabricmanager"
    )
    return Check("nvlink fabric", expected, found, "fail", fix)


# ---------------------------------------------------------------------------------------------
# InfiniBand


def _ib_checks(n: _Node) -> list[Check]:
    ports = n.infiniband
    if not ports:
        return [_no_ib(n)] + [
            Check(name, "-", "no InfiniBand ports: not checked", "skip")
            for name in ("infiniband state", "infiniband rate")
        ]
    return [_ib_count(n, ports), _ib_state(ports), _ib_rate(n.want, ports)]


def _ib_expected(vm: VmSize | None) -> str:
    if vm is None or not vm.has_infiniband:
        return "-"
    return f"{vm.ib_links} ports at {_gbps(vm.ib_rate or 0):g} Gb/s"


def _no_ib(n: _Node) -> Check:
    where = f"{n.sys_root}/class/infiniband"
    what = "missing" if n.ib is None else "has no InfiniBand port"
    if n.want is not None and not n.want.has_infiniband:
        return Check("infiniband", "-", f"none ({n.want_name} has none)", "ok")
    if n.want is None:
        found = f"no InfiniBand devices: InfiniBand checks skipped ({where} {what})"
        return Check("infiniband", "-", found, "skip")
    fix = (
        "check lspci | grep Mellanox and ibstat; load the driver (sudo modprobe mlx5_ib) or use "
        "an Azure HPC image; if the HCAs are absent, redeploy the VM"
    )
    return Check("infiniband", _ib_expected(n.want), f"none ({where} {what})", "fail", fix)


def _ib_count(n: _Node, ports: Sequence[IbPort]) -> Check:
    # One port per HCA is the rule on Azure: name the HCA alone then.
    devices = ", ".join(p.device if p.port == 1 else p.name for p in ports)
    found = f"{len(ports)} ports: {devices}"
    if n.want is not None and n.want.has_infiniband and len(ports) < n.want.ib_links:
        fix = "run ibstat; an HCA that stays missing needs the VM redeployed or reported"
        return Check("infiniband", _ib_expected(n.want), found, "fail", fix)
    return Check("infiniband", _ib_expected(n.want), found, "ok")


def _ib_state(ports: Sequence[IbPort]) -> Check:
    expected = "every port ACTIVE, LinkUp"
    down = [p for p in ports if not p.up]
    if not down:
        return Check("infiniband state", expected, f"{len(ports)} ports ACTIVE, LinkUp", "ok")
    found = "; ".join(f"{p.name}: {p.state} ({p.phys_state})" for p in down)
    names = " ".join(sorted({p.device for p in down}))
    fix = (
        f"check ibstat {names}; a port that stays down needs the VM redeployed or reported to "
        "Azure (NCCL would route around it, slower, or hang)"
    )
    return Check("infiniband state", expected, found, "fail", fix)


def _ib_rate(want: VmSize | None, ports: Sequence[IbPort]) -> Check:
    rates = Counter(p.rate_text for p in ports)
    summary = ", ".join(f"{k} x {text}" for text, k in rates.items())
    if want is None or not want.has_infiniband:
        if len(rates) == 1:
            return Check("infiniband rate", "-", summary, "ok")
        fix = "a port below the others' rate has a bad cable or link: run ibstat"
        return Check("infiniband rate", "-", summary, "warn", fix)
    need = _gbps(want.ib_rate or 0)
    expected = f"{need:g} Gb/s per port"
    slow = [p for p in ports if p.rate_gbps is None or p.rate_gbps < need * 0.99]
    if not slow:
        return Check("infiniband rate", expected, summary, "ok")
    found = "; ".join(f"{p.name}: {p.rate_text}" for p in slow)
    names = " ".join(sorted({p.device for p in slow}))
    fix = f"check ibstat {names}; a slow link needs the VM redeployed or reported to Azure"
    return Check("infiniband rate", expected, found, "fail", fix)


# ---------------------------------------------------------------------------------------------
# GPUDirect RDMA and NCCL


def _peermem(n: _Node) -> Check:
    if n.want is not None:
        need = n.want.gpudirect_rdma and n.nvidia
    else:
        need = bool(n.infiniband) and n.nvidia
    expected = "nvidia_peermem loaded" if need else "-"
    if n.peermem:
        return Check("gpudirect rdma", expected, "nvidia_peermem loaded", "ok")
    if not need:
        why = "not loaded; not needed without InfiniBand and NVIDIA GPUs"
        if n.want is not None and not n.nvidia:
            why = f"not loaded; {n.want.gpu} GPUs use AMD's peer memory, not nvidia-peermem"
        return Check("gpudirect rdma", expected, why, "skip")
    found = "nvidia_peermem not loaded (not in /sys/module or /proc/modules)"
    fix = (
        "sudo modprobe nvidia-peermem; to load it at boot: "
        "echo nvidia-peermem | sudo tee /etc/modules-load.d/nvidia-peermem.conf"
    )
    return Check("gpudirect rdma", expected, found, "fail", fix)


def _setting(n: _Node, name: str) -> str:
    value, where = n.nccl[name]
    return f"{name}={value} ({where})"


def _nccl_topo(n: _Node) -> Check:
    known = _TOPO_FILES.get(n.want_name or "")
    expected = f"NCCL_TOPO_FILE={known}" if known else "-"
    if not n.nvidia:
        return Check("nccl topology", expected, "no NVIDIA GPU: NCCL not used here", "skip")
    if "NCCL_TOPO_FILE" in n.nccl:
        path = n.nccl["NCCL_TOPO_FILE"][0]
        if (n.root / path.lstrip("/")).is_file():
            return Check("nccl topology", expected, _setting(n, "NCCL_TOPO_FILE"), "ok")
        found = _setting(n, "NCCL_TOPO_FILE") + ": no such file"
        fix = f"point NCCL_TOPO_FILE at the file{f' ({known})' if known else ''} or unset it"
        return Check("nccl topology", expected, found, "warn", fix)
    if not known:
        why = f"NCCL_TOPO_FILE not set; none is published for {n.want_name or 'an unknown size'}"
        return Check("nccl topology", expected, why, "skip")
    there = (n.root / known.lstrip("/")).is_file()
    found = "NCCL_TOPO_FILE not set (environment or /etc/nccl.conf)"
    found += f"; {known} exists" if there else f"; {known} missing"
    fix = f"export NCCL_TOPO_FILE={known} (the Azure HPC image sets it in /etc/nccl.conf)"
    if not there:
        fix = (
            "use the Azure HPC image, or take its topology file (github.com/Azure/azhpc-images) "
            "and set NCCL_TOPO_FILE: without it NCCL may pair GPUs with distant HCAs"
        )
    return Check("nccl topology", expected, found, "warn", fix)


# (variable, values that hurt, status, why, what to do)
_NCCL_RULES: list[tuple[str, set[str], Status, str, str]] = [
    ("NCCL_IB_DISABLE", {"1"}, "fail", "NCCL will not use InfiniBand", "unset NCCL_IB_DISABLE"),
    (
        "NCCL_NET_GDR_LEVEL",
        {"0", "LOC"},
        "warn",
        "GPUDirect RDMA off: traffic goes through host memory",
        "unset NCCL_NET_GDR_LEVEL",
    ),
    (
        "NCCL_IB_PCI_RELAXED_ORDERING",
        {"0"},
        "warn",
        "relaxed ordering off: GPUDirect RDMA slows down in a VM",
        "set NCCL_IB_PCI_RELAXED_ORDERING=1, as the Azure HPC image does",
    ),
]


def _nccl_env(n: _Node) -> Check:
    azure_nd = n.want_name in _TOPO_FILES  # the sizes Azure's images configure NCCL for
    expected = "InfiniBand and GPUDirect RDMA not disabled"
    expected += "; NCCL_IB_PCI_RELAXED_ORDERING=1" if azure_nd else ""
    if not n.nvidia or not (n.infiniband or (n.want is not None and n.want.has_infiniband)):
        return Check("nccl environment", "-", "no NVIDIA GPU or no InfiniBand: not checked", "skip")
    problems = [
        (status, f"{_setting(n, var)}: {why}", fix)
        for var, bad, status, why, fix in _NCCL_RULES
        if var in n.nccl and n.nccl[var][0].upper() in bad
    ]
    if azure_nd and "NCCL_IB_PCI_RELAXED_ORDERING" not in n.nccl:
        why = "NCCL_IB_PCI_RELAXED_ORDERING not set (the Azure HPC image sets it to 1)"
        problems.append(("warn", why, "export NCCL_IB_PCI_RELAXED_ORDERING=1"))
    if problems:
        return Check(
            "nccl environment",
            expected,
            "; ".join(p[1] for p in problems),
            _worst(p[0] for p in problems),
            _join(p[2] for p in problems),
        )
    shown = [_setting(n, var) for var, *_ in _NCCL_RULES if var in n.nccl]
    return Check("nccl environment", expected, ", ".join(shown) or "NCCL defaults", "ok")


# ---------------------------------------------------------------------------------------------
# NVMe


def _nvme_checks(n: _Node) -> list[Check]:
    if not n.nvme:
        return [_no_nvme(n), Check("nvme mounted", "-", "no NVMe disks: not checked", "skip")]
    return [_nvme_present(n), _nvme_mounted(n)]


def _no_nvme(n: _Node) -> Check:
    found = f"no local NVMe disks in {n.sys_root}/block"
    if n.want is None:
        return Check("nvme", "-", found + ": NVMe checks skipped", "skip")
    expected = f"{format_bytes(n.want.local_nvme)} local NVMe"
    fix = (
        f"run lsblk and dmesg | grep -i nvme; {n.want_name} comes with local NVMe: "
        "redeploy the VM if the disks stay missing"
    )
    return Check("nvme", expected, found, "fail", fix)


def _nvme_present(n: _Node) -> Check:
    total = sum(d.size_bytes for d in n.nvme)
    models = ", ".join(f"{k} x {m}" for m, k in Counter(d.model for d in n.nvme).items())
    found = f"{models}: {format_bytes(total)}"
    if n.want is None:
        return Check("nvme", "-", found, "ok")
    expected = f"{format_bytes(n.want.local_nvme)} local NVMe"
    if total < 0.8 * n.want.local_nvme:
        fix = "run lsblk: a disk may be missing; a VM short of its disks needs a redeploy"
        return Check("nvme", expected, found + ": less than expected", "warn", fix)
    return Check("nvme", expected, found, "ok")


def _disk_use(n: _Node, disk: NvmeDisk) -> tuple[str | None, str | None]:
    """(where it is mounted, the array or volume holding it) for one disk."""
    for dev in (disk.name, *disk.partitions):
        where = mount_of(dev, n.mounts, n.sys_root)
        if where:
            return f"{dev} on {where}", None
    for holder in disk.holders:
        where = mount_of(holder, n.mounts, n.sys_root)
        array = n.arrays.get(holder)
        label = f"{holder} ({array.level})" if array else holder
        if where:
            return f"{label} on {where}", holder
    return None, (disk.holders[0] if disk.holders else None)


def _nvme_mounted(n: _Node) -> Check:
    expected = "mounted (one RAID-0 across all disks, or each disk)"
    used: Counter[str] = Counter()
    loose: list[str] = []
    idle_arrays: set[str] = set()
    for disk in n.nvme:
        where, holder = _disk_use(n, disk)
        if where:
            used[where] += 1
        elif holder:
            idle_arrays.add(holder)
        else:
            loose.append(disk.name)
    if not loose and not idle_arrays:
        found = ", ".join(f"{where} ({k} disk{'s' * (k != 1)})" for where, k in used.items())
        return Check("nvme mounted", expected, found, "ok")
    problems, fixes = [], []
    for array in sorted(idle_arrays):
        problems.append(f"{array} holds NVMe disks but is not mounted")
        fixes.append(
            f"sudo mkdir -p {_NVME_MOUNT} && sudo mount /dev/{array} {_NVME_MOUNT} "
            f"(first sudo mkfs.xfs /dev/{array} if it has no file system)"
        )
    if loose:
        problems.append(f"{', '.join(loose)} present but not mounted")
        fixes.append(_raid_fix(loose))
    return Check("nvme mounted", expected, "; ".join(problems), "warn", _join(fixes))


def _raid_fix(disks: Sequence[str]) -> str:
    wiped = "; local NVMe is wiped when the VM is deallocated"
    if len(disks) == 1:
        dev = f"/dev/{disks[0]}"
        mount = f"sudo mkdir -p {_NVME_MOUNT} && sudo mount {dev} {_NVME_MOUNT}"
        return f"sudo mkfs.xfs {dev} && {mount}{wiped}"
    devs = " ".join(f"/dev/{d}" for d in disks)
    return (
        f"RAID-0 them and mount the array: sudo mdadm --create /dev/md128 --level=0 "
        f"--raid-devices={len(disks)} {devs} && sudo mkfs.xfs /dev/md128 && "
        f"sudo mkdir -p {_NVME_MOUNT} && sudo mount /dev/md128 {_NVME_MOUNT} "
        f"(as the Azure HPC image's nvme-raid service does){wiped}"
    )
