"""The cheapest way to buy the run's GPU hours, and the cheapest VM size that does the job.

Three ways to pay, each from the catalog's prices for the job's VM size:

- **pay-as-you-go**: the plan's VM-hours at the hourly price;
- **Spot**: the Spot price, over a longer run: each eviction (``cluster.spot_evictions_per_day``
  per VM, the user's figure; any VM evicted stops the synchronous job) loses, on average, half a
  checkpoint interval of work plus the restart the plan already counts for a failure. The run
  stretches until the work is done; with evictions faster than progress it never ends;
- **a reservation** of 1 or 3 years: billed for the whole term whether the VMs run or not, so
  a run shorter than the term pays for all of it.

A price the catalog lacks makes that option unknown, never zero; the cheapest is chosen among
the known ones and the reason names the figures compared.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog import Catalog, VmSize
from .result import CheckpointPlan

HOURS_PER_YEAR = 8760.0


@dataclass(frozen=True)
class Option:
    name: str
    usd: float | None  # for this run; None: the catalog has no price
    note: str


@dataclass(frozen=True)
class Purchase:
    options: tuple[Option, ...]
    cheapest: str | None
    why: str


def spot_wall_s(wall_s: float, nodes: int, evictions_per_vm_day: float, lost_s: float) -> float:
    """The run's length on Spot: evictions come at ``nodes x rate`` a day and each costs
    ``lost_s``; inf when they come faster than the run progresses."""
    per_s = nodes * evictions_per_vm_day / 86400.0
    slowdown = 1.0 - per_s * lost_s
    return wall_s / slowdown if slowdown > 0 else float("inf")


def purchase_options(
    vm: VmSize,
    vm_name: str,
    nodes: int,
    wall_s: float,
    ckpt: CheckpointPlan | None,
    evictions_per_vm_day: float | None,
    price_per_hour: float | None = None,
) -> Purchase:
    """Compare the ways to pay for ``nodes`` x ``vm`` over ``wall_s`` (see the module doc)."""
    hours = nodes * wall_s / 3600
    on_demand = price_per_hour if price_per_hour is not None else vm.price_per_hour
    options = [
        Option(
            "pay-as-you-go",
            None if on_demand is None else on_demand * hours,
            f"{hours:,.0f} VM-hours"
            + ("" if on_demand is None else f" at ${on_demand:,.2f}")
            + ("" if on_demand is not None else f"; no public price for {vm_name}"),
        )
    ]
    spot = vm.spot_price_per_hour
    if spot is None:
        options.append(Option("Spot", None, f"no Spot price for {vm_name} in the catalog"))
    elif evictions_per_vm_day is None:
        options.append(
            Option("Spot", None, "give cluster.spot_evictions_per_day to price the evictions")
        )
    else:
        lost_s = (ckpt.interval_s / 2 + ckpt.restart_s) if ckpt else wall_s / 2
        stretched = spot_wall_s(wall_s, nodes, evictions_per_vm_day, lost_s)
        if stretched == float("inf"):
            options.append(
                Option(
                    "Spot",
                    None,
                    f"never finishes: {nodes * evictions_per_vm_day:,.1f} evictions a day, each "
                    f"losing {lost_s / 60:,.0f} min, outrun the work",
                )
            )
        else:
            evictions = nodes * evictions_per_vm_day * stretched / 86400
            options.append(
                Option(
                    "Spot",
                    spot * nodes * stretched / 3600,
                    f"${spot:,.2f}/VM-hour; {evictions:,.0f} evictions x {lost_s / 60:,.0f} min "
                    f"lost (half a checkpoint interval + restart) stretch the run "
                    f"{stretched / wall_s:,.2f}x",
                )
            )
    for years, price in ((1, vm.reserved_1y_per_hour), (3, vm.reserved_3y_per_hour)):
        name = f"{years}-year reservation"
        if price is None:
            options.append(Option(name, None, f"no {years}-year reservation price in the catalog"))
            continue
        term_h = HOURS_PER_YEAR * years
        billed_h = max(wall_s / 3600, term_h)  # the term bills whether the VMs run or not
        options.append(
            Option(
                name,
                price * nodes * billed_h,
                f"${price:,.2f}/VM-hour for the whole {term_h:,.0f} h term "
                f"(the run uses {wall_s / 3600 / term_h:.0%} of it)",
            )
        )
    options.append(
        Option(
            "savings plan",
            None,
            "no savings-plan rate in the catalog (the Retail Prices API lists them only in its "
            "preview version)",
        )
    )
    known = [o for o in options if o.usd is not None]
    if not known:
        return Purchase(tuple(options), None, "no option has a price in the catalog")
    best = min(known, key=lambda o: o.usd or 0.0)
    others = [o for o in known if o is not best]
    why = f"{best.name} at ${best.usd:,.0f}"
    if others:
        why += " against " + ", ".join(f"{o.name} ${o.usd:,.0f}" for o in others)
    unknown = [o.name for o in options if o.usd is None]
    if unknown:
        why += f"; not compared (no price): {', '.join(unknown)}"
    return Purchase(tuple(options), best.name, why)


@dataclass(frozen=True)
class RightSize:
    vm_size: str
    usd: float  # the run on it
    saving_usd: float  # against the chosen size
    why: str


def right_size(
    cat: Catalog,
    vm_name: str,
    vms: int,
    gpus_used: int,
    need_gpu_bytes: float,
    wall_s: float,
    uses_fabric: bool,
) -> RightSize | None:
    """For a job that does not use the InfiniBand fabric (one VM, or inference replicas each on
    its VM): the cheapest priced size with, per VM, at least ``gpus_used`` GPUs (throughput) and
    ``need_gpu_bytes`` of GPU memory (the weights and state it holds), if cheaper than
    ``vm_name`` for the ``vms`` VMs; else None. The catalog publishes no per-GPU compute
    figure, so throughput is met only by the same GPU model ("H100" SXM or NVL), never by an
    older or another vendor's GPU however many."""
    if uses_fabric:
        return None
    chosen = cat.vm[vm_name]
    if chosen.price_per_hour is None:
        return None
    hours = vms * wall_s / 3600
    fits = [
        (name, vm)
        for name, vm in cat.vm.items()
        if vm.price_per_hour is not None
        and vm.gpu.split()[0] == chosen.gpu.split()[0]
        and vm.gpus >= gpus_used
        and vm.gpus * vm.gpu_memory >= need_gpu_bytes
    ]
    if not fits:
        return None
    name, vm = min(fits, key=lambda nv: nv[1].price_per_hour or 0.0)
    if name == vm_name or (vm.price_per_hour or 0.0) >= chosen.price_per_hour:
        return None
    usd = (vm.price_per_hour or 0.0) * hours
    saving = chosen.price_per_hour * hours - usd
    why = (
        f"{name}: {vm.gpus} x {vm.gpu} ({vm.gpus * vm.gpu_memory / 1e9:,.0f} GB GPU memory, "
        f"needs {need_gpu_bytes / 1e9:,.0f} GB and {gpus_used} GPUs) at "
        f"${vm.price_per_hour:,.2f}/h against ${chosen.price_per_hour:,.2f}/h; the job uses no "
        "InfiniBand"
    )
    return RightSize(name, usd, saving, why)
