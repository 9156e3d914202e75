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

Ethernet is NCCL over TCP sockets: no NVLS, no CollNet, no hierarchy, so a collective runs as
NCCL's ring through every GPU (each ring crosses each VM's NIC once) or its tree, at the VM's
measured socket busbw (catalog [ethernet.<size>]: 3.19 GB/s on ND H100 v5, 32 % of the NIC's
line rate), or at the line rate where nothing is measured (an upper bound). A flat ring moves
2(n-1)/n of the message through every NIC whatever the VM count, which is why the published
InfiniBand-to-Ethernet throughput ratio stays flat from 2 to 8 VMs (tests/test_plan_ethernet.py).
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
    # The inter-VM part (InfiniBand or Ethernet): the seconds its links are busy and the bytes
    # each GPU's share of the VM's links sends in that time (plan/bandwidth.py adds them up).
    network_s: float = 0.0
    network_bytes_per_gpu: float = 0.0


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
            why = f"the job spans {lay.fabrics} InfiniBand fabrics"
            out.append(_ethernet_level(vm, fabric, lay, why))
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
            why = "InfiniBand off" if vm.ib_rate else "no InfiniBand on this size"
            out.append(_ethernet_level(vm, fabric, lay, why))
    return tuple(out)


def _ethernet_level(vm: VmSize, fabric: Fabric, lay: Layout, why: str) -> Level:
    """The VMs' frontend network as NCCL's sockets see it; every GPU of a VM shares it."""
    rate = "measured NCCL sockets" if vm.ethernet_busbw else "line rate, an upper bound"
    return Level(
        f"Ethernet ({why}; {rate})",
        lay.domains,
        vm.ethernet_rate / vm.gpus,
        fabric.net_ring_latency,
        fabric.net_tree_latency,
        network=Network.ETHERNET,
    )


def without_infiniband(vm: VmSize) -> VmSize:
    """The same VM with InfiniBand off (``NCCL_NET=Socket``): every collective between VMs on
    the frontend network. (``NCCL_IB_DISABLE=1`` alone is not enough on Azure's ND sizes: their
    RDMA network plugin keeps NCCL on InfiniBand; see the catalog's ib-vs-eth-finetune-2026.)"""
    return vm.model_copy(update={"ib_links": 0})


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
    if lvls[-1].network is Network.ETHERNET:
        return _sockets(size, lvls, dp)
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
                network_s=flat,
                network_bytes_per_gpu=_ring_bytes(size, dp) / lvls[0].ranks,
            )
    return best


def _ring_bytes(size: float, ranks: int) -> float:
    """What one rank of a ring all-reduce sends: 2(p-1)/p of the message."""
    return 2 * (ranks - 1) / ranks * size


def _sockets(size: float, lvls: tuple[Level, ...], dp: int) -> CollectiveEstimate:
    """NCCL over TCP sockets: its ring (or tree) through every GPU of the dp group, each ring
    crossing a VM's NIC once; the dp group has its share of the VM's socket rate."""
    net = lvls[-1]
    per_vm = lvls[0].ranks if len(lvls) == 2 else 1  # dp ranks of this group on one VM
    bw = net.bw_bps * per_vm
    if len(lvls) == 2:
        bw = min(bw, lvls[0].bw_bps)
    ring = c.ring_allreduce_time(size, dp, bw, net.alpha_s)
    tree = c.tree_allreduce_time(size, net.ranks, bw, net.tree_alpha_s)
    name, t = ("ring", ring) if ring <= tree else ("tree", tree)
    sent = _ring_bytes(size, dp) if name == "ring" else 2 * size  # per ring or tree, per VM
    where = f"{lvls[0].name} + {net.name}" if len(lvls) == 2 else net.name
    return CollectiveEstimate(
        t,
        f"flat {name} over {where}",
        c.busbw("all_reduce", size, dp, t),
        lvls,
        flat_ring=name == "ring",
        network_s=t,
        network_bytes_per_gpu=sent / per_vm,
    )


def _hierarchical(size: float, lvls: tuple[Level, ...], dp: int) -> CollectiveEstimate:
    seconds, names, part = 0.0, [], size
    for level in lvls[:-1]:
        t, algo = _lower_rs_ag(part, level)
        seconds += t
        names.append(f"{level.name} {algo}")
        part /= level.ranks
    top = lvls[-1]
    t, algo = _top_allreduce(part, top)
    seconds += t
    names.append(f"{top.name} {algo}")
    network_s = sent = 0.0
    if top.network is not Network.SCALEUP:
        # Each rank sends 2(p-1)/p of its part on a ring, twice its part up and down a tree, and
        # its part once up to the switch with SHARP (the result comes back down by multicast).
        network_s = t
        sent = {"ring": _ring_bytes(part, top.ranks), "tree": 2 * part}.get(algo, part)
    return CollectiveEstimate(
        seconds,
        " > ".join(names),
        c.busbw("all_reduce", size, dp, seconds),
        lvls,
        network_s=network_s,
        network_bytes_per_gpu=sent,
    )


def single_vm_busbw(vm: VmSize, fabric: Fabric, size: float = 8e9) -> float:
    """Predicted all-reduce busbw across the GPUs of one VM (nccl-tests, 8 GB by default)."""
    lay = Layout(vm.gpus, vm.gpus, 1, 1, 1, 1)
    return allreduce(size, levels(vm, fabric, lay, sharp=False), vm.gpus).busbw
