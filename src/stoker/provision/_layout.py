"""The plan as typed resources: what ``stoker provision`` will create, before any writer runs.

``layout(plan, spec, cat, options)`` is pure: the same plan gives the same resources, so the
ARM template, cloud-init, the CCWS parameters and the README are four views of one value and
can never disagree with each other or with ``stoker plan``.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import uuid
from dataclasses import dataclass, field

from ..catalog import Catalog
from ..errors import ProvisionError
from ..plan import JobSpec, Plan
from ..plan.shape import scale_set_vms
from ._access import Access, wanted_subnets
from ._network import Subnet, address_plan
from ._options import ProvisionOptions
from ._volume_plan import Volume, plan_volumes

TiB = 2**40  # an AMLFS capacity is a whole number of TiB, emitted as an integer
_SHORT = {"data": "data", "checkpoints": "ckpt"}  # AMLFS names stay short


@dataclass(frozen=True)
class ScaleSet:
    name: str
    vms: int
    vm_size: str  # catalog name, e.g. ND96isr_H100_v5 (ARM wants Standard_ + it)
    first_vm: int  # index of its first VM in the job, for the README's "VMs 0-299"


@dataclass(frozen=True)
class Lustre:
    name: str
    role: str  # "data" or "checkpoints": what the plan sized it for
    sku: str
    capacity_tib: int
    throughput_mbps: int  # provisioned: capacity x the SKU's MB/s per TiB
    subnet: Subnet
    container: str  # the Blob container its HSM (import / archive) is linked to
    import_prefix: str
    mount_path: str
    price_per_tib_hour: float | None


@dataclass(frozen=True)
class Account:
    """A storage account; ``shared_key`` only where AMLFS's Blob integration needs it."""

    role: str  # "main" or "hsm"
    containers: tuple[str, ...]
    shared_key: bool


@dataclass(frozen=True)
class Layout:
    plan_name: str
    prefix: str  # lowercase name stem of every resource
    region: str
    resource_group: str
    vm_size: str
    nodes: int
    boundary_vms: int  # VMs per scale set: one InfiniBand partition
    scale_sets: tuple[ScaleSet, ...]
    lustres: tuple[Lustre, ...]
    volumes: tuple[Volume, ...]  # NetApp or Azure Files (NFS), where the plan chose them
    accounts: tuple[Account, ...]
    address_space: str
    compute_subnet: Subnet
    cyclecloud_subnet: Subnet
    netapp_subnet: Subnet
    scratch_path: str
    vm_price_per_hour: float | None
    blob_price_gb_month: float | None
    stored_bytes: dict[str, float]  # per container: what the plan keeps in Blob
    teardown_after: dt.datetime
    admin_username: str
    ssh_public_key: str | None
    install: str
    notes: list[str] = field(default_factory=list)
    zone: str = "1"  # the availability zone of Lustre and its client scale sets
    # A placement group past Azure's 100 VMs, as the spec declares approved; None: the default.
    placement_group_limit: int | None = None
    fabric: str = "scale-set"  # cluster.fabric: what the scale sets are, past one of them
    # Unique per `stoker provision` run (not the plan name): the ownership tag's value.
    deployment_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    # checkpoints.version_days: the storage accounts' lifecycle rule deletes older versions
    version_days: int = 7
    access: Access = field(default_factory=Access)  # the way in (_access.py)

    @property
    def identity(self) -> str:
        return f"id-{self.prefix}"

    @property
    def vnet(self) -> str:
        return f"vnet-{self.prefix}"

    @property
    def netapp_account(self) -> str:
        return f"anf-{self.prefix}"


def _prefix(plan_name: str, given: str | None) -> str:
    if given is not None:
        return given  # checked by ProvisionOptions
    stem = re.sub(r"[^a-z0-9]+", "-", plan_name.lower()).strip("-")[:20].strip("-")
    if not stem or not stem[0].isalpha():
        raise ProvisionError(
            f"name: the plan's name {plan_name[:40]!r} gives no usable resource name; "
            "pass --name with 2-20 lowercase letters, digits or hyphens"
        )
    return stem


def _scale_sets(prefix: str, vm_size: str, nodes: int, boundary: int) -> tuple[ScaleSet, ...]:
    # Fill each scale set to its limit. More than one only for a shape the spec declared
    # (_layout_checks.check_fabric): independent jobs or replicas, one per scale set, or a
    # fabric Microsoft arranged across them.
    count = math.ceil(nodes / boundary)
    sets = []
    for i in range(count):
        first = i * boundary
        size = min(boundary, nodes - first)
        name = f"vmss-{prefix}" if count == 1 else f"vmss-{prefix}-{i:02d}"
        sets.append(ScaleSet(name, size, vm_size, first))
    return tuple(sets)


def _lustre_wanted(plan: Plan) -> list[tuple[str, str, float]]:
    """(role, SKU, size in bytes) of each Managed Lustre file system the plan chose."""
    wanted = []
    if plan.data and plan.data.chosen.tier == "lustre":
        wanted.append(("data", plan.data.chosen.name, plan.data.chosen.size_bytes or 0.0))
    if plan.checkpoints and plan.checkpoints.volume and plan.checkpoints.volume.tier == "lustre":
        volume = plan.checkpoints.volume
        wanted.append(("checkpoints", volume.name, volume.size_bytes or 0.0))
    return wanted


def _sku_by_name(cat: Catalog, display: str) -> str:
    for key, sku in cat.lustre.items():
        if sku.name == display:
            return key
    raise ProvisionError(f"the plan chose {display!r}, which no catalog [lustre] entry names")


def _import_prefix(source: str | None) -> str:
    """The path part of ``az://container/path`` as an AMLFS import prefix; ``/`` otherwise."""
    if not source or "://" not in source:
        return "/"
    path = source.split("://", 1)[1].split("/", 1)
    return "/" + path[1].strip("/") if len(path) == 2 and path[1].strip("/") else "/"


def layout(
    plan: Plan,
    spec: JobSpec,
    cat: Catalog,
    options: ProvisionOptions,
    *,
    now: dt.datetime | None = None,
) -> Layout:
    """The resources that deploy ``plan``; raises ProvisionError naming the field it refuses."""
    from ._layout_checks import (
        check_layout_inputs,
        check_plan_name,
        fabric_notes,
        lustre_needs_request,
    )

    check_plan_name(plan.name)  # before any name is derived from it
    # The way in: the option where given, else the spec's (cluster.access, cluster.blob_access).
    access = options.access or spec.cluster.access
    blob_access = options.blob_access or spec.cluster.blob_access
    prefix = _prefix(plan.name, options.name)
    boundary = scale_set_vms(spec, cat)
    check_layout_inputs(plan, spec, cat, boundary)
    wanted = _lustre_wanted(plan)
    sizes = []
    for role, display, size_bytes in wanted:
        key = _sku_by_name(cat, display)
        sizes.append((role, key, round(size_bytes / TiB)))
    net = address_plan(
        options.address_space,
        plan.nodes,
        [tib for _, _, tib in sizes],
        cat.provision,
        wanted_subnets(access, blob_access),
    )
    lustres = []
    for i, (role, key, tib) in enumerate(sizes):
        sku = cat.lustre[key]
        lustres.append(
            Lustre(
                name=f"amlfs-{prefix}-{_SHORT[role]}",
                role=role,
                sku=key,
                capacity_tib=tib,
                throughput_mbps=round(tib * sku.throughput_per_tib / 1e6),
                subnet=net.lustre[i],
                container=role,
                import_prefix=_import_prefix(spec.data.source) if role == "data" else "/",
                mount_path=f"/lustre/{role}",
                price_per_tib_hour=sku.price_per_tib_hour,
            )
        )
    hsm = tuple(sorted({lu.container for lu in lustres}))
    main = tuple(c for c in ("data", "checkpoints", "models") if c not in hsm)
    accounts = [Account("main", main, shared_key=False)]
    if hsm:
        accounts.append(Account("hsm", (*hsm, "lustre-logs"), shared_key=True))
    notes = list(net.notes) + fabric_notes(spec, cat, plan.nodes, boundary)
    for lu in lustres:
        if lustre_needs_request(lu.sku, lu.capacity_tib, cat):  # declared approved, else refused
            notes.append(
                f"{lu.name}: {lu.capacity_tib} TiB is above {lu.sku}'s listed maximum of "
                f"{cat.lustre[lu.sku].max_size / TiB:g} TiB: deploy only with the support "
                "request the spec declares approved (data.lustre_capacity_approved)."
            )
    wall_s = plan.run.wall_s if plan.run else (spec.run.length or 30 * 86400.0)
    staging_s = plan.data.chosen.staging_s if plan.data else 0.0
    now = now or dt.datetime.now(dt.UTC)
    try:
        teardown = options.teardown_after or (
            now + dt.timedelta(seconds=math.ceil((wall_s + staging_s) / 3600) * 3600)
        )
    except (OverflowError, ValueError) as exc:  # a run past the year 9999
        raise ProvisionError(
            f"run: the plan's run takes {wall_s / 86400 / 365.25:.3g} years, past any date the "
            "teardown-after tag can hold; ask for less training (run.steps, run.tokens, "
            "workload.epochs) or cap it with run.length, or give --teardown-after"
        ) from exc
    # The bytes the plan's Blob line prices, by the container that holds them.
    stored = {
        "data": plan.data.dataset_bytes if plan.data else 0.0,
        "checkpoints": (
            plan.checkpoints.size_bytes * spec.checkpoints.keep if plan.checkpoints else 0.0
        ),
        "models": plan.inference.model_bytes if plan.inference else 0.0,
    }
    return Layout(
        plan_name=plan.name,
        prefix=prefix,
        region=spec.cluster.region,
        resource_group=options.resource_group or f"rg-{prefix}",
        vm_size=spec.cluster.vm_size,
        nodes=plan.nodes,
        boundary_vms=boundary,
        scale_sets=_scale_sets(prefix, spec.cluster.vm_size, plan.nodes, boundary),
        lustres=tuple(lustres),
        volumes=tuple(plan_volumes(plan, cat)),
        accounts=tuple(accounts),
        address_space=options.address_space,
        compute_subnet=net.compute,
        cyclecloud_subnet=net.cyclecloud,
        netapp_subnet=net.netapp,
        scratch_path="/mnt/nvme",
        vm_price_per_hour=plan.cost.price_per_vm_hour_usd,
        blob_price_gb_month=cat.blob[spec.data.blob_tier].price_hot_gb_month,
        stored_bytes=stored,
        teardown_after=teardown.astimezone(dt.UTC).replace(microsecond=0),
        admin_username=options.admin_username,
        ssh_public_key=options.ssh_public_key,
        install=options.install,
        notes=notes,
        version_days=spec.checkpoints.version_days,
        zone=spec.cluster.zone,
        fabric=spec.cluster.fabric,
        placement_group_limit=boundary if boundary > cat.fabric.scale_set_vms else None,
        access=Access(access, blob_access, options.deployer_ip, net.access),
    )
