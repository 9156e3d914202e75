"""``stoker provision --target aks``: the plan as an AKS cluster (ARM) and the Kubernetes
manifests an AKS team applies (kustomize), pure like the rest of ``stoker.provision``.

    layout (the VM path's) -> _pools.py (GPU pools, one per fabric; the model cache) ->
    _arm.py (main.json: the VM path's network, storage and Lustre + the managed cluster),
    _manifests.py (namespace, storage, cache warm-up or training), _readme.py -> _render.py;
    _check.py validates a written folder offline.
"""

from ._check import AksReport, check
from ._pools import KUBERNETES_VERSION
from ._render import TRAINERS, AksFiles, render_aks

__all__ = ["KUBERNETES_VERSION", "TRAINERS", "AksFiles", "AksReport", "check", "render_aks"]
