"""Which deployment teardown acts on, where, and which live resources are provably its own.

The proof is the ``stoker-deployment-id`` tag (``TAG_DEPLOYMENT``) that ``stoker provision``
puts on every resource, with a value unique per provision run; a name proves nothing (anyone
can make a scale set called ``gpus``). ``stoker-deployment.json`` records the id, the
subscription and the resource group the folder was written for:

- the group and subscription acted on are the command line's, else the record's, else (the
  subscription only) ``AZURE_SUBSCRIPTION_ID``; where the command line differs from the record,
  it is used only if the group holds resources carrying the recorded id;
- a resource the template names but whose tag is missing or another value is *foreign*: left
  alone, and teardown refuses unless told to skip it;
- given a resource group rather than a folder, the id is the one the group's resources carry,
  or ``deployment_id`` where they carry several.

Pure except ``read_record`` (one small file).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._redact import printable
from ..errors import TeardownError
from ..provision.tags import TAG_DEPLOYMENT, TAG_PLAN
from ._steps import Resource, load_json

RECORD = "stoker-deployment.json"


@dataclass(frozen=True)
class Record:
    """What ``stoker provision`` recorded about where the folder's resources go."""

    deployment_id: str | None
    subscription: str | None
    resource_group: str | None


@dataclass(frozen=True)
class Foreign:
    """A resource teardown leaves alone because it is not provably the deployment's."""

    resource: Resource
    found_id: str | None  # its stoker-deployment-id tag; None when it has none

    @property
    def why(self) -> str:
        if self.found_id is None:
            return f"no {TAG_DEPLOYMENT} tag"
        return f"{TAG_DEPLOYMENT} {self.found_id}"

    def to_dict(self) -> dict[str, str | None]:
        r = self.resource
        return {"type": r.type, "name": r.name, "id": r.id, "found_deployment_id": self.found_id}


@dataclass(frozen=True)
class Target:
    """Where teardown acts and on whose behalf."""

    subscription: str | None
    group: str | None
    deployment_id: str | None
    from_folder: bool
    record: Record | None = None
    moved: str = ""  # how the command line differs from the record ("" when it does not)

    def where(self) -> str:
        """``subscription S, resource group G`` as every output names it."""
        sub = self.subscription or "unknown (no --subscription, none recorded, no env)"
        return f"subscription {sub}, resource group {self.group or 'unknown'}"


def read_record(directory: Path) -> Record | None:
    """``stoker-deployment.json`` of a provision folder; None when there is none."""
    path = directory / RECORD
    if not path.exists():
        return None
    data = load_json(path, "deployment record")

    def text(key: str) -> str | None:
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise TeardownError(
                f"{printable(str(path))}: {key} must be a string, not {type(value).__name__}"
            )
        return value or None

    return Record(text("deployment_id"), text("subscription"), text("resource_group"))


def folder_target(
    directory: Path,
    group: str | None,
    subscription: str | None,
    deployment_id: str | None,
    env_subscription: str | None,
) -> Target:
    """The target of a provision folder: the command line's group and subscription over the
    record's (a difference is noted in ``moved``, to be proven by the tags)."""
    record = read_record(directory) or Record(None, None, None)
    if deployment_id and deployment_id != record.deployment_id:
        raise TeardownError(
            f"{directory / RECORD}: deployment_id is {record.deployment_id or 'not recorded'}, "
            f"--deployment-id says {deployment_id}; a folder is torn down under its own id "
            "(--deployment-id chooses among a resource group's deployments)"
        )
    moved = []
    if group and record.resource_group and group.lower() != record.resource_group.lower():
        moved.append(f"resource group {group} (recorded: {record.resource_group})")
    if subscription and record.subscription and subscription.lower() != record.subscription.lower():
        moved.append(f"subscription {subscription} (recorded: {record.subscription})")
    return Target(
        subscription or record.subscription or env_subscription or None,
        group or record.resource_group,
        record.deployment_id,
        True,
        record,
        "; ".join(moved),
    )


def require_id(target: Target, directory: Path) -> str:
    """The id a mutating run proves ownership by; a folder without one is refused."""
    if target.deployment_id:
        return target.deployment_id
    raise TeardownError(
        f"{directory / RECORD}: no deployment_id (the folder was written by a stoker before "
        f"deployments carried the {TAG_DEPLOYMENT} tag), so no resource can be proven its own: "
        "nothing is changed. Delete its resources by hand (`az resource delete`)"
    )


def group_ids(live: list[Resource]) -> list[str]:
    """The deployment ids the group's resources carry, sorted."""
    return sorted({r.tags[TAG_DEPLOYMENT] for r in live if r.tags.get(TAG_DEPLOYMENT)})


def choose_group_id(live: list[Resource], given: str | None, where: str) -> str | None:
    """The one deployment a group is torn down for: ``given``, else the only id found.
    None when no resource carries one. Several ids and none chosen is refused."""
    if given:
        return given
    ids = group_ids(live)
    if len(ids) > 1:
        raise TeardownError(
            f"{where} holds {len(ids)} deployments ({', '.join(ids)}): choose one with "
            "--deployment-id; nothing was changed"
        )
    return ids[0] if ids else None


def classify(
    template: list[Resource] | None, live: list[Resource], deployment_id: str | None, group: str
) -> tuple[list[Resource], list[Foreign], dict[str, bool | None]]:
    """(the resources to plan steps for, the foreign ones, ownership by name).

    With a template: each resource it names, as found live (one not found is kept id-less so
    its steps find it gone) unless its tag is not ``deployment_id`` (foreign). Without: the
    live resources carrying ``deployment_id``. ``deployment_id`` None (an old folder, dry run
    only) marks the matches unproven (None) rather than foreign."""
    owned: dict[str, bool | None] = {}
    if template is None:
        mine = [r for r in live if deployment_id and r.tags.get(TAG_DEPLOYMENT) == deployment_id]
        for r in mine:
            owned[_key(r)] = True
        return mine, [], owned
    by_key = {_key(r): r for r in live}
    acted: list[Resource] = []
    foreign: list[Foreign] = []
    for t in template:
        found = by_key.get(_key(t))
        if found is None:
            acted.append(Resource(t.type, t.name, t.tags, None, group))
            continue
        tag = found.tags.get(TAG_DEPLOYMENT)
        if deployment_id is None:
            owned[_key(t)] = None
        elif tag == deployment_id:
            owned[_key(t)] = True
        else:
            owned[_key(t)] = False
            foreign.append(Foreign(found, tag))
            continue
        acted.append(found)
    return acted, foreign, owned


def plan_only(live: list[Resource]) -> list[str]:
    """Names of resources with the plan tag but no deployment id (made by an older stoker)."""
    return [r.name for r in live if TAG_PLAN in r.tags and TAG_DEPLOYMENT not in r.tags]


def foreign_line(foreign: list[Foreign], target: Target) -> str:
    names = ", ".join(f"{f.resource.label} {f.resource.name} ({f.why})" for f in foreign)
    return (
        f"not stoker's: left alone: {names} in {target.where()} do not carry "
        f"{TAG_DEPLOYMENT} {target.deployment_id}; nothing was changed. Pass --skip-foreign "
        "to leave them alone and tear down the rest"
    )


def _key(r: Resource) -> str:
    return f"{r.kind}|{r.name.lower()}"
