"""Inference serving: how fast many replicas can load one model, from each place it could live.

Cold start is the time for every replica, all starting at once, to read the model: each
replica is capped by its VM's frontend NIC and by its share of the tier's throughput.
"""

from __future__ import annotations

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
    blob = dpth.blob_egress(cat, spec.data.blob_tier, spec.data.blob_accounts)
    # Size the premium share for the throughput of a fleet-wide cold start, not just capacity.
    fleet = dpth.DataNeed(replicas * model, COLD_START_TARGET_S, VERSIONS_KEPT * model, replicas)
    files = dpth.files_option(fleet, vm, cat)
    files_bw = files.deliverable or 0.0
    netapp = cat.netapp["Premium"]
    netapp_bw = min(netapp.min_size / dpth.TIB * netapp.throughput_per_tib, netapp.max_throughput)

    def per_replica(shared: float | None) -> float:
        return vm.frontend_nic if shared is None else min(vm.frontend_nic, shared / replicas)

    cold = {
        "blob": model / per_replica(blob),
        "files": model / per_replica(files_bw),
        "netapp": model / per_replica(netapp_bw),
    }
    if vm.nvme_read:
        cold["nvme"] = model / vm.nvme_read  # a restart on a VM that already holds the model
    shared = {k: v for k, v in cold.items() if k != "nvme"}
    return InferencePlan(
        model, replicas, cold, min(shared, key=shared.__getitem__), files.size_bytes or 0.0
    )
