"""InfiniBand ports, GPUDirect RDMA (nvidia-peermem) and NCCL's topology file and settings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from ..catalog import VmSize
from ._checks import Check, Status, _failed, _gbps, _Node
from ._node import (
    IbPort,
)

# The topology files the Azure HPC images install (azhpc-images customizations/ndv4.sh, ndv5.sh):
# NCCL cannot see the real PCIe layout through the hypervisor, so these tell it which HCA is
# near which GPU.
_TOPO_FILES = {
    "ND96isr_H100_v5": "/opt/microsoft/ndv5/topo.xml",
    "ND96isr_H200_v5": "/opt/microsoft/ndv5/topo.xml",
    "ND96asr_v4": "/opt/microsoft/ndv4/topo.xml",
    "ND96amsr_A100_v4": "/opt/microsoft/ndv4/topo.xml",
}


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


def _value(text: str) -> str:
    """A setting as NCCL reads it: spaces dropped, numbers as numbers (" 1" and "01" are 1)."""
    text = text.strip().upper()
    try:
        return str(int(text))
    except ValueError:
        return text


def _on(value: str) -> bool:  # NCCL reads these flags as integers: anything but 0 sets them
    return value not in ("", "0")


_GDR_OFF = {"0", "LOC"}  # level 0 (LOC): GPUDirect RDMA never used

# (variable, hurts(value), status, why, what to do)
_NCCL_RULES: list[tuple[str, Callable[[str], bool], Status, str, str]] = [
    ("NCCL_IB_DISABLE", _on, "fail", "NCCL will not use InfiniBand", "unset NCCL_IB_DISABLE"),
    (
        "NCCL_NET",
        lambda v: v == "SOCKET",
        "fail",
        "NCCL sends over TCP sockets, not InfiniBand",
        "unset NCCL_NET (or set it to IB)",
    ),
    (
        "NCCL_P2P_DISABLE",
        _on,
        "fail",
        "NVLink peer-to-peer off: GPUs in the VM talk through host memory",
        "unset NCCL_P2P_DISABLE",
    ),
    (
        "NCCL_NET_GDR_LEVEL",
        _GDR_OFF.__contains__,
        "warn",
        "GPUDirect RDMA off: traffic goes through host memory",
        "unset NCCL_NET_GDR_LEVEL",
    ),
    (
        "NCCL_IB_GDR_LEVEL",  # NCCL_NET_GDR_LEVEL's name before NCCL 2.12; still read
        _GDR_OFF.__contains__,
        "warn",
        "GPUDirect RDMA off: traffic goes through host memory",
        "unset NCCL_IB_GDR_LEVEL",
    ),
    (
        "NCCL_IB_PCI_RELAXED_ORDERING",
        lambda v: v == "0",
        "warn",
        "relaxed ordering off: GPUDirect RDMA slows down in a VM",
        "set NCCL_IB_PCI_RELAXED_ORDERING=1, as the Azure HPC image does",
    ),
]


def _hcas_used(spec: str, devices: list[str]) -> list[str]:
    """The HCAs NCCL_IB_HCA leaves NCCL: "^" excludes, "=" matches names exactly (else as
    prefixes), ":port" suffixes ignored (NCCL's env docs)."""
    spec = spec.strip()
    exclude = spec.startswith("^")
    spec = spec.removeprefix("^")
    exact = spec.startswith("=")
    names = [e.split(":")[0].strip() for e in spec.removeprefix("=").split(",") if e.strip()]

    def named(device: str) -> bool:
        return any(device == m if exact else device.startswith(m) for m in names)

    return [d for d in devices if named(d) != exclude]


def _ib_hca(n: _Node) -> tuple[Status, str, str] | None:
    if "NCCL_IB_HCA" not in n.nccl or not n.infiniband:
        return None
    devices = sorted({p.device for p in n.infiniband})
    if _hcas_used(n.nccl["NCCL_IB_HCA"][0], devices):
        return None
    why = f"{_setting(n, 'NCCL_IB_HCA')}: names no InfiniBand HCA ({', '.join(devices)} are)"
    return ("fail", why, "unset NCCL_IB_HCA, or name the InfiniBand HCAs (mlx5_ib)")


def _nccl_env(n: _Node) -> Check:
    azure_nd = n.want_name in _TOPO_FILES  # the sizes Azure's images configure NCCL for
    expected = "InfiniBand and GPUDirect RDMA not disabled"
    expected += "; NCCL_IB_PCI_RELAXED_ORDERING=1" if azure_nd else ""
    if not n.nvidia or not (n.infiniband or (n.want is not None and n.want.has_infiniband)):
        return Check("nccl environment", "-", "no NVIDIA GPU or no InfiniBand: not checked", "skip")
    problems = [
        (status, f"{_setting(n, var)}: {why}", fix)
        for var, hurts, status, why, fix in _NCCL_RULES
        if var in n.nccl and hurts(_value(n.nccl[var][0]))
    ]
    if (hca := _ib_hca(n)) is not None:
        problems.append(hca)
    if azure_nd and "NCCL_IB_PCI_RELAXED_ORDERING" not in n.nccl:
        why = "NCCL_IB_PCI_RELAXED_ORDERING not set (the Azure HPC image sets it to 1)"
        problems.append(("warn", why, "export NCCL_IB_PCI_RELAXED_ORDERING=1"))
    if problems:
        return _failed("nccl environment", expected, problems)
    shown = [
        _setting(n, var) for var in [*(r[0] for r in _NCCL_RULES), "NCCL_IB_HCA"] if var in n.nccl
    ]
    return Check("nccl environment", expected, ", ".join(shown) or "NCCL defaults", "ok")
