"""Read what a node has: NVIDIA GPUs through NVML, InfiniBand ports, kernel modules, NVMe disks,
mounts and RAID arrays from sysfs and procfs, and NCCL's configuration file.

Every reader takes the root it reads under (``/sys``, ``/proc``, ``/``), so the tests build a fake
tree in a temporary folder. A missing file is an answer (the node lacks the thing), never an
exception: ``stoker doctor`` must run on a laptop as well as on an ND H100 v5 VM.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

# ---------------------------------------------------------------------------------------------
# NVML


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML reports it. ``None`` means NVML does not report that figure here."""

    index: int
    name: str
    bus_id: str
    memory_bytes: int
    temperature_c: int | None = None
    slowdown_c: int | None = None  # the driver's slowdown threshold, where it publishes one
    ecc_uncorrected: int | None = None  # volatile count: since the driver last loaded
    retired_pending: bool | None = None  # pre-Ampere: retired pages wait for a GPU reset
    remap_pending: bool | None = None  # Ampere and later: remapped rows wait for a GPU reset
    remap_failed: bool | None = None  # a row could not be remapped: the GPU needs replacing
    fabric: str | None = None  # NVLink fabric state (Hopper and later with NVSwitch)
    fabric_error: str | None = None  # the fabric's status when it is not "success"
    lost: str | None = None  # the NVML error met while reading this GPU, if any


@dataclass(frozen=True)
class GpuReading:
    driver: str
    gpus: list[Gpu]


class NvmlUnavailable(Exception):
    """NVML could not start. ``no_driver`` tells a node without a driver from a broken one."""

    def __init__(self, reason: str, *, no_driver: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.no_driver = no_driver


class NvmlSource(Protocol):
    """What the doctor needs from NVML; tests pass a fake with this one method."""

    def read(self) -> GpuReading: ...


_FABRIC_STATES = {1: "not started", 2: "in progress", 3: "completed"}


class Pynvml:
    """The real NVML through ``pynvml`` (package ``nvidia-ml-py``).

    XID errors are not here: NVML only delivers them as live events, not as a history to read.
    """

    def read(self) -> GpuReading:
        import pynvml as nv

        _init(nv)
        try:
            driver = _text(nv.nvmlSystemGetDriverVersion())
            return GpuReading(driver, [_gpu(nv, i) for i in range(nv.nvmlDeviceGetCount())])
        except nv.NVMLError as exc:
            raise NvmlUnavailable(f"NVML failed to list the GPUs: {exc}", no_driver=False) from exc
        finally:
            nv.nvmlShutdown()


def _init(nv: Any) -> None:
    # The two "no driver" errors mean a CPU machine; any other error means a broken driver.
    try:
        nv.nvmlInit()
    except nv.NVMLError_LibraryNotFound as exc:
        raise NvmlUnavailable("libnvidia-ml.so not found", no_driver=True) from exc
    except nv.NVMLError_DriverNotLoaded as exc:
        raise NvmlUnavailable("the nvidia kernel module is not loaded", no_driver=True) from exc
    except nv.NVMLError as exc:
        raise NvmlUnavailable(f"nvmlInit failed: {exc}", no_driver=False) from exc


def _gpu(nv: Any, i: int) -> Gpu:
    try:
        h = nv.nvmlDeviceGetHandleByIndex(i)
        name = _text(nv.nvmlDeviceGetName(h))
        bus_id = _text(nv.nvmlDeviceGetPciInfo(h).busId)
        memory = int(nv.nvmlDeviceGetMemoryInfo(h).total)
    except nv.NVMLError as exc:  # e.g. GPU_IS_LOST: the GPU fell off the bus
        return Gpu(index=i, name="?", bus_id="?", memory_bytes=0, lost=str(exc))
    remap = _optional(nv, nv.nvmlDeviceGetRemappedRows, h)
    # Retired pages are the pre-Ampere mechanism; Ampere and later remap rows instead.
    retired = None if remap else _optional(nv, nv.nvmlDeviceGetRetiredPagesPendingStatus, h)
    fabric, fabric_error = _fabric(nv, h)
    return Gpu(
        index=i,
        name=name,
        bus_id=bus_id,
        memory_bytes=memory,
        temperature_c=_optional(nv, nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
        slowdown_c=_optional(
            nv, nv.nvmlDeviceGetTemperatureThreshold, h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
        ),
        ecc_uncorrected=_optional(
            nv,
            nv.nvmlDeviceGetTotalEccErrors,
            h,
            nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            nv.NVML_VOLATILE_ECC,
        ),
        retired_pending=None if retired is None else bool(retired),
        remap_pending=None if remap is None else bool(remap[2]),
        remap_failed=None if remap is None else bool(remap[3]),
        fabric=fabric,
        fabric_error=fabric_error,
    )


def _fabric(nv: Any, handle: Any) -> tuple[str | None, str | None]:
    # On NVSwitch systems the fabric manager must register each GPU before CUDA can use it.
    from ctypes import byref

    struct, query = (
        getattr(nv, n, None) for n in ("c_nvmlGpuFabricInfo_t", "nvmlDeviceGetGpuFabricInfo")
    )
    if struct is None or query is None:  # nvidia-ml-py older than the fabric API
        return None, None
    info = struct()
    if _optional(nv, query, handle, byref(info)) is None:
        return None, None
    state = _FABRIC_STATES.get(int(info.state))
    if state is None:  # NVML_GPU_FABRIC_STATE_NOT_SUPPORTED: no NVSwitch fabric here
        return None, None
    error = None if int(info.status) == nv.NVML_SUCCESS else str(nv.NVMLError(int(info.status)))
    return state, error


def _optional(nv: Any, fn: Any, *args: Any) -> Any:
    """Call an NVML query that some GPUs or drivers lack; ``None`` where it is not there."""
    try:
        return fn(*args)
    except nv.NVMLError:
        return None


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


# ---------------------------------------------------------------------------------------------
# InfiniBand


@dataclass(frozen=True)
class IbPort:
    device: str  # mlx5_ib0
    port: int
    state: str  # ACTIVE, DOWN, INIT, ARMED
    phys_state: str  # LinkUp, Disabled, Polling
    rate_gbps: float | None  # 400.0; None when the rate file is missing or unreadable
    rate_text: str  # as the kernel writes it: "400 Gb/sec (4X NDR)"
    link_layer: str  # InfiniBand, Ethernet

    @property
    def name(self) -> str:
        return f"{self.device} port {self.port}"

    @property
    def up(self) -> bool:
        return self.state == "ACTIVE" and self.phys_state == "LinkUp"


def ib_ports(sys_root: str | Path) -> list[IbPort] | None:
    """Every port under ``class/infiniband``; ``None`` without that folder (no RDMA stack)."""
    base = Path(sys_root) / "class" / "infiniband"
    if not base.is_dir():
        return None
    ports = []
    for dev in sorted(base.iterdir(), key=lambda p: _natural(p.name)):
        port_dir = dev / "ports"
        if not port_dir.is_dir():
            continue
        for port in sorted(port_dir.iterdir(), key=lambda p: _natural(p.name)):
            ports.append(_ib_port(dev.name, port))
    return ports


def _ib_port(device: str, port: Path) -> IbPort:
    rate = _read(port / "rate")
    found = re.match(r"\s*([\d.]+)\s*Gb/sec", rate)
    return IbPort(
        device=device,
        port=int(port.name) if port.name.isdigit() else 0,
        state=_after_colon(_read(port / "state")) or "?",
        phys_state=_after_colon(_read(port / "phys_state")) or "?",
        rate_gbps=float(found.group(1)) if found else None,
        rate_text=rate or "?",
        # Ports older than link_layer (kernel < 2.6.37) are InfiniBand.
        link_layer=_read(port / "link_layer") or "InfiniBand",
    )


def _after_colon(text: str) -> str:
    # sysfs writes "4: ACTIVE" and "5: LinkUp"; the number is the spec's code for the word.
    return text.split(":", 1)[-1].strip()


# ---------------------------------------------------------------------------------------------
# Kernel modules


def module_loaded(name: str, *, sys_root: str | Path, proc_root: str | Path) -> bool:
    """Whether a kernel module is loaded: ``/sys/module/NAME`` or a line in ``/proc/modules``."""
    name = name.replace("-", "_")  # modprobe accepts both; the kernel lists underscores
    if (Path(sys_root) / "module" / name).is_dir():
        return True
    modules = _read(Path(proc_root) / "modules")
    return any(line.split(" ", 1)[0] == name for line in modules.splitlines())


# ---------------------------------------------------------------------------------------------
# NVMe disks, RAID arrays and mounts

# Azure's remote managed disks show up as NVMe too on NVMe-interface VM sizes; they are not
# the local scratch disks the doctor counts.
_REMOTE_NVME_MODELS = ("MSFT NVMe Accelerator",)


@dataclass(frozen=True)
class NvmeDisk:
    name: str  # nvme0n1
    size_bytes: int
    model: str
    partitions: list[str] = field(default_factory=list)
    holders: list[str] = field(default_factory=list)  # md128, dm-0: arrays or volumes on it


def nvme_disks(sys_root: str | Path) -> list[NvmeDisk]:
    """Local NVMe namespaces under ``/sys/block`` (remote managed disks left out)."""
    base = Path(sys_root) / "block"
    if not base.is_dir():
        return []
    disks = []
    for dev in sorted(base.glob("nvme*n*"), key=lambda p: _natural(p.name)):
        model = _read(dev / "device" / "model")
        if model.startswith(_REMOTE_NVME_MODELS):
            continue
        disks.append(_nvme(dev, model))
    return disks


def _nvme(dev: Path, model: str) -> NvmeDisk:
    sectors = _read(dev / "size")  # always in 512-byte sectors, whatever the block size
    parts = sorted((p.name for p in dev.glob(f"{dev.name}p*")), key=_natural)
    holders = [h.name for h in _listdir(dev / "holders")]
    for part in parts:
        holders += [h.name for h in _listdir(dev / part / "holders")]
    return NvmeDisk(
        name=dev.name,
        size_bytes=int(sectors) * 512 if sectors.isdigit() else 0,
        model=model or "?",
        partitions=parts,
        holders=sorted(set(holders)),
    )


def mounts(proc_root: str | Path) -> dict[str, str]:
    """Device -> mount point from ``/proc/mounts`` (the first mount of each device)."""
    table: dict[str, str] = {}
    for line in _read(Path(proc_root) / "mounts").splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith("/dev/"):
            table.setdefault(parts[0], _unescape(parts[1]))
    return table


def _unescape(path: str) -> str:
    # /proc/mounts writes a space in a mount point as \040 (octal), a tab as \011.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


@dataclass(frozen=True)
class MdArray:
    name: str  # md128
    level: str  # raid0
    members: list[str]  # nvme0n1, ...
    active: bool


def mdstat(proc_root: str | Path) -> dict[str, MdArray]:
    """The software RAID arrays in ``/proc/mdstat``, by name."""
    arrays = {}
    for line in _read(Path(proc_root) / "mdstat").splitlines():
        # "md128 : active raid0 nvme1n1[1] nvme0n1[0]"; a failed member carries "(F)".
        found = re.match(r"(md\w+)\s*:\s*(active|inactive)\s+(?:\(\S+\)\s+)?(\S+)\s+(.*)", line)
        if not found:
            continue
        name, state, level, rest = found.groups()
        members = [re.sub(r"\[\d+\].*", "", m) for m in rest.split()]
        arrays[name] = MdArray(name, level, sorted(members, key=_natural), state == "active")
    return arrays


def mount_of(device: str, table: Mapping[str, str], sys_root: str | Path) -> str | None:
    """Where block device ``device`` (``md128``, ``dm-0``, ``nvme0n1p1``) is mounted, if it is."""
    candidates = [f"/dev/{device}", f"/dev/md/{device}"]
    dm_name = _read(Path(sys_root) / "block" / device / "dm" / "name")
    if dm_name:  # LVM and dm-crypt volumes are mounted by their /dev/mapper name
        candidates.append(f"/dev/mapper/{dm_name}")
    return next((table[c] for c in candidates if c in table), None)


# ---------------------------------------------------------------------------------------------
# NCCL configuration


def nccl_settings(env: Mapping[str, str], root: str | Path) -> dict[str, tuple[str, str]]:
    """NCCL_* settings as NCCL sees them: ``/etc/nccl.conf`` overlaid by the environment.

    Returns name -> (value, where it came from).
    """
    conf = Path(root) / "etc" / "nccl.conf"
    settings: dict[str, tuple[str, str]] = {}
    for line in _read(conf).splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            settings[key.strip()] = (value.strip(), "/etc/nccl.conf")
    for key, value in env.items():
        if key.startswith("NCCL_"):
            settings[key] = (value, "environment")
    return settings


# ---------------------------------------------------------------------------------------------
# helpers


def _read(path: Path) -> str:
    """A sysfs or procfs file's text, stripped; ``""`` when it is missing or unreadable."""
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


def _listdir(path: Path) -> list[Path]:
    try:
        return sorted(path.iterdir())
    except OSError:
        return []


def _natural(name: str) -> list[int | str]:
    # mlx5_ib2 before mlx5_ib10, nvme2n1 before nvme10n1
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
