"""Refusals: what Azure would reject, caught before anything is written, naming the field.

The ARM schemas catch wrong types and enums; these are the rules they do not carry (the AMLFS
capacity steps, the single-placement-group limit, a region that lacks the VM size) and that
otherwise surface twenty minutes into a deployment.
"""

from __future__ import annotations

import re

from ..catalog import Catalog
from ..errors import ProvisionError
from ..plan import JobSpec, Plan
from ..plan.fabric import DECLARES
from ._text import TAG_VALUE_MAX, refuse_controls, shown

TiB = 2**40
_REGION = re.compile(r"[a-z][a-z0-9]{2,30}")
# Where a spec's data can come from for a deployment: Blob over TLS, or a local path. Plain
# http:// and wasb:// (no TLS) are refused: the nodes would fetch the data in the clear.
SOURCE_SCHEMES = ("az", "abfs", "abfss", "wasbs", "https", "s3", "gs")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def check_plan_name(name: str) -> None:
    """The spec's ``name`` goes verbatim into tags, the README and cloud-init: printable, and
    short enough to be a tag value (escaping for each place is the writers' job)."""
    refuse_controls("name", name)
    if len(name) > TAG_VALUE_MAX:
        raise ProvisionError(
            f"name: the job spec's name {shown(name)} is {len(name)} characters; it becomes the "
            f"stoker-plan tag, which Azure caps at {TAG_VALUE_MAX}: shorten it"
        )


def check_source(source: str | None) -> None:
    """``data.source``: printable, and a URL only of a scheme the nodes fetch over TLS."""
    if source is None:
        return
    refuse_controls("data.source", source)
    m = _SCHEME.match(source)
    if m and m.group(1).lower() not in SOURCE_SCHEMES:
        raise ProvisionError(
            f"data.source: {shown(source)} is a {m.group(1)}:// URL; a deployment reads its data "
            f"over TLS only: {', '.join(s + '://' for s in SOURCE_SCHEMES)} or a local path"
        )


def check_region(spec: JobSpec, cat: Catalog) -> None:
    region, size = spec.cluster.region, spec.cluster.vm_size
    if not _REGION.fullmatch(region):
        raise ProvisionError(
            f"cluster.region: {region!r} is not an Azure region name; write it as ARM does, "
            "lowercase with no spaces (eastus, westeurope, southcentralus)"
        )
    regions = cat.vm[size].regions
    if regions is not None and region not in regions:
        raise ProvisionError(
            f"cluster.region: {size} is not offered in {region} according to the catalog "
            f"(vm.{size}.regions: {', '.join(regions)}); pick one of those regions"
        )


def check_boundary(spec: JobSpec, cat: Catalog, boundary: int) -> None:
    """A scale set with a single placement group (what InfiniBand needs) holds 100 VMs, 300
    with an approved support request: a larger one is written only when the spec declares the
    approval (``placement_group_limit``, or placement = "scale_set_on_request")."""
    c = spec.cluster
    if not cat.vm[c.vm_size].has_infiniband or boundary <= cat.fabric.scale_set_vms:
        return
    most = cat.fabric.scale_set_vms_on_request
    field = "placement_group_limit" if c.placement_group_limit else "fabric_boundary_vms"
    if boundary > most:
        raise ProvisionError(
            f"cluster.{field}: {boundary} VMs in one scale set; a single-placement-group scale "
            f"set (needed for InfiniBand) holds at most {most}, with an approved support "
            f"request; lower it to {most} or less"
        )
    if not c.placement_group_limit and c.placement != "scale_set_on_request":
        raise ProvisionError(
            f"cluster.fabric_boundary_vms: scale sets of {boundary} VMs exceed the "
            f"{cat.fabric.scale_set_vms} a placement group holds without a support request; "
            f"once Azure approves one, declare cluster.placement_group_limit = {boundary}"
        )


def check_fabric(plan: Plan, spec: JobSpec, boundary: int) -> None:
    """One job, one fabric: a job larger than one scale set is written only as a shape the spec
    declared (independent jobs or replicas, one per scale set, or a fabric arranged with
    Microsoft); otherwise refused, naming the shapes ``stoker plan`` lays out."""
    ic = plan.interconnect
    if ic is None or plan.nodes <= boundary or not ic.fabric_options:
        return
    if spec.cluster.fabric != "scale-set":
        return  # declared: the plan was made for that shape
    shapes = "; ".join(
        f"{o.layout.value}, step {o.step_s:.3g} s ({DECLARES[o.layout].format(vms=plan.nodes)})"
        for o in ic.fabric_options
        if o.layout in DECLARES
    )
    raise ProvisionError(
        f"cluster.fabric: {plan.nodes} VMs are more than one scale set of {boundary} holds, and "
        "one job cannot span scale sets on InfiniBand (NCCL does not fall back to Ethernet per "
        f"peer); declare one of the shapes `stoker plan` lays out: {shapes}. One job with "
        "InfiniBand off (flat_ethernet) is not written"
    )


def fabric_notes(spec: JobSpec, cat: Catalog, nodes: int, boundary: int) -> list[str]:
    """The README's words for what the scale sets are and what their size needs."""
    notes = []
    if boundary > cat.fabric.scale_set_vms and cat.vm[spec.cluster.vm_size].has_infiniband:
        notes.append(
            f"Scale sets of up to {boundary} VMs with one placement group exceed Azure's "
            f"{cat.fabric.scale_set_vms}: the spec declares the support request that allows "
            "them approved; deploy only once it is."
        )
    sets = -(-nodes // boundary)
    if sets > 1:
        notes.append(FABRIC_NOTES[spec.cluster.fabric].format(sets=sets, vms=boundary))
    return notes


FABRIC_NOTES = {
    "independent-jobs": (
        "The {sets} scale sets of up to {vms} VMs each run their own job: InfiniBand connects "
        "the VMs of one scale set only, so no collective crosses them."
    ),
    "independent-replicas": (
        "The {sets} scale sets of up to {vms} VMs each run one data-parallel replica that never "
        "exchanges gradients with the others: InfiniBand connects the VMs of one scale set only."
    ),
    "microsoft-arranged": (
        "The {sets} scale sets of up to {vms} VMs form one InfiniBand fabric only as arranged "
        "with Microsoft (cluster.fabric); on customer scale sets alone each is its own "
        "partition and one job across them fails at NCCL init or hangs."
    ),
    "scale-set": "",
}


def check_lustre(
    where: str, sku_key: str, capacity_tib: float, cat: Catalog, approved: bool = False
) -> None:
    sku = cat.lustre[sku_key]
    step, low, high = sku.step / TiB, sku.min_size / TiB, sku.max_size / TiB
    ceiling = (sku.max_size_on_request or cat.lustre_common.max_size_on_request) / TiB
    if capacity_tib != round(capacity_tib) or round(capacity_tib) % round(step):
        raise ProvisionError(
            f"{where}: {capacity_tib:g} TiB of {sku_key} is not a multiple of its "
            f"{step:g} TiB step; AMLFS refuses it"
        )
    if capacity_tib < low:
        raise ProvisionError(
            f"{where}: {capacity_tib:g} TiB is below {sku_key}'s {low:g} TiB minimum"
        )
    if capacity_tib > ceiling:
        raise ProvisionError(
            f"{where}: {capacity_tib:g} TiB exceeds the {ceiling:g} TiB Azure offers at most "
            "on request; split the data or use a faster SKU"
        )
    if capacity_tib > high and not approved:
        raise ProvisionError(
            f"{where}: {capacity_tib:g} TiB of {sku_key} is above its listed maximum of "
            f"{high:g} TiB; Azure grants more by support request: once approved, declare "
            "data.lustre_capacity_approved = true, or pick a SKU whose maximum holds it"
        )


def lustre_needs_request(sku_key: str, capacity_tib: int, cat: Catalog) -> bool:
    return capacity_tib > cat.lustre[sku_key].max_size / TiB


def check_image(spec: JobSpec, cat: Catalog) -> None:
    size = spec.cluster.vm_size
    if size not in cat.provision.hpc_images:
        raise ProvisionError(
            f"cluster.vm_size: the catalog knows no Azure HPC image for {size} (ND GB200 v6 is "
            "Arm64); add one in a catalog override: [provision] hpc_images = "
            f'{{ {size} = "publisher:offer:sku:version" }}'
        )
    check_image_python(size, cat)


def check_image_python(size: str, cat: Catalog) -> None:
    """Refuse an image whose python3 is older than stoker's Requires-Python, or unknown: the
    node's set-up installs stoker with the image's own python3 and would fail on every node."""
    from ._cloud_init import python_min  # _cloud_init imports the layout, which imports this

    urn = cat.provision.hpc_images[size]
    need = python_min()
    have = cat.provision.python_of(urn)
    where = f"catalog provision.hpc_images.{size}: {urn}"
    if have is None:
        raise ProvisionError(
            f"{where}: the catalog does not say which Python the image has; stoker needs "
            f"{need} or later on the nodes; add [provision] image_python = "
            f'{{ "{urn.rsplit(":", 1)[0]}" = "3.12" }} in a catalog override'
        )
    if have < tuple(map(int, need.split("."))):
        raise ProvisionError(
            f"{where}: its python3 is {have[0]}.{have[1]} (provision.image_python) and stoker "
            f"needs {need} or later on the nodes; pin an Ubuntu 24.04 HPC image (sku 2404)"
        )


def check_layout_inputs(plan: Plan, spec: JobSpec, cat: Catalog, boundary: int) -> None:
    check_source(spec.data.source)
    check_region(spec, cat)
    check_image(spec, cat)
    check_boundary(spec, cat, boundary)
    check_fabric(plan, spec, boundary)
    approved = spec.data.lustre_capacity_approved
    if plan.data and plan.data.chosen.tier == "lustre":
        _check_lustre_choice(
            "data.lustre_sku", plan.data.chosen.name, plan.data.chosen.size_bytes, cat, approved
        )
    if plan.checkpoints and plan.checkpoints.volume and plan.checkpoints.volume.tier == "lustre":
        volume = plan.checkpoints.volume
        _check_lustre_choice("checkpoints.tier", volume.name, volume.size_bytes, cat, approved)


def _check_lustre_choice(
    where: str, display: str, size_bytes: float | None, cat: Catalog, approved: bool
) -> None:
    for key, sku in cat.lustre.items():
        if sku.name == display:
            check_lustre(where, key, (size_bytes or 0.0) / TiB, cat, approved)
            return
    raise ProvisionError(
        f"{where}: the plan chose {display!r}, which no catalog [lustre] entry names"
    )
