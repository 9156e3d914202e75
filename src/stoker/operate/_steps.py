"""What a teardown will do, as data: the deployment's resources (from Azure, or offline from the
ARM template ``stoker provision`` wrote) and the ordered steps, each with what it saves per hour.

The order is the point:

1. **stop the scale sets** (deallocate, or delete with ``delete_scale_sets``): the GPUs are the
   largest line of the bill, and once they are stopped nothing writes to Lustre any more, so the
   archive that follows is complete;
2. **archive** the file system's changes to its Blob container (``POST .../archive``) and wait
   until the archive has *completed*;
3. only then **delete** the file system: its disks are the only copy of what was not archived;
4. **keep** the storage accounts (Blob holds the data, the checkpoints and now the archive) and
   leave everything else (network, identity: no hourly cost) as it is.

Costs come from the tags ``stoker provision`` puts on each resource (``TAG_COST``, US dollars per
hour); a resource without the tag saves an unknown amount, and the report says so rather than
counting it as zero. Pure: no I/O except ``read_template``.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._redact import printable
from .._user_files import load_user_json
from ..errors import TeardownError
from ..provision.tags import TAG_AFTER, TAG_COST, TAG_STOPPED_COST

AMLFS = "microsoft.storagecache/amlfilesystems"
VMSS = "microsoft.compute/virtualmachinescalesets"
VM = "microsoft.compute/virtualmachines"
STORAGE = "microsoft.storage/storageaccounts"
_LABELS = {VMSS: "scale set", AMLFS: "Lustre", STORAGE: "storage", VM: "VM"}


@dataclass(frozen=True)
class Resource:
    type: str  # as ARM writes it, e.g. Microsoft.StorageCache/amlFilesystems
    name: str
    tags: dict[str, str] = field(default_factory=dict)
    id: str | None = None  # None when read from a template (not deployed, or not looked up)
    group: str | None = None  # resource group, when known

    @property
    def kind(self) -> str:
        return self.type.lower()

    @property
    def usd_per_hour(self) -> float | None:
        return _cost(self.tags.get(TAG_COST))

    @property
    def stopped_usd_per_hour(self) -> float | None:
        """What it costs deallocated (a scale set's OS disks); 0.0 without the tag (a deployment
        written before stoker priced the disks), None where the tag says unknown."""
        if TAG_STOPPED_COST not in self.tags:
            return 0.0
        return _cost(self.tags[TAG_STOPPED_COST])

    @property
    def teardown_after(self) -> dt.datetime | None:
        return parse_time(self.tags.get(TAG_AFTER))

    @property
    def short_type(self) -> str:
        return self.type.split("/")[-1]

    @property
    def label(self) -> str:
        """What a person calls it: scale set, Lustre, storage, or the ARM type's last part."""
        return _LABELS.get(self.kind, self.short_type)


@dataclass
class Step:
    """One thing teardown does (or, dry, would do) to one resource."""

    action: str  # deallocate, delete, archive, keep
    resource: Resource
    saves_usd_per_hour: float | None  # what the step stops paying; None = not known
    why: str
    status: str = "planned"  # planned, done, already, failed, skipped (not provably ours)
    detail: str = ""
    owned: bool | None = None  # its stoker-deployment-id tag matched; None: not checked
    live: str = ""  # its state as Azure reported it ("running 2", "gone"); "" offline

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["resource"] = {
            "type": self.resource.type,
            "name": self.resource.name,
            "id": self.resource.id,
            "group": self.resource.group,
        }
        return out


def parse_time(text: str | None) -> dt.datetime | None:
    """An ISO 8601 time from a tag; a bare date is midnight UTC; no zone means UTC."""
    if not text:
        return None
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _cost(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(str(text).strip().lstrip("$"))
    except ValueError:
        return None
    return value if value >= 0 else None


def plan_steps(
    resources: list[Resource], *, delete_scale_sets: bool = False, archive: bool = True
) -> list[Step]:
    """The ordered steps for ``resources`` (see the module docstring)."""
    steps: list[Step] = []
    for r in (r for r in resources if r.kind == VMSS):
        if delete_scale_sets:
            why = "the VMs, their disks and the scale set go (the template recreates them)"
            steps.append(Step("delete", r, r.usd_per_hour, why))
        else:
            why = "GPUs stop billing; OS disks stay (still billed); local NVMe is wiped"
            stopped = r.stopped_usd_per_hour
            saves = None if r.usd_per_hour is None else r.usd_per_hour - (stopped or 0.0)
            steps.append(Step("deallocate", r, saves, why))
    for r in (r for r in resources if r.kind == AMLFS):
        if archive:
            why = "changed files to its Blob container; waits until Completed"
            steps.append(Step("archive", r, 0.0, why))
            why = "only once its archive has completed"
        else:
            why = "WITHOUT an archive (--no-archive): what Blob lacks is lost"
        steps.append(Step("delete", r, r.usd_per_hour, why))
    for r in (r for r in resources if r.kind == STORAGE):
        steps.append(Step("keep", r, 0.0, "Blob holds the data, checkpoints, archive", "kept"))
    return steps


def left_alone(resources: list[Resource]) -> list[Resource]:
    """Top-level resources teardown does not touch (network, NAT, identity); child resources
    (containers, ...) go with their parent, role assignments cost nothing and are not listed."""
    skip = (VMSS, AMLFS, STORAGE, "microsoft.authorization/roleassignments")
    return [
        r
        for r in resources
        if r.kind not in skip and (r.kind.count("/") == 1 or _billed(r))  # a NetApp pool bills
    ]


def _billed(r: Resource) -> bool:
    return TAG_COST in r.tags and r.usd_per_hour != 0.0


def still_billed(steps: list[Step], alone: list[Resource]) -> tuple[float, list[str]]:
    """(dollars per hour that go on after teardown: kept storage and what is left alone,
    names whose cost is unknown). Resources without a cost tag are not counted."""
    kept = [s.resource for s in steps if s.action == "keep"] + alone
    known = sum(r.usd_per_hour or 0.0 for r in kept if TAG_COST in r.tags)
    unknown = [r.name for r in kept if TAG_COST in r.tags and r.usd_per_hour is None]
    # a deallocated scale set keeps its VMs' OS disks, billed until the scale set is deleted
    stopped = [s.resource for s in steps if s.action == "deallocate"]
    known += sum(r.stopped_usd_per_hour or 0.0 for r in stopped)
    unknown += [f"{r.name} (OS disks)" for r in stopped if r.stopped_usd_per_hour is None]
    return known, unknown


def total_saving(steps: list[Step]) -> tuple[float, list[str]]:
    """(dollars per hour the steps save, names of resources whose saving is unknown)."""
    known = sum(s.saves_usd_per_hour or 0.0 for s in steps)
    unknown = [s.resource.name for s in steps if s.saves_usd_per_hour is None]
    return known, unknown


# ---------------------------------------------------------------------------------- offline


def read_template(directory: Path) -> list[Resource]:
    """The resources ``stoker provision`` wrote into ``directory/main.json``, names and tags
    resolved from ``main.parameters.json`` and the template's parameter defaults and variables
    (``[parameters('x')]``, ``[variables('x')]``). A value that stays an expression is shown
    as written."""
    main = directory / "main.json"
    if not main.exists():
        raise TeardownError(
            f"{directory}: no main.json here; give the directory `stoker provision --out` "
            "wrote, or a resource group with --resource-group"
        )
    template = load_json(main, "ARM template")
    params: dict[str, Any] = {
        k: v.get("defaultValue")
        for k, v in (template.get("parameters") or {}).items()
        if isinstance(v, dict)
    }
    pfile = directory / "main.parameters.json"
    if pfile.exists():
        for k, v in (load_json(pfile, "parameters file").get("parameters") or {}).items():
            if isinstance(v, dict) and "value" in v:
                params[k] = v["value"]
    variables = template.get("variables") or {}
    resolve = _Resolver(params, variables)
    out = []
    for res in template.get("resources") or []:
        if not isinstance(res, dict) or "type" not in res:
            continue
        tags = resolve(res.get("tags") or {})
        tags = {str(k): str(v) for k, v in tags.items()} if isinstance(tags, dict) else {}
        out.append(Resource(str(res["type"]), str(resolve(res.get("name", "?"))), tags))
    return out


def load_json(path: Path, what: str) -> dict[str, Any]:
    """A JSON object stoker provision wrote; a FIFO or device planted in its place, a file
    too large or not JSON, is one TeardownError naming it."""
    data = load_user_json(path, what, TeardownError, max_bytes=64 << 20)
    if not isinstance(data, dict):
        raise TeardownError(f"{printable(str(path))}: expected a JSON object")
    return data


_CALL = re.compile(r"^\[(parameters|variables)\('([^']+)'\)\]$")


class _Resolver:
    def __init__(self, params: dict[str, Any], variables: dict[str, Any]) -> None:
        self.params, self.variables = params, variables

    def __call__(self, value: Any, depth: int = 0) -> Any:
        if depth > 8:
            return value
        if isinstance(value, dict):
            return {k: self(v, depth + 1) for k, v in value.items()}
        if isinstance(value, str):
            if value.startswith("[[") and value.endswith("]"):
                return value[1:]  # ARM's escape: the literal text with one [ less, unevaluated
            m = _CALL.match(value)
            if m:
                table = self.params if m.group(1) == "parameters" else self.variables
                if m.group(2) in table and table[m.group(2)] is not None:
                    return self(table[m.group(2)], depth + 1)
        return value
