"""GPU checks: count and model against the VM size, health (row remaps, ECC, heat), NVLink."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..catalog import VmSize
from ..units import format_bytes
from ._checks import Check, Status, _amd, _failed, _Node
from ._node import (
    Gpu,
)

_HOT_MARGIN_C = 5  # warn this close to the slowdown temperature
_HOT_DEFAULT_C = 85  # when the driver publishes no slowdown threshold


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
        return _failed("gpu health", expected, problems)
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
