"""What the shared tiers cost when several flows meet on them. Pure: bytes, bytes/s, seconds.

Flows on one limit (a Blob account's egress or request rate, a Lustre file system's throughput,
a VM's frontend NIC) share it in proportion to what each asks for: when the demands add up to
more than the limit, every flow is slowed by the same factor (a fluid model of many streams).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def share(limit: float | None, *demands: float) -> float:
    """The factor (0-1] every flow on ``limit`` runs at, given what each asks for."""
    total = sum(demands)
    if limit is None or total <= 0 or total <= limit:
        return 1.0
    return limit / total


def stall_s(bytes_per_step: float, rate: float | None, ideal_step_s: float) -> float:
    """The plan's data stall: the part of a step's read that outlasts the ideal step."""
    if rate is None:
        return 0.0
    if rate <= 0:
        return math.inf
    return max(0.0, bytes_per_step / rate - ideal_step_s)


@dataclass(frozen=True)
class RestartLoad:
    """Every VM loads its part of the checkpoint at once after a failure."""

    total_bytes: float  # the whole fleet reads this much
    per_vm_bytes: float
    shared_bps: float | None  # the tier's limit that every VM shares; None: each VM reads locally
    vm_bps: float  # one VM's own path (NIC or local NVMe)
    blob_bytes: float = 0.0  # of total_bytes, read from Blob (shares the account with re-staging)

    @property
    def baseline_s(self) -> float:
        """As if each VM had the tier to itself: what the plan's restart time is taken to hold."""
        return self.per_vm_bytes / self.vm_bps if self.vm_bps else 0.0

    @property
    def contended_s(self) -> float:
        if self.shared_bps is None:
            return self.baseline_s
        return max(self.baseline_s, self.total_bytes / self.shared_bps)


def restart_with_restaging_s(
    load: RestartLoad, blob_bps: float | None, vm_bps: float, shard_bytes: float, swapped: int
) -> float:
    """The checkpoint load and ``swapped`` new VMs each staging ``shard_bytes`` from Blob, at
    once: each new VM at most its NIC, all of them and any checkpoint bytes read from Blob
    through the account's limit."""
    if swapped <= 0 or shard_bytes <= 0:
        return load.contended_s
    alone = shard_bytes / vm_bps if vm_bps else 0.0
    through_blob = 0.0
    if blob_bps:
        through_blob = (load.blob_bytes + swapped * shard_bytes) / blob_bps
    return max(load.contended_s, alone, through_blob)


@dataclass(frozen=True)
class Window:
    """A background flow (a checkpoint's write or its upload) beside the data reads."""

    name: str
    seconds: float  # how long the flow runs alone at its planned rate
    factor: float  # the share (0-1] the data reads and the flow each get meanwhile


def extra_stall_per_cycle_s(
    windows: list[Window],
    bytes_per_step: float,
    read_bps: float,
    ideal_step_s: float,
    planned_stall_s: float,
    cycle_s: float,
) -> float:
    """Seconds of data stall each save cycle adds beyond the plan's, while its write and upload
    take part of the tier the reads use. A window longer than the cycle overlaps the next one,
    so at most the whole cycle is under contention."""
    extra = 0.0
    left = cycle_s
    for w in windows:
        if w.factor >= 1.0 or left <= 0:
            continue
        under = min(left, w.seconds / w.factor)  # the flow itself is slowed as much
        slowed = stall_s(bytes_per_step, read_bps * w.factor, ideal_step_s)
        per_step = slowed - planned_stall_s
        if per_step > 0 and math.isfinite(slowed):
            extra += under / (ideal_step_s + slowed) * per_step
        left -= under
    return extra
