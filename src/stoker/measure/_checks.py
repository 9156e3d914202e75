"""What every doctor check shares: the ``Check`` row, the node as read, and small helpers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..catalog import VmSize
from ._imds import Instance
from ._node import (
    GpuReading,
    IbPort,
    NvmeDisk,
    NvmlUnavailable,
)

Status = Literal["ok", "warn", "fail", "skip"]
_RANK = {"ok": 0, "skip": 1, "warn": 2, "fail": 3}


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


def _amd(vm: VmSize) -> bool:
    # The catalog names AMD Instinct GPUs "MI...": NVML, NCCL and nvidia-peermem do not apply.
    return vm.gpu.startswith("MI")


def _gbps(rate: float) -> float:
    return rate * 8 / 1e9


def _worst(statuses: Iterable[Status]) -> Status:
    return max(statuses, key=_RANK.__getitem__, default="ok")


def _join(fixes: Iterable[str]) -> str:
    return "; ".join(dict.fromkeys(f for f in fixes if f))


def _failed(name: str, expected: str, problems: list[tuple[Status, str, str]]) -> Check:
    """One check from its (status, what was found, fix) problems: the worst status wins."""
    return Check(
        name,
        expected,
        "; ".join(p[1] for p in problems),
        _worst(p[0] for p in problems),
        _join(p[2] for p in problems),
    )
