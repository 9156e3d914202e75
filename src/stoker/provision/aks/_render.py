"""Every file of ``--target aks``, in memory: the same plan and layout as the VM path, the
cluster shape (``_pools``), then the ARM template, the manifests and the README."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ...catalog import Catalog
from ...errors import ProvisionError
from ...plan import JobSpec, Plan
from ...plan.inference import CachePlan, cache_plan
from .._cost import Bill
from .._layout import Layout
from .._names import check_names
from .._text import shown
from . import _readme
from ._arm import aks_bill, aks_layout, aks_parameters, aks_template
from ._manifests import Trainer, dump, kustomization, manifests
from ._pools import Cluster, cluster

TRAINERS = ("job", "pytorchjob")
# managedClusters names (the schema's pattern); agent pools: 1-12 lowercase alphanumerics.
_CLUSTER = re.compile(r"[a-zA-Z0-9]|[a-zA-Z0-9][-_a-zA-Z0-9]{0,61}[a-zA-Z0-9]")
_POOL = re.compile(r"[a-z][a-z0-9]{0,11}")


@dataclass(frozen=True)
class AksFiles:
    bill: Bill
    texts: dict[str, str]  # file name -> text, the record excluded
    cluster: Cluster
    layout: Layout  # what the ARM template makes (no scale sets, no Files shares)
    cache: CachePlan | None


def _dumps(data: Any) -> str:
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def render_aks(lay: Layout, cat: Catalog, plan: Plan, job: JobSpec, trainer: str) -> AksFiles:
    """All the files, or ProvisionError naming the field at fault; nothing written here."""
    if trainer not in TRAINERS:
        raise ProvisionError(f"--trainer {shown(trainer)}: use one of {', '.join(TRAINERS)}")
    t: Trainer = "pytorchjob" if trainer == "pytorchjob" else "job"
    check_names(aks_layout(lay))
    c = cluster(plan, lay, cat)
    if not _CLUSTER.fullmatch(c.name) or not all(_POOL.fullmatch(p.name) for p in c.pools):
        raise ProvisionError(
            f"name: {shown(c.name)} is no AKS cluster name; pass --name with 2-20 lowercase "
            "letters, digits or hyphens"
        )
    the_bill = aks_bill(lay, c, cat)
    cache = None
    if plan.inference is not None:
        cache = cache_plan(plan.inference, job, cat, cat.vm[job.cluster.vm_size])
    docs = manifests(lay, job, c, t)
    texts = {
        "main.json": _dumps(aks_template(lay, c, cat.provision, the_bill)),
        "main.parameters.json": _dumps(aks_parameters(lay)),
        **{name: dump(d) for name, d in docs.items()},
        "kustomization.yaml": dump([kustomization(list(docs))]),
    }
    texts["README.md"] = _readme.render(
        lay, c, cat.provision, the_bill, t, cache, [*docs, "kustomization.yaml"]
    )
    return AksFiles(the_bill, texts, c, aks_layout(lay), cache)
