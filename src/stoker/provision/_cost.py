"""What each resource costs per hour, from the same figures the plan priced the run with.

GPU VMs at the plan's price per VM-hour (the catalog's, or ``cluster.price_per_hour``); Managed
Lustre at the catalog's price per TiB-hour; Blob at its GB-month price for the bytes the plan
stores, spread over a 730-hour month as the plan does; the NAT gateway and each public IP at the
catalog's meters; a scale set, once deallocated, still at its VMs' OS disks. A resource the
catalog has no price for is unknown (None), never zero; the virtual network, identity and role
assignments cost nothing. Each priced line names the catalog figure it comes from (``source``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..plan.cost import HOURS_PER_MONTH
from ._layout import Layout

if TYPE_CHECKING:
    from ..catalog import Catalog

IDLE_WEEKEND_HOURS = 48.0


@dataclass(frozen=True)
class Line:
    """One row of the README's table, in creation order."""

    resource: str  # ARM type, short
    name: str
    size: str
    per_hour_usd: float | None  # None: the catalog has no price
    while_idle: bool  # still billed when the GPUs are deallocated
    # What it still costs stopped, where ``while_idle`` is false: a deallocated scale set's OS
    # disks. None: unknown (no price in the catalog).
    stopped_per_hour_usd: float | None = 0.0
    source: str = ""  # the catalog figures its price comes from; "" where it costs nothing


@dataclass(frozen=True)
class Bill:
    lines: tuple[Line, ...]

    @property
    def per_hour_usd(self) -> float:
        """The priced part; ``unknown`` names what is left out."""
        return sum(line.per_hour_usd or 0.0 for line in self.lines)

    @property
    def idle_per_hour_usd(self) -> float:
        """With the scale sets deallocated: storage, network and the VMs' OS disks (the priced
        part; ``idle_unknown`` names what is left out)."""
        return sum(_idle(line) or 0.0 for line in self.lines)

    @property
    def idle_unknown(self) -> list[str]:
        return [line.name for line in self.lines if _idle(line) is None]

    def lustre_weekend_usd(self, hours: float = IDLE_WEEKEND_HOURS) -> float | None:
        """Every Managed Lustre file system left up ``hours`` unused; None when one is unpriced."""
        prices = [line.per_hour_usd for line in self.lines if line.resource == "amlFilesystem"]
        if None in prices:
            return None
        return sum(p or 0.0 for p in prices) * hours

    def after_teardown_per_hour_usd(self) -> tuple[float, list[str]]:
        """(what teardown leaves billed per hour, names whose cost is unknown): everything idle
        but Managed Lustre, which teardown deletes once archived."""
        kept = [line for line in self.lines if line.resource != "amlFilesystem"]
        unknown = [line.name for line in kept if _idle(line) is None]
        return sum(_idle(line) or 0.0 for line in kept), unknown

    @property
    def unknown(self) -> list[str]:
        return [line.name for line in self.lines if line.per_hour_usd is None]

    def tag_values(self) -> dict[str, str]:
        out = {"total": f"{self.per_hour_usd:.2f}"}
        for line in self.lines:
            price = line.per_hour_usd
            out[line.name] = "unknown" if price is None else f"{price:.2f}"
            if not line.while_idle:  # what teardown's "still billed" counts once it is stopped
                stopped = line.stopped_per_hour_usd
                out[f"{line.name}:stopped"] = "unknown" if stopped is None else f"{stopped:.2f}"
        return out


def _idle(line: Line) -> float | None:
    return line.per_hour_usd if line.while_idle else line.stopped_per_hour_usd


def _cited(cat: Catalog, where: str, entry: object, field: str) -> str:
    key = entry.source_of(field)  # type: ignore[attr-defined]
    return f"{where}.{field} from {key} ({cat.sources[key].date.isoformat()})"


def priced(lines: list[Line], lay: Layout, cat: Catalog) -> list[Line]:
    """``lines`` with the catalog's meters laid on: the NAT gateway and public IPs at their
    hourly price, each scale set's OS disks as what it costs deallocated, Lustre and Blob
    cited. A meter the catalog lacks stays unknown."""
    meters = {
        "natGateway": ("nat_gateway", cat.meter.get("nat_gateway")),
        "publicIPAddress": ("public_ip", cat.meter.get("public_ip")),
    }
    disk = cat.meter.get("os_disk")
    out = []
    for line in lines:
        if line.resource in meters and line.per_hour_usd is None:
            key, meter = meters[line.resource]
            if meter is not None and meter.per_hour is not None:
                line = dataclasses.replace(
                    line,
                    per_hour_usd=meter.per_hour,
                    source=_cited(cat, f"meter.{key}", meter, "price"),
                )
        elif line.resource == "virtualMachineScaleSet":
            vms = next((s.vms for s in lay.scale_sets if s.name == line.name), 0)
            per_disk = disk.per_hour if disk is not None else None
            source = line.source
            if per_disk is not None and disk is not None:
                source = "; ".join(
                    filter(None, [source, _cited(cat, "meter.os_disk", disk, "price")])
                )
            line = dataclasses.replace(
                line,
                stopped_per_hour_usd=None if per_disk is None else per_disk * vms,
                source=source,
            )
        elif line.resource == "amlFilesystem" and line.per_hour_usd is not None:
            lu = next((lu for lu in lay.lustres if lu.name == line.name), None)
            # cited only where this catalog priced the layout (provision uses one catalog)
            if lu is not None and cat.lustre[lu.sku].price_per_tib_hour == lu.price_per_tib_hour:
                line = dataclasses.replace(
                    line,
                    source=_cited(
                        cat, f"lustre.{lu.sku}", cat.lustre[lu.sku], "price_per_tib_hour"
                    ),
                )
        elif line.resource == "storageAccount" and line.per_hour_usd:
            blob = next(iter(cat.blob.values())) if len(cat.blob) == 1 else cat.blob.get("standard")
            if blob is not None and blob.price_hot_gb_month is not None:
                line = dataclasses.replace(
                    line, source=_cited(cat, "blob.standard", blob, "price_hot_gb_month")
                )
        out.append(line)
    return out


def idle_lines(
    bill: Bill,
    hours: float = IDLE_WEEKEND_HOURS,
    stopped: str = "scale sets deallocated",
    teardown: bool = True,
) -> list[str]:
    """Markdown lines for the deployment's README: an idle hour and day with the GPUs
    ``stopped`` (the sum of the priced meters, each named with its catalog source), a weekend
    of Managed Lustre left up, and, where ``teardown`` removes the deployment, what it leaves
    billed (AKS: stoker teardown does not delete a cluster, so there is no such line)."""

    def usd(value: float | None) -> str:
        return "unknown" if value is None else f"${value:,.2f}"

    idle = bill.idle_per_hour_usd
    unknown = bill.idle_unknown
    left = f" (not priced: {', '.join(unknown)})" if unknown else ""
    out = [
        f"**Idle, {stopped}: {usd(idle)} an hour, {usd(idle * 24)} a day**{left}, the sum of:",
        "",
    ]
    for line in bill.lines:
        cost = _idle(line)
        if cost == 0.0:
            continue
        what = "OS disks (deallocated)" if not line.while_idle else line.resource
        cite = f" ({line.source})" if line.source else ""
        out.append(f"- `{line.name}` {what}: {usd(cost)} an hour{cite}")
    weekend = bill.lustre_weekend_usd(hours)
    if any(line.resource == "amlFilesystem" for line in bill.lines):
        why = "" if weekend is not None else " (its SKU has no price: `catalog prices --refresh`)"
        out += [
            "",
            f"**Managed Lustre left up an idle weekend ({hours:,.0f} h): {usd(weekend)}**{why}",
        ]
    if not teardown:
        return out
    after, after_unknown = bill.after_teardown_per_hour_usd()
    out += [
        "",
        f"**Still billed after teardown (Lustre deleted; OS disks, Blob and network kept): "
        f"{usd(after * 24)} a day**"
        + (f" (not priced: {', '.join(after_unknown)})" if after_unknown else ""),
    ]
    return out


def idle_weekend_text(record: dict) -> str:
    """One line for ``make demo``: the idle-weekend cost of a written deployment's Lustre, from
    its record (``stoker-deployment.json``)."""
    lustre = [r for r in record.get("resources", []) if r.get("resource") == "amlFilesystem"]
    if not lustre:
        return "no Managed Lustre in this deployment: nothing bills over an idle weekend for it"
    names = ", ".join(r["name"] for r in lustre)
    prices = [r.get("per_hour_usd") for r in lustre]
    if None in prices:
        return (
            f"Managed Lustre ({names}) over an idle weekend ({IDLE_WEEKEND_HOURS:.0f} h): unknown, "
            "the catalog has no price for its SKU (stoker catalog prices --refresh reads it)"
        )
    total = sum(prices) * IDLE_WEEKEND_HOURS
    sources = "; ".join(sorted({r.get("source") or "" for r in lustre} - {""}))
    return (
        f"Managed Lustre ({names}) over an idle weekend ({IDLE_WEEKEND_HOURS:.0f} h): "
        f"${total:,.2f}" + (f" ({sources})" if sources else "")
    )


def vmss_per_hour(lay: Layout, vms: int) -> float | None:
    return None if lay.vm_price_per_hour is None else lay.vm_price_per_hour * vms


def blob_per_hour(lay: Layout, stored_bytes: float) -> float | None:
    if lay.blob_price_gb_month is None:
        return None
    return lay.blob_price_gb_month * stored_bytes / 1e9 / HOURS_PER_MONTH


def account_label(lay: Layout, role: str) -> str:
    from ._refs import account_name

    return account_name(lay, role)


def bill(lay: Layout, network_lines: list[Line], cat: Catalog | None = None) -> Bill:
    """Every resource's line, in the order the template creates them; with ``cat``, the
    network meters and the OS disks priced from it (see ``priced``)."""
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
        lines.append(
            Line("virtualMachineScaleSet", s.name, size, vmss_per_hour(lay, s.vms), False, None)
        )
    return Bill(tuple(priced(lines, lay, cat) if cat is not None else lines))


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


def tag_costs(resources: list[dict], hourly: dict[str, str]) -> None:
    """Complete the cost tags teardown reads from the bill's ``tag_values``: each scale set's
    deallocated cost (``TAG_STOPPED_COST``: its OS disks), and the hourly cost of a resource
    written as unknown that the catalog's meters price (the NAT gateway, a public IP)."""
    from ._text import arm_literal
    from .tags import TAG_COST, TAG_STOPPED_COST

    for res in resources:
        name, tags = res.get("name"), res.get("tags")
        if not isinstance(tags, dict):
            continue
        if res.get("type") == "Microsoft.Compute/virtualMachineScaleSets":
            value = hourly.get(f"{name}:stopped")
            if value is not None:
                tags[TAG_STOPPED_COST] = arm_literal(value)
        known = hourly.get(str(name))
        if tags.get(TAG_COST) == "unknown" and known not in (None, "unknown"):
            tags[TAG_COST] = arm_literal(str(known))
