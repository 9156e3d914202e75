"""What each resource costs per hour, from the same figures the plan priced the run with.

GPU VMs at the plan's price per VM-hour (the catalog's, or ``cluster.price_per_hour``); Managed
Lustre at the catalog's price per TiB-hour; Blob at its GB-month price for the bytes the plan
stores, spread over a 730-hour month as the plan does. A resource the catalog has no price for
is unknown (None), never zero; network, identity and role assignments cost nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..plan.cost import HOURS_PER_MONTH
from ._layout import Layout


@dataclass(frozen=True)
class Line:
    """One row of the README's table, in creation order."""

    resource: str  # ARM type, short
    name: str
    size: str
    per_hour_usd: float | None  # None: the catalog has no price
    while_idle: bool  # still billed when the GPUs are deallocated


@dataclass(frozen=True)
class Bill:
    lines: tuple[Line, ...]

    @property
    def per_hour_usd(self) -> float:
        """The priced part; ``unknown`` names what is left out."""
        return sum(line.per_hour_usd or 0.0 for line in self.lines)

    @property
    def idle_per_hour_usd(self) -> float:
        """With the scale sets deallocated: what storage alone keeps costing."""
        return sum(line.per_hour_usd or 0.0 for line in self.lines if line.while_idle)

    @property
    def unknown(self) -> list[str]:
        return [line.name for line in self.lines if line.per_hour_usd is None]

    def tag_values(self) -> dict[str, str]:
        out = {"total": f"{self.per_hour_usd:.2f}"}
        for line in self.lines:
            price = line.per_hour_usd
            out[line.name] = "unknown" if price is None else f"{price:.2f}"
        return out


def vmss_per_hour(lay: Layout, vms: int) -> float | None:
    return None if lay.vm_price_per_hour is None else lay.vm_price_per_hour * vms


def blob_per_hour(lay: Layout, stored_bytes: float) -> float | None:
    if lay.blob_price_gb_month is None:
        return None
    return lay.blob_price_gb_month * stored_bytes / 1e9 / HOURS_PER_MONTH


def account_label(lay: Layout, role: str) -> str:
    from ._refs import account_name

    return account_name(lay, role)


def bill(lay: Layout, network_lines: list[Line]) -> Bill:
    """Every resource's line, in the order the template creates them."""
    lines = list(network_lines)
    lines.append(Line("userAssignedIdentity", lay.identity, "-", 0.0, True))
    for account in lay.accounts:
        stored = sum(lay.stored_bytes.get(c, 0.0) for c in account.containers)
        size = f"{', '.join(account.containers)}; {stored / 1e12:,.2f} TB stored"
        price = blob_per_hour(lay, stored)
        lines.append(Line("storageAccount", account_label(lay, account.role), size, price, True))
    for lu in lay.lustres:
        price = None if lu.price_per_tib_hour is None else lu.price_per_tib_hour * lu.capacity_tib
        size = f"{lu.sku}, {lu.capacity_tib} TiB, {lu.throughput_mbps / 1000:,.1f} GB/s"
        lines.append(Line("amlFilesystem", lu.name, size, price, True))
    lines += _volume_lines(lay)
    for s in lay.scale_sets:
        size = f"{s.vms} x {s.vm_size} (VMs {s.first_vm}-{s.first_vm + s.vms - 1})"
        lines.append(Line("virtualMachineScaleSet", s.name, size, vmss_per_hour(lay, s.vms), False))
    return Bill(tuple(lines))


def _volume_lines(lay: Layout) -> list[Line]:
    from ._refs import account_name
    from ._res_volumes import pool_name, volume_name

    anf = [v for v in lay.volumes if v.kind == "netapp"]
    lines = []
    if anf:
        lines.append(Line("netAppAccount", lay.netapp_account, "-", 0.0, True))
    for v in anf:
        size = f"{v.level}, {v.pool_tib} TiB"
        lines.append(Line("capacityPool", pool_name(lay, v), size, v.price_per_hour, True))
        size = f"{v.size_gib / 1024:,.1f} TiB NFSv4.1 at {v.mount_path}" + (
            ", large volume" if v.large else ""
        )
        lines.append(Line("netAppVolume", volume_name(lay, v), size, 0.0, True))
    shares = [v for v in lay.volumes if v.kind == "files"]
    if shares:
        prices = [v.price_per_hour for v in shares]
        price = None if None in prices else sum(p or 0.0 for p in prices)
        size = "premium NFS: " + ", ".join(
            f"{v.role} {v.size_gib:,} GiB at {v.mount_path}" for v in shares
        )
        lines.append(Line("storageAccount", account_name(lay, "files"), size, price, True))
    return lines
