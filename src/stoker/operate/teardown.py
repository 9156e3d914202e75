"""``teardown``: the ordered, idempotent, resumable end of a run (``stoker teardown``).

    report = stoker.teardown(".demo/deploy")                         # dry run
    report = stoker.teardown(".demo/deploy", dry_run=False)          # where it was deployed
    for dep in stoker.expired(subscription="..."): print(dep.group, dep.overdue_s)

**Which deployment, and where.** ``deployment`` is the directory ``stoker provision --out``
wrote (its ``main.json`` names the resources; only those are candidates), or a resource group
name, or a resource group id ``/subscriptions/SUB/resourceGroups/RG`` (then the candidates are
the resources carrying the group's ``stoker-deployment-id``; ``deployment_id`` chooses where
the group holds several). A directory is acted on in the subscription and group its
``stoker-deployment.json`` records, unless ``subscription`` / ``resource_group`` say otherwise
(see ``_ownership``); the subscription falls back to ``AZURE_SUBSCRIPTION_ID``. The report names
the subscription and group in every case.

**Ownership.** teardown acts only on resources whose ``stoker-deployment-id`` tag is the
deployment's id. A resource of a name the template gives but another tag (or none) is foreign:
it is left alone and reported, and teardown raises ``TeardownError`` before changing anything
unless ``skip_foreign``. Each mutating call (deallocate, archive, delete) is preceded by a fresh
GET proving the tag again. A folder whose record has no id (an older stoker) is refused for
anything but a dry run.

**Nothing in use is cut off.** A file system is archived and deleted only once every compute
resource that may mount it (the template's scale sets, every scale set or VM in the group
carrying the deployment's id) is deallocated or gone; otherwise ``TeardownError`` names them.

**Dry run** (the default) lists each step and what it saves per hour, from the resources' cost
tags. When the subscription and group are known and Azure answers, it reads the live state and
the tags (GET only); otherwise it says it could not check and works from the template.

**Idempotent and resumable.** Each step reads its resource first: a resource that is gone is a
done step, a deallocated scale set is not deallocated again, an archive already running is
waited on rather than asked for twice, and a delete in flight is waited for. A re-run after a
crash, a timeout or a fixed archive failure picks up where the last one stopped; no local state.

**Safety.** The file system is deleted only after its archive has reported ``Completed`` in
this run; an archive that fails or is cancelled raises ``ArchiveError`` with the file system
intact. Storage accounts are never touched.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._arg_types import NUMBER, PATH, check_args
from ..errors import TeardownError
from ..provision.tags import TAG_DEPLOYMENT
from ._expired import Expired, expired
from ._ownership import (
    Foreign,
    Target,
    choose_group_id,
    classify,
    folder_target,
    foreign_line,
    plan_only,
    require_id,
)
from ._steps import (
    VMSS,
    Resource,
    Step,
    left_alone,
    plan_steps,
    read_template,
    still_billed,
    total_saving,
)

Progress = Callable[[dict[str, Any]], None]
_GROUP_ID = re.compile(r"^/subscriptions/([^/]+)/resourcegroups/([^/]+)/?$", re.IGNORECASE)


@dataclass
class TeardownReport:
    deployment: str
    dry_run: bool
    queried_azure: bool  # the live state and the ownership tags were read
    steps: list[Step]
    left_alone: list[Resource]
    saves_usd_per_hour: float  # the steps whose saving is known
    unknown_cost: list[str]  # resources without a cost tag
    group: str | None = None
    subscription: str | None = None
    note: str = ""
    still_usd_per_hour: float = 0.0  # what goes on after teardown (kept storage, left alone)
    still_unknown: list[str] = field(default_factory=list)
    deployment_id: str | None = None
    foreign: list[Foreign] = field(default_factory=list)  # not provably ours: left alone

    def where(self) -> str:
        sub = self.subscription or "unknown"
        return f"subscription {sub}, resource group {self.group or 'unknown'}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "deployment": self.deployment,
            "dry_run": self.dry_run,
            "queried_azure": self.queried_azure,
            "subscription": self.subscription,
            "resource_group": self.group,
            "deployment_id": self.deployment_id,
            "steps": [s.to_dict() for s in self.steps],
            "left_alone": [{"type": r.type, "name": r.name} for r in self.left_alone],
            "foreign": [f.to_dict() for f in self.foreign],
            "saves_usd_per_hour": round(self.saves_usd_per_hour, 4),
            "saves_usd_per_day": round(self.saves_usd_per_hour * 24, 2),
            "unknown_cost": self.unknown_cost,
            "still_usd_per_hour": round(self.still_usd_per_hour, 4),
            "still_unknown": self.still_unknown,
            "note": self.note,
        }


def teardown(
    deployment: str | Path,
    *,
    resource_group: str | None = None,
    subscription: str | None = None,
    deployment_id: str | None = None,
    skip_foreign: bool = False,
    dry_run: bool = True,
    delete_scale_sets: bool = False,
    archive: bool = True,
    credential: Any = None,
    base_url: str | None = None,
    polling_interval_s: float = 30.0,
    archive_timeout_s: float = 24 * 3600.0,
    progress: Progress | None = None,
) -> TeardownReport:
    """Tear down ``deployment`` (see the module docstring); returns what was (or would be) done.
    Raises ``ArchiveError`` (file system left intact) or ``TeardownError`` (foreign resources,
    a file system still in use, Azure errors); either carries the report so far as
    ``.report``."""
    from ._arm import ArmClients, check_endpoint, subscription_from_env

    _check_types(deployment, locals())
    if base_url is not None:
        check_endpoint(base_url)  # before anything, a dry run too
    template, target = _where(deployment, resource_group, subscription, deployment_id,
                              subscription_from_env(None))  # fmt: skip
    label = str(deployment)
    plan = {"delete_scale_sets": delete_scale_sets, "archive": archive}
    if not dry_run and template is not None:
        require_id(target, Path(deployment))
    missing = _missing(target)
    if missing:
        if not dry_run:
            raise TeardownError(f"{deployment}: {missing}")
        return _offline(label, template, target, plan, f"{missing}")
    arm = ArmClients(
        target.subscription or "", credential=credential, base_url=base_url,
        polling_interval_s=polling_interval_s,
    )  # fmt: skip
    try:
        from ._runner import Runner, list_group

        try:
            live = list_group(arm, target.group or "")
        except TeardownError as exc:
            if not dry_run:
                raise
            return _offline(label, template, target, plan, f"Azure did not answer ({exc})")
        report, refusal = _checked(label, template, target, live, plan, dry_run, skip_foreign)
        if refusal is not None and not dry_run:
            raise refusal  # before anything changes
        names = {r.name for r in template or [] if r.kind == VMSS}
        runner = Runner(arm, report, progress or (lambda e: None),
                        archive_timeout_s=archive_timeout_s, skip_foreign=skip_foreign,
                        template_scale_sets=names)  # fmt: skip
        runner.run()  # a dry run reads the live state even where it then refuses
        if refusal is not None:
            raise refusal
        return report
    finally:
        arm.close()


def _check_types(deployment: Any, given: dict[str, Any]) -> None:
    """One line naming a twin's argument of the wrong type (``dry_run="no"`` is true)."""
    text = (str, type(None))
    flags = ("skip_foreign", "dry_run", "delete_scale_sets", "archive")
    check_args(
        TeardownError,
        deployment=(deployment, PATH),
        **{k: (given[k], text) for k in ("resource_group", "subscription", "deployment_id")},
        **{k: (given[k], bool) for k in flags},
        polling_interval_s=(given["polling_interval_s"], NUMBER),
        archive_timeout_s=(given["archive_timeout_s"], NUMBER),
    )


def _where(
    deployment: str | Path,
    group: str | None,
    sub: str | None,
    deployment_id: str | None,
    env_sub: str | None,
) -> tuple[list[Resource] | None, Target]:
    """(template resources or None, where and for whom) from what the user gave."""
    path = Path(deployment)
    if path.is_dir():
        return read_template(path), folder_target(path, group, sub, deployment_id, env_sub)
    text = str(deployment)
    m = _GROUP_ID.match(text)
    if m:
        if sub and sub.lower() != m.group(1).lower():
            raise TeardownError(f"subscription given twice: {m.group(1)} and --subscription {sub}")
        if group and group.lower() != m.group(2).lower():
            raise TeardownError(f"resource group given twice: {text} and --resource-group {group}")
        return None, Target(m.group(1), m.group(2), deployment_id, False)
    if "/" in text or text.endswith(".json") or path.exists():
        raise TeardownError(
            f"{deployment}: neither a directory written by `stoker provision` nor a resource "
            "group; give the --out directory, a group name, or /subscriptions/SUB/resourceGroups/RG"
        )
    if group and group != text:
        raise TeardownError(f"resource group given twice: {text} and --resource-group {group}")
    return None, Target(sub or env_sub or None, text, deployment_id, False)


def _missing(target: Target) -> str:
    """What stops teardown from reaching Azure ("" when nothing does)."""
    if not target.group:
        return (
            "a provision directory whose stoker-deployment.json names no resource group; name "
            "it with --resource-group (and --subscription)"
        )
    if not target.subscription:
        return (
            "no subscription: pass --subscription or set AZURE_SUBSCRIPTION_ID (`az account "
            "show --query id -o tsv` prints yours)"
        )
    return ""


def _offline(label: str, template: list[Resource] | None, target: Target, plan: dict[str, bool],
             why: str) -> TeardownReport:  # fmt: skip
    steps = plan_steps(template or [], **plan)
    note = (f"Azure was not queried ({why}): could not check the ownership tags or the live "
            "state; the steps are read from the template only")  # fmt: skip
    return _report(label, True, False, steps, left_alone(template or []), target, note)


def _checked(label: str, template: list[Resource] | None, target: Target, live: list[Resource],
             plan: dict[str, bool], dry_run: bool,
             skip: bool) -> tuple[TeardownReport, TeardownError | None]:  # fmt: skip
    """The report of what Azure holds, ownership classified, and the refusal (report attached)
    that foreign resources or a moved target nothing proves call for."""
    did = target.deployment_id
    if template is None:
        did = choose_group_id(live, did, target.where())
    acted, foreign, owned = classify(template, live, did, target.group or "")
    steps = plan_steps(acted, **plan)
    for s in steps:
        s.owned = owned.get(f"{s.resource.kind}|{s.resource.name.lower()}")
    notes = []
    if template is None and did is None:
        notes.append(f"no resource in {target.group} carries a {TAG_DEPLOYMENT} tag: nothing to do")
        old = plan_only(live)
        if old:
            notes.append(f"{', '.join(old)} carry only stoker-plan (an older stoker): not "
                         "provably a deployment's, left alone")  # fmt: skip
    elif template is None and not acted:
        notes.append(f"no resource in {target.group} carries {TAG_DEPLOYMENT} {did}: nothing to do")
    elif did is None:
        notes.append("stoker-deployment.json has no deployment_id (an older stoker): ownership "
                     "cannot be proven, and --yes refuses")  # fmt: skip
    if foreign and skip:
        notes.append(f"{len(foreign)} not stoker's: left alone (--skip-foreign)")
    report = _report(label, dry_run, True, steps, left_alone(acted), target, "; ".join(notes),
                     did, foreign)  # fmt: skip
    err = None
    if target.moved and did and not any(owned.values()):
        err = TeardownError(
            f"{label}: the command line names {target.moved}, and nothing in resource group "
            f"{target.group} carries {TAG_DEPLOYMENT} {did}: refusing to act on "
            f"{target.where()}; nothing was changed"
        )
    elif foreign and not skip:
        err = TeardownError(foreign_line(foreign, Target(
            target.subscription, target.group, did, target.from_folder)))  # fmt: skip
    if err is not None:
        err.report = report  # type: ignore[attr-defined]
    return report, err


def _report(label: str, dry: bool, queried: bool, steps: list[Step], alone: list[Resource],
            target: Target, note: str, did: str | None = None,
            foreign: list[Foreign] | None = None) -> TeardownReport:  # fmt: skip
    known, unknown = total_saving(steps)
    still, still_unknown = still_billed(steps, alone)
    return TeardownReport(label, dry, queried, steps, alone, known, unknown, target.group,
                          target.subscription, note, still, still_unknown,
                          did or target.deployment_id, list(foreign or []))  # fmt: skip


__all__ = ["Expired", "TeardownReport", "expired", "teardown"]
