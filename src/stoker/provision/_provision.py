"""``provision``: the Python twin of ``stoker provision SPEC --out DIR``.

The plan is made exactly as ``stoker plan`` makes it (``plan_job``), turned into typed
resources (``_layout``), and written by four writers. Every refusal happens before the first
byte is written: a deployment folder is either complete or untouched.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._arg_types import PATH, check_args
from .._redact import printable
from .._user_files import check_user_output
from ..catalog import Catalog, load_catalog
from ..errors import ProvisionError
from ..plan import JobSpec, Plan, load_spec, parse_spec, plan_job
from ..plan.shape import canonical
from ..plan.spec import with_placement_group_limit
from . import _ccws, _cloud_init, _readme, _template
from ._cost import Bill, Line, bill
from ._layout import Layout, layout
from ._names import check_names
from ._options import options as make_options
from ._out import FILES, RECORD, SCHEMA, digest, edited, prior, write
from ._out_lock import out_locked, signals_deferred

_ARM_TYPES = {
    "networkSecurityGroup": "Microsoft.Network/networkSecurityGroups",
    "publicIPAddress": "Microsoft.Network/publicIPAddresses",
    "natGateway": "Microsoft.Network/natGateways",
    "virtualNetwork": "Microsoft.Network/virtualNetworks",
    "userAssignedIdentity": "Microsoft.ManagedIdentity/userAssignedIdentities",
    "storageAccount": "Microsoft.Storage/storageAccounts",
    "amlFilesystem": "Microsoft.StorageCache/amlFilesystems",
    "netAppAccount": "Microsoft.NetApp/netAppAccounts",
    "capacityPool": "Microsoft.NetApp/netAppAccounts/capacityPools",
    "netAppVolume": "Microsoft.NetApp/netAppAccounts/capacityPools/volumes",
    "virtualMachineScaleSet": "Microsoft.Compute/virtualMachineScaleSets",
    "bastionHost": "Microsoft.Network/bastionHosts",
    "networkInterface": "Microsoft.Network/networkInterfaces",
    "virtualMachine": "Microsoft.Compute/virtualMachines",
    "privateEndpoint": "Microsoft.Network/privateEndpoints",
    "managedCluster": "Microsoft.ContainerService/managedClusters",
    "agentPool": "Microsoft.ContainerService/managedClusters/agentPools",
    "fileShare": "Microsoft.Storage/storageAccounts/fileServices/shares",  # the Files CSI's
}
TARGETS = ("vmss", "aks")
# Every name --target aks may write: a re-run of the same deployment proves them its own.
AKS_FILES = (
    "main.json",
    "main.parameters.json",
    "README.md",
    "kustomization.yaml",
    "namespace.yaml",
    "storage.yaml",
    "cache-warmup.yaml",
    "training.yaml",
    RECORD,
)


@dataclass
class Deployment:
    """What ``provision`` wrote: the folder, its files, and the bill it describes."""

    out: Path
    plan: Plan
    layout: Layout
    bill: Bill
    files: list[Path] = field(default_factory=list)
    elapsed_s: float = 0.0
    # Files of an earlier run of this deployment the user edited, left as they are.
    kept: list[str] = field(default_factory=list)
    sha256: dict[str, str] = field(default_factory=dict)  # of stoker's own text, per file
    target: str = "vmss"  # or "aks"

    @property
    def per_hour_usd(self) -> float:
        return self.bill.per_hour_usd

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` summary and ``stoker-deployment.json`` (``stoker.deployment/1``)."""
        lay = self.layout
        return {
            "schema": SCHEMA,
            "target": self.target,
            "plan": lay.plan_name,
            "deployment_id": lay.deployment_id,
            "subscription": os.environ.get("AZURE_SUBSCRIPTION_ID") or None,
            "out": str(self.out),
            "region": lay.region,
            "resource_group": lay.resource_group,
            "deployment_name": "stoker",
            "teardown_after": lay.teardown_after.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "cost_per_hour_usd": round(self.bill.per_hour_usd, 2),
            "cost_per_idle_day_usd": round(self.bill.per_hour_usd * 24, 2),
            "storage_only_per_hour_usd": round(self.bill.idle_per_hour_usd, 2),
            "unpriced": self.bill.unknown,
            "resources": [
                {**asdict(line), "type": _ARM_TYPES[line.resource]} for line in self.bill.lines
            ],
            "scale_sets": [asdict(s) for s in lay.scale_sets],
            "lustre": [
                {
                    "name": lu.name,
                    "role": lu.role,
                    "sku": lu.sku,
                    "capacity_tib": lu.capacity_tib,
                    "container": lu.container,
                    "mount_path": lu.mount_path,
                }
                for lu in lay.lustres
            ],
            "volumes": [asdict(v) for v in lay.volumes],
            "files": [p.name for p in self.files],
            "kept": list(self.kept),
            "sha256": dict(self.sha256),
            "elapsed_s": round(self.elapsed_s, 4),
        }


def _dumps(data: Any) -> str:
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


# ARM refuses a template of more resources (copies included), at validation, before any is made:
# https://learn.microsoft.com/azure/azure-resource-manager/templates/best-practices#template-limits
ARM_MAX_RESOURCES = 800


def render(lay: Layout, cat: Catalog, plan: Plan) -> tuple[Bill, dict[str, str]]:
    """Every file's text, in memory: nothing is written until all of them exist."""
    facts = cat.provision
    check_names(lay)
    the_bill = bill(lay, _template.network_lines(lay), cat)
    main = _template.template(lay, facts, the_bill)
    if len(main["resources"]) > ARM_MAX_RESOURCES:
        raise ProvisionError(
            f"cluster.fabric_boundary_vms: {lay.nodes} VMs in scale sets of {lay.boundary_vms} "
            f"make {len(lay.scale_sets)} scale sets and {len(main['resources'])} ARM resources; "
            f"a template holds at most {ARM_MAX_RESOURCES}. Raise fabric_boundary_vms (or the "
            "placement's), or split the job into several deployments"
        )
    texts = {
        "main.json": _dumps(main),
        "main.parameters.json": _dumps(_template.parameters(lay)),
        "cloud-init.yaml": _cloud_init.render(lay),
        "ccws.parameters.json": _dumps(_ccws.parameters(lay, facts)),
        "README.md": _readme.render(lay, facts, the_bill),
    }
    return the_bill, texts


def provision(
    spec: str | Path | JobSpec | dict[str, Any],
    out: str | Path,
    catalog: Catalog | str | Path | Iterable[str | Path] = (),
    *,
    now: dt.datetime | None = None,
    force: bool = False,
    target: str = "vmss",
    trainer: str = "job",
    **opts: Any,
) -> Deployment:
    """Write the deployment for ``spec`` into ``out``: ARM template and parameters, cloud-init,
    CCWS parameters, README and ``stoker-deployment.json``. ``opts`` are ProvisionOptions fields
    (``name``, ``resource_group``, ``address_space``, ``admin_username``, ``ssh_public_key``,
    ``teardown_after``, ``install``). Raises ProvisionError (or SpecError) naming the field,
    before anything is written.

    ``out`` must be new, empty, or a folder stoker wrote for this same deployment (plan and
    resource group): a re-run keeps its deployment id and a ``main.parameters.json`` the user
    edited (``Deployment.kept``). ``force=True`` writes the six files whatever the folder
    holds, overwriting edits and another deployment's files; it never removes other files.

    ``target="aks"`` writes an AKS cluster instead of scale sets, and Kubernetes manifests
    (kustomize) for the storage, the model cache warm-up (inference) or the training job
    (``trainer``: ``"job"``, an Indexed Job, or ``"pytorchjob"``, Kubeflow's)."""
    started = time.perf_counter()
    check_args(
        ProvisionError, out=(out, PATH), force=(force, bool), target=(target, str),
        trainer=(trainer, str),
    )  # fmt: skip
    if target not in TARGETS:
        raise ProvisionError(f"--target {target[:40]!r}: use one of {', '.join(TARGETS)}")
    if not isinstance(spec, (JobSpec, dict, str, os.PathLike)):
        check_args(ProvisionError, spec=(spec, PATH))
    options = make_options(**opts)
    out = Path(out)
    check_user_output(out, "--out", ProvisionError)
    if out.exists() and not out.is_dir():
        raise ProvisionError(
            f"--out {printable(str(out), lines=False)}: is a file; give a folder for the deployment"
        )
    if isinstance(spec, JobSpec):
        job = spec
    elif isinstance(spec, dict):
        job = parse_spec(spec)
    else:
        job = load_spec(spec)
    if isinstance(catalog, str | Path):
        catalog = [catalog]
    cat = catalog if isinstance(catalog, Catalog) else load_catalog(catalog)
    job = with_placement_group_limit(job, options.placement_group_limit)  # the option wins
    plan = plan_job(job, cat)  # the same Plan `stoker plan` shows, so the numbers agree
    job = canonical(job, cat)  # "standard_nd96isr_h100_v5" as the catalog keys it, for lookups
    lay = layout(plan, job, cat, options, now=now)
    names = AKS_FILES if target == "aks" else FILES
    with out_locked(out):  # one run per folder, from the first look to the last file
        found = prior(out, lay.plan_name, lay.resource_group, force=force, files=names)
        if found.deployment_id:  # the same deployment again: its resources keep their tag
            lay = dataclasses.replace(lay, deployment_id=found.deployment_id)
        if target == "aks":
            from .aks import render_aks

            aks = render_aks(lay, cat, plan, job, trainer)
            the_bill, texts = aks.bill, aks.texts
            deployment = Deployment(out, plan, aks.layout, the_bill, target="aks")
        else:
            the_bill, texts = render(lay, cat, plan)
            deployment = Deployment(out, plan, lay, the_bill)
        deployment.kept = edited(out, found, texts, force=force)
        deployment.sha256 = {name: digest(text.encode()) for name, text in texts.items()}
        deployment.files = [out / name for name in (*texts, RECORD)]
        texts[RECORD] = _dumps(deployment.to_dict() | {"elapsed_s": None})
        with signals_deferred():  # Ctrl-C leaves the old six files or the new six
            deployment.files = write(out, texts, deployment.kept)
    deployment.elapsed_s = time.perf_counter() - started
    return deployment


__all__ = ["Deployment", "Line", "provision"]
