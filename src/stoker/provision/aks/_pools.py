"""The AKS cluster's shape, pure: the GPU node pools (one per InfiniBand fabric), the system
pool, the Kubernetes version, the address ranges, and what the model cache is sized at.

An AKS node pool is a VM scale set; InfiniBand reaches only VMs of one placement group, so a
pool holds at most the plan's fabric boundary, and never more than a placement group takes
(``placement_group_limit`` on the layout where it has one, else Azure's default of 100 VMs).
A torchrun job runs on one pool: a training plan larger than one fabric is refused.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass

from ...catalog import Catalog
from ...errors import ProvisionError
from ...plan import Plan
from .._layout import Layout
from .._volume_plan import Volume, _volume

# Azure's default for one placement group (setup-infiniband: 100 VMs, 300 on request).
PLACEMENT_GROUP_DEFAULT = 100
# The version the cluster declares and its manifests are validated against (AKS supported
# versions, learn.microsoft.com/azure/aks/supported-kubernetes-versions).
KUBERNETES_VERSION = "1.33"
# managedClusters API version, whose schema is shipped in provision/schemas/arm/2026-05-01.
AKS_API = "2026-05-01"
# AKS's own pods and the warm-up Job run on this small pool; no public price is stored for it.
SYSTEM_VM_SIZE = "Standard_D8s_v5"
SYSTEM_NODES = 2
# Azure CNI overlay: pods and services get addresses outside the VNet (the
# ai-infrastructure-on-azure AKS reference uses the same pod range).
POD_CIDR = "192.168.0.0/16"
SERVICE_CIDR = "172.31.0.0/16"
DNS_SERVICE_IP = "172.31.0.10"


@dataclass(frozen=True)
class Pool:
    name: str  # AKS: 1-12 lowercase letters and digits, starting with a letter
    vm_size: str  # catalog name (ARM wants Standard_ + it)
    nodes: int
    first_vm: int
    infiniband: bool


@dataclass(frozen=True)
class Cluster:
    name: str
    kubernetes_version: str
    pools: tuple[Pool, ...]
    fabric_vms: int  # the most VMs one pool (one fabric) holds
    model_cache: Volume | None  # the RWM Azure Files share, for inference plans
    training: bool
    gpus_per_vm: int
    hcas_per_vm: int  # InfiniBand HCAs a pod claims as rdma/ib (0: no InfiniBand)


def fabric_limit(lay: Layout) -> int:
    """The most VMs one job's pool may hold: the plan's boundary, capped by the placement
    group's limit (the layout's ``placement_group_limit`` where it has one)."""
    limit = getattr(lay, "placement_group_limit", None) or PLACEMENT_GROUP_DEFAULT
    return min(lay.boundary_vms, limit)


def _pools(lay: Layout, cat: Catalog, limit: int) -> tuple[Pool, ...]:
    ib = cat.vm[lay.vm_size].has_infiniband
    count = math.ceil(lay.nodes / limit)
    pools = []
    for i in range(count):
        first = i * limit
        pools.append(Pool(f"gpu{i}", lay.vm_size, min(limit, lay.nodes - first), first, ib))
    return tuple(pools)


def _check_ranges(lay: Layout) -> None:
    space = ipaddress.ip_network(lay.address_space)
    for what, cidr in (("pod", POD_CIDR), ("service", SERVICE_CIDR)):
        if space.overlaps(ipaddress.ip_network(cidr)):
            raise ProvisionError(
                f"--address-space {lay.address_space}: overlaps AKS's {what} range {cidr}; "
                "give a VNet range outside 192.168.0.0/16 and 172.31.0.0/16"
            )


def cluster(plan: Plan, lay: Layout, cat: Catalog) -> Cluster:
    """The cluster for ``plan``; ProvisionError naming the field it refuses."""
    _check_ranges(lay)
    limit = fabric_limit(lay)
    training = plan.inference is None
    if training and lay.nodes > limit:
        raise ProvisionError(
            f"cluster.nodes: {lay.nodes} VMs exceed one InfiniBand fabric on AKS ({limit} VMs "
            "in one node pool); a torchrun job stays on one fabric: lower cluster.nodes, or "
            "raise cluster.fabric_boundary_vms / placement (300 VMs on request)"
        )
    cache = None
    if plan.inference is not None:
        cache = next((v for v in lay.volumes if v.kind == "files" and v.role == "models"), None)
        if cache is None:  # the plan chose another tier: the RWM share is still what AKS mounts
            cache = _volume(
                "files", "models", "premium_v1", plan.inference.files_share_bytes, cat, "inference"
            )
    return Cluster(
        name=f"aks-{lay.prefix}",
        kubernetes_version=KUBERNETES_VERSION,
        pools=_pools(lay, cat, limit),
        fabric_vms=limit,
        model_cache=cache,
        training=training,
        gpus_per_vm=cat.vm[lay.vm_size].gpus,
        hcas_per_vm=cat.vm[lay.vm_size].ib_links,
    )
