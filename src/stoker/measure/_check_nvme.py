"""Local NVMe: the disks the VM size should have, and whether they are mounted (RAID or not)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..units import format_bytes
from ._checks import Check, _join, _Node
from ._node import (
    NvmeDisk,
    mount_of,
)

_NVME_MOUNT = "/mnt/resource_nvme"  # where the Azure HPC image's nvme-raid service mounts it


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
