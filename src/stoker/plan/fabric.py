"""A job larger than one InfiniBand fabric: the layouts it could take, each with its cost.

RDMA works only inside one scale set with a single placement group (100 VMs, 300 on request)
or one availability set (200 VMs); VMs outside it reach each other only on the frontend
Ethernet (setup-infiniband, in the catalog's [fabric] source). Past that boundary the plan does
not silently run the job on Ethernet; it lays out:

- ``islands`` (planned): one data-parallel island per fabric, the gradient exchange reduced on
  InfiniBand inside each island and only the reduced shard crossing islands on Ethernet
  (hierarchical / hybrid-sharded data parallel; the cross-island cost is reported alone);
- ``flat_ethernet``: one flat NCCL ring through every GPU, as plain DDP over all VMs would run:
  the whole exchange at the frontend NIC's pace;
- ``stay_under``: shrink the job to the largest fabric Azure offers (the same global batch on
  fewer GPUs: longer compute per step);
- ``larger_fabric``: every VM in one InfiniBand domain; no published Azure offer holds it, so
  it is marked unavailable: ask Azure (the scale-set API's ``highSpeedInterconnectPlacement``
  is published without a size).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..catalog import Catalog, VmSize
from .facts import FabricLayout, Network
from .interconnect import CollectiveEstimate, _top_allreduce, allreduce, layout, levels
from .result import FabricOption


def estimate(
    vm: VmSize,
    cat: Catalog,
    size: float,
    nodes: int,
    dp: int,
    tp: int,
    boundary: int,
    sharp: bool,
    islands: bool,
) -> CollectiveEstimate:
    """All-reduce of ``size`` bytes over the dp group of a job laid out so."""
    lay = layout(vm, nodes, dp, tp, boundary)
    return allreduce(size, levels(vm, cat.fabric, lay, sharp, islands), lay.dp)


def cross_fabric_s(est: CollectiveEstimate, size: float) -> float:
    """Seconds of an estimate spent on Ethernet between fabrics: its top level's all-reduce of
    the shard the lower levels left, when that level is Ethernet."""
    if not est.levels or est.levels[-1].network is not Network.ETHERNET:
        return 0.0
    if len(est.levels) == 1 or est.flat_ring:
        return est.seconds
    part = size
    for level in est.levels[:-1]:
        part /= level.ranks
    return _top_allreduce(part, est.levels[-1])[0]


def fabric_options(
    vm: VmSize,
    cat: Catalog,
    nodes: int,
    dp: int,
    tp: int,
    boundary: int,
    sharp: bool,
    gradient_bytes: float,
    factor: float,
    compute_s: float,
    exposed: Callable[[float, float], float],
) -> list[FabricOption]:
    """Every layout of a job of ``nodes`` VMs whose fabric holds ``boundary`` VMs; ``factor`` is
    the collective's all-reduces per step (1.5 with FSDP); ``exposed(comm, compute)`` what is
    left of the communication after overlap."""
    fabrics = math.ceil(nodes / boundary)
    largest = max(boundary, cat.fabric.scale_set_vms_on_request)

    def option(
        kind: FabricLayout,
        vms: int,
        span: int,
        est: CollectiveEstimate,
        compute: float,
        note: str,
        available: bool = True,
    ) -> FabricOption:
        comm = est.seconds * factor
        return FabricOption(
            kind,
            vms,
            span,
            min(vms, boundary) if span > 1 else vms,
            comm,
            exposed(comm, compute),
            cross_fabric_s(est, gradient_bytes) * factor,
            available,
            note,
            step_s=compute + exposed(comm, compute),
        )

    def est(n: int, d: int, b: int, islands: bool) -> CollectiveEstimate:
        return estimate(vm, cat, gradient_bytes, n, d, tp, b, sharp, islands)

    out = [
        option(
            FabricLayout.ISLANDS,
            nodes,
            fabrics,
            est(nodes, dp, boundary, True),
            compute_s,
            f"{fabrics} data-parallel islands of up to {boundary} VMs: reduce inside each island "
            "on InfiniBand, exchange only the reduced shard between islands on Ethernet "
            "(hybrid-sharded or hierarchical data parallel)",
        ),
        option(
            FabricLayout.FLAT_ETHERNET,
            nodes,
            fabrics,
            est(nodes, dp, boundary, False),
            compute_s,
            "one flat NCCL ring over every VM, as plain DDP or FSDP across scale sets runs: the "
            "whole exchange at the frontend NIC's pace",
        ),
    ]
    if nodes > largest:
        share = largest / nodes
        out.append(
            option(
                FabricLayout.STAY_UNDER,
                largest,
                1,
                est(largest, max(1, int(dp * share)), largest, False),
                compute_s / share,
                f"shrink to {largest} VMs in one scale set (placement = "
                f'"scale_set_on_request"): the same global batch on {100 * share:.0f} % of the '
                f"GPUs, so {1 / share:.1f}x the compute per step",
            )
        )
    else:
        out.append(
            option(
                FabricLayout.STAY_UNDER,
                nodes,
                1,
                est(nodes, dp, largest, False),
                compute_s,
                f'ask for {largest}-VM scale sets (placement = "scale_set_on_request"): the '
                "whole job in one fabric",
            )
        )
    out.append(
        option(
            FabricLayout.LARGER_FABRIC,
            nodes,
            1,
            est(nodes, dp, nodes, False),
            compute_s,
            f"all {nodes} VMs in one InfiniBand domain: no published Azure offer holds more "
            f"than {largest} VMs in one; ask Azure for a larger InfiniBand cluster (the "
            "scale-set API's highSpeedInterconnectPlacement is published without a size)",
            available=nodes <= largest,
        )
    )
    return out
