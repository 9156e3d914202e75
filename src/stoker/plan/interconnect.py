"""How long the data-parallel gradient exchange takes, level by level. Pure functions.

A collective runs hierarchically: inside the scale-up domain (NVLink/NVSwitch or Infinity
Fabric), then across VMs on InfiniBand (one rail per GPU, GPUDirect RDMA). A job larger than one
InfiniBand fabric (a scale set's placement group) runs only with InfiniBand off: one flat
network level at the frontend Ethernet's pace (NCCL uses one transport per communicator and
does not fall back per peer; plan/fabric.py lays out the shapes that stay on one fabric). Each
lower level does a reduce-scatter before and an all-gather after the level above, so the message
shrinks by that level's rank count on the way up:

    T = sum over lower levels of RS+AG(S_i)  +  all-reduce(S_top) at the top,  S_{i+1} = S_i / p_i

Scale-up bandwidth is the NCCL topology model's (links x per-link GB/s, src/graph/topo.h). On
NVSwitch systems with NVLink SHARP (Hopper, Blackwell) NCCL may pick NVLS, whose algbw we model
as links x per-link x nvlsEfficiency x (p-1)/p (src/graph/tuning.cc); the faster of ring and NVLS
is used, as NCCL's tuner would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..catalog import Fabric, VmSize
from . import collectives as c
from .facts import Network


@dataclass(frozen=True)
class Level:
    name: str
    ranks: int
    bw_bps: float  # per rank
    alpha_s: float  # ring hop latency
    tree_alpha_s: float
    nvls_efficiency: float | None = None  # NVLink SHARP inside the switch
    sharp: bool = False  # in-network reduction on the InfiniBand switches
    network: Network = Network.SCALEUP


@dataclass(frozen=True)
class Layout:
    """Where the ranks of one data-parallel group sit."""

    dp: int
    ranks_per_domain: int  # dp ranks inside one scale-up (NVLink) domain
    domains: int  # scale-up domains in one dp group
    fabrics: int  # InfiniBand fabrics the dp group spans
    nodes: int  # VMs in the job
    boundary_vms: int  # VMs that share one InfiniBand fabric


@dataclass(frozen=True)
class CollectiveEstimate:
    seconds: float
    algorithm: str  # e.g. "NVLink nvls > InfiniBand ring"
    busbw: float  # nccl-tests busbw of the whole dp group for this message
    levels: tuple[Level, ...]
    flat_ring: bool = False  # one ring through every GPU, not level by level


def layout(vm: VmSize, nodes: int, dp: int, tp: int, boundary_vms: int) -> Layout:
    # Tensor parallelism fills the scale-up domain first; the dp ranks of one group share
    # what is left of it.
    per_domain = min(dp, max(1, vm.gpus * vm.nvlink_domain_vms // tp))
    domains = math.ceil(dp / per_domain)
    fabrics = math.ceil(nodes / boundary_vms) if domains > 1 else 1
    return Layout(dp, per_domain, domains, min(fabrics, domains), nodes, boundary_vms)


def levels(vm: VmSize, fabric: Fabric, lay: Layout, sharp: bool) -> tuple[Level, ...]:
    """The levels a dp group's collective runs over. Past one fabric: one flat Ethernet level
    (InfiniBand off for the whole job: plan/fabric.py lays out the shapes that keep it)."""
    out: list[Level] = []
    if lay.ranks_per_domain > 1:
        bw = vm.scaleup_links * (vm.scaleup_link_bw or 0.0)
        name, nvls = vm.scaleup, vm.nvls_efficiency
        if vm.scaleup_busbw_measured:
            # A ring all-reduce's busbw is its per-rank bandwidth; the measurement already
            # holds whatever algorithm (NVLS or ring) NCCL picked, so no NVLS on top.
            bw, name, nvls = vm.scaleup_busbw_measured, f"{vm.scaleup} (measured)", None
        out.append(
            Level(
                name,
                lay.ranks_per_domain,
                bw,
                fabric.nvlink_ring_latency,
                fabric.nvlink_ring_latency,
                nvls,
            )
        )
    # Every GPU of a VM talks on its own rail (and shares the frontend NIC): all dp groups
    # of the job run their collectives at the same time.
    per_rank_share = vm.gpus
    if lay.domains > 1:
        if lay.fabrics > 1:
            # A scale set is one InfiniBand partition and NCCL picks one transport per
            # communicator: a job over several runs only with InfiniBand off, all on Ethernet.
            out.append(
                Level(
                    f"Ethernet (the job spans {lay.fabrics} InfiniBand fabrics)",
                    lay.domains,
                    vm.frontend_nic / per_rank_share,
                    fabric.net_ring_latency,
                    fabric.net_tree_latency,
                    network=Network.ETHERNET,
                )
            )
        elif vm.has_infiniband:
            out.append(
                Level(
                    "InfiniBand",
                    lay.domains,
                    vm.ib_per_vm / per_rank_share,
                    fabric.net_ring_latency,
                    fabric.net_tree_latency,
                    sharp=sharp,
                    network=Network.INFINIBAND,
                )
            )
        else:
            out.append(
                Level(
                    "Ethernet (no InfiniBand on this size)",
                    lay.domains,
                    vm.frontend_nic / per_rank_share,
                    fabric.net_ring_latency,
                    fabric.net_tree_latency,
                    network=Network.ETHERNET,
                )
            )
    return tuple(out)


def _nvls_time(size: float, level: Level) -> float:
    algbw = level.bw_bps * (level.nvls_efficiency or 0.0) * (level.ranks - 1) / level.ranks
    return level.alpha_s * 2 + size / algbw


def _top_allreduce(size: float, level: Level) -> tuple[float, str]:
    options = {
        "ring": c.ring_allreduce_time(size, level.ranks, level.bw_bps, level.alpha_s),
        "tree": c.tree_allreduce_time(size, level.ranks, level.bw_bps, level.tree_alpha_s),
    }
    if level.nvls_efficiency:
        options["nvls"] = _nvls_time(size, level)
    if level.sharp:
        options["sharp"] = c.sharp_allreduce_time(
            size, level.ranks, level.bw_bps, level.tree_alpha_s
        )
    name = min(options, key=options.__getitem__)
    return options[name], name


def _lower_rs_ag(size: float, level: Level) -> tuple[float, str]:
    ring = 2 * c.scatter_gather_time(size, level.ranks, level.bw_bps, level.alpha_s)
    options = {"ring": ring}
    if level.nvls_efficiency:
        options["nvls"] = _nvls_time(size, level)
    if level.sharp:  # SHARP reduces on the way up and multicasts on the way down
        options["sharp"] = c.sharp_allreduce_time(
            size, level.ranks, level.bw_bps, level.tree_alpha_s
        )
    name = min(options, key=options.__getitem__)
    return options[name], name


def allreduce(size: float, lvls: tuple[Level, ...], dp: int) -> CollectiveEstimate:
    """All-reduce of ``size`` bytes per rank across ``dp`` ranks: the faster of hierarchical
    and, inside one InfiniBand fabric, NCCL's flat ring through every GPU."""
    if dp <= 1 or not lvls:
        return CollectiveEstimate(0.0, "none (one rank)", 0.0, lvls)
    best = _hierarchical(size, lvls, dp)
    if len(lvls) == 2 and lvls[1].network is Network.INFINIBAND:
        # One ring per rail: each ring crosses a VM boundary on its own NIC, so the ring runs
        # at the slower of a GPU's scale-up share and the VM's whole InfiniBand bandwidth.
        bw = min(lvls[0].bw_bps, lvls[1].bw_bps * lvls[0].ranks)
        flat = c.ring_allreduce_time(size, dp, bw, lvls[1].alpha_s)
        if flat < best.seconds:
            best = CollectiveEstimate(
                flat,
                "flat ring over NVLink + InfiniBand",
                c.busbw("all_reduce", size, dp, flat),
                lvls,
                flat_ring=True,
            )
    return best


def _hierarchical(size: float, lvls: tuple[Level, ...], dp: int) -> CollectiveEstimate:
    seconds, names, part = 0.0, [], size
    for level in lvls[:-1]:
        t, algo = _lower_rs_ag(part, level)
        seconds += t
        names.append(f"{level.name} {algo}")
        part /= level.ranks
    t, algo = _top_allreduce(part, lvls[-1])
    seconds += t
    names.append(f"{lvls[-1].name} {algo}")
    return CollectiveEstimate(
        seconds, " > ".join(names), c.busbw("all_reduce", size, dp, seconds), lvls
    )


def single_vm_busbw(vm: VmSize, fabric: Fabric, size: float = 8e9) -> float:
    """Predicted all-reduce busbw across the GPUs of one VM (nccl-tests, 8 GB by default)."""
    lay = Layout(vm.gpus, vm.gpus, 1, 1, 1, 1)
    return allreduce(size, levels(vm, fabric, lay, sharp=False), vm.gpus).busbw
