"""Inference serving: how fast many replicas can load one model, from each place it could live.

Cold start is the time for every replica, all starting at once, to read the model: each
replica is capped by its share of its VM's frontend NIC (replicas on one VM share it) and by its
share of the tier's throughput. The shared Files share and NetApp volume are both sized for the
same target, so their cold starts compare like for like.
"""

from __future__ import annotations

import math

from ..catalog import Catalog, VmSize
from ..errors import SpecError
from . import datapath as dpth
from .result import InferencePlan
from .spec import PRECISION_BYTES, JobSpec

# A shared model cache keeps a few versions side by side (the one serving, the one rolling out).
VERSIONS_KEPT = 3
# A shared cache is sized so that every replica starting at once has the model in this long.
COLD_START_TARGET_S = 300.0


def inference_plan(spec: JobSpec, cat: Catalog, vm: VmSize, nodes: int) -> InferencePlan:
    w = spec.workload
    if w.params is None:
        raise SpecError(
            "workload.params: an inference plan needs the model's parameter count "
            "(e.g. params = '70B')"
        )
    model = w.params * PRECISION_BYTES[w.precision]
    replicas = w.replicas or nodes
    # Replicas spread evenly over the VMs; those on one VM share its NIC and NVMe.
    vms = min(nodes, replicas)
    per_vm = math.ceil(replicas / nodes)
    blob = dpth.blob_egress(cat, spec.data.blob_tier, spec.data.blob_accounts)
    # Size the shared caches for the throughput of a fleet-wide cold start, not just capacity.
    fleet = dpth.DataNeed(replicas * model, COLD_START_TARGET_S, VERSIONS_KEPT * model, vms)
    files = dpth.files_option(fleet, vm, cat)
    netapp = dpth.netapp_option(fleet, vm, cat, "Premium")

    def per_replica(shared: float | None) -> float:
        nic = vm.frontend_nic / per_vm
        return nic if shared is None else min(nic, shared / replicas)

    cold = {
        "blob": model / per_replica(blob),
        "files": model / per_replica(files.deliverable),
        "netapp": model / per_replica(netapp.deliverable),
    }
    if vm.nvme_read:  # a restart on a VM that already holds the model
        cold["nvme"] = per_vm * model / vm.nvme_read
    shared = {k: v for k, v in cold.items() if k != "nvme"}
    return InferencePlan(
        model,
        replicas,
        cold,
        min(shared, key=shared.__getitem__),
        files.size_bytes or 0.0,
        netapp_volume_bytes=netapp.size_bytes or 0.0,
        replicas_per_vm=per_vm,
        replicas_that_fit=nodes * int(vm.gpus * vm.gpu_memory // model),
        vm_gpu_memory_bytes=vm.gpus * vm.gpu_memory,
    )
