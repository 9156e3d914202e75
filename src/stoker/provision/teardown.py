"""``teardown``: the ordered, idempotent, resumable end of a run (``stoker teardown``).

    report = stoker.teardown(".demo/deploy")                         # dry run, offline
    report = stoker.teardown(".demo/deploy", resource_group="rg-train", dry_run=False)
    for dep in stoker.expired(subscription="..."): print(dep.group, dep.overdue_s)

**Which deployment.** ``deployment`` is the directory ``stoker provision --out`` wrote (its
``main.json`` names the resources; only those are touched), or a resource group name, or a
resource group id ``/subscriptions/SUB/resourceGroups/RG`` (then the resources carrying the
``stoker-plan`` tag are torn down). To act, a directory needs the resource group it was deployed
to: ``resource_group``, else the one ``stoker provision`` recorded in its
``stoker-deployment.json``; the subscription is ``subscription`` or ``AZURE_SUBSCRIPTION_ID``.

**Dry run** (the default) lists each step and what it saves per hour, from the resources' cost
tags. With only a directory it reads the template and does not query Azure (the report says
so); with a resource group it reads the current state from Azure (GET only) and marks steps that
are already done.

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

from ..errors import ArchiveError, TeardownError
from ._expired import Expired, expired
from ._lro import ArchiveState, wait_archive, wait_gone
from ._teardown import (
    AMLFS,
    TAG_PLAN,
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
    queried_azure: bool
    steps: list[Step]
    left_alone: list[Resource]
    saves_usd_per_hour: float  # the steps whose saving is known
    unknown_cost: list[str]  # resources without a cost tag
    group: str | None = None
    subscription: str | None = None
    note: str = ""
    still_usd_per_hour: float = 0.0  # what goes on after teardown (kept storage, left alone)
    still_unknown: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "deployment": self.deployment,
            "dry_run": self.dry_run,
            "queried_azure": self.queried_azure,
            "subscription": self.subscription,
            "resource_group": self.group,
            "steps": [s.to_dict() for s in self.steps],
            "left_alone": [{"type": r.type, "name": r.name} for r in self.left_alone],
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
    Raises ``ArchiveError`` (file system left intact) or ``TeardownError``; either carries the
    report so far as ``.report``."""
    from ._arm_client import ArmClients, subscription_from_env

    template, group, sub = _where(deployment, resource_group, subscription)
    label = str(deployment)
    if group is None and not dry_run:
        group = _recorded_group(Path(deployment))
    if group is None:
        if not dry_run:
            raise TeardownError(
                f"{deployment}: a provision directory does not say where it was deployed; name "
                "the resource group with --resource-group (and --subscription)"
            )
        steps = plan_steps(template or [], delete_scale_sets=delete_scale_sets, archive=archive)
        return _report(label, True, False, steps, left_alone(template or []), None, None,
                       "read from the template only: Azure was not queried")  # fmt: skip
    sub = subscription_from_env(sub)
    arm = ArmClients(
        sub, credential=credential, base_url=base_url, polling_interval_s=polling_interval_s
    )
    try:
        live = _inventory(arm, group, template)
        steps = plan_steps(live, delete_scale_sets=delete_scale_sets, archive=archive)
        note = ""
        if template is None and not live:
            note = f"no resource in {group} carries the {TAG_PLAN} tag: nothing to do"
        report = _report(label, dry_run, True, steps, left_alone(live), group, sub, note)
        runner = _Runner(arm, group, report, progress or (lambda e: None), archive_timeout_s)
        runner.run()
        return report
    finally:
        arm.close()


def _where(
    deployment: str | Path, group: str | None, sub: str | None
) -> tuple[list[Resource] | None, str | None, str | None]:
    """(template resources or None, resource group, subscription) from what the user gave."""
    path = Path(deployment)
    if path.is_dir():
        return read_template(path), group, sub
    text = str(deployment)
    m = _GROUP_ID.match(text)
    if m:
        return None, m.group(2), sub or m.group(1)
    if "/" in text or text.endswith(".json") or path.exists():
        raise TeardownError(
            f"{deployment}: neither a directory written by `stoker provision` nor a resource "
            "group; give the --out directory, a group name, or /subscriptions/SUB/resourceGroups/RG"
        )
    if group and group != text:
        raise TeardownError(f"resource group given twice: {text} and --resource-group {group}")
    return None, text, sub


def _recorded_group(directory: Path) -> str | None:
    """The resource group ``stoker provision`` wrote the directory for (stoker-deployment.json);
    used to act (never for a dry run, which then stays offline)."""
    import json

    try:
        data = json.loads((directory / "stoker-deployment.json").read_text())
    except (OSError, ValueError):
        return None
    group = data.get("resource_group") if isinstance(data, dict) else None
    return group if isinstance(group, str) and group else None


def _report(label, dry, queried, steps, alone, group, sub, note) -> TeardownReport:  # type: ignore[no-untyped-def]
    known, unknown = total_saving(steps)
    still, still_unknown = still_billed(steps, alone)
    return TeardownReport(label, dry, queried, steps, alone, known, unknown, group, sub, note,
                          still, still_unknown)  # fmt: skip


def _inventory(arm: Any, group: str, template: list[Resource] | None) -> list[Resource]:
    """The deployment's resources as Azure has them now. With a template, its resources (one
    missing from Azure is kept, id-less, and its steps find it gone); without, those tagged
    with the plan tag."""
    from ._arm_client import not_found, translate

    try:
        found = [
            Resource(r.type, r.name, dict(r.tags or {}), r.id, group)
            for r in arm.resources.resources.list_by_resource_group(group, **arm.call)
        ]
    except Exception as exc:  # noqa: BLE001 - SDK and credential errors, translated
        if not not_found(exc):
            raise translate(exc, f"listing resource group {group}") from exc
        found = []  # the group is gone: so is everything in it
    if template is None:
        return [r for r in found if TAG_PLAN in r.tags]
    by_key = {(r.kind, r.name.lower()): r for r in found}
    return [by_key.get((t.kind, t.name.lower()), Resource(t.type, t.name, t.tags, None, group))
            for t in template]  # fmt: skip


class _Runner:
    def __init__(self, arm: Any, group: str, report: TeardownReport, progress: Progress,
                 archive_timeout_s: float) -> None:  # fmt: skip
        self.arm, self.group, self.report, self.emit = arm, group, report, progress
        self.archive_timeout_s = archive_timeout_s
        self.archived: set[str] = set()  # file systems whose archive completed in this run

    def run(self) -> None:
        for step in self.report.steps:
            if step.action == "keep":
                step.status = "kept"
                continue
            self.emit({"event": "step", "action": step.action, "name": step.resource.name,
                       "status": "checking"})  # fmt: skip
            try:
                self._one(step)
            except Exception as exc:
                step.status = "failed"
                step.detail = str(exc) if isinstance(exc, TeardownError) else type(exc).__name__
                if isinstance(exc, TeardownError):
                    exc.report = self.report  # type: ignore[attr-defined]
                    raise
                from ._arm_client import translate

                err = translate(exc, f"{step.action} {step.resource.name}")
                err.report = self.report  # type: ignore[attr-defined]
                raise err from exc
            self.emit({"event": "step", "action": step.action, "name": step.resource.name,
                       "status": step.status, "detail": step.detail})  # fmt: skip

    def _one(self, step: Step) -> None:
        r = step.resource
        if r.kind == VMSS:
            self._scale_set(step)
        elif r.kind == AMLFS and step.action == "archive":
            self._archive(step)
        elif r.kind == AMLFS:
            self._delete_fs(step)

    def _get(self, read: Callable[[], Any]) -> dict[str, Any] | None:
        from ._arm_client import not_found

        try:
            return read().as_dict()
        except Exception as exc:  # noqa: BLE001 - 404 is an answer here
            if not_found(exc):
                return None
            raise

    # ------------------------------------------------------------------ scale sets

    def _scale_set(self, step: Step) -> None:
        ops, name = self.arm.compute.virtual_machine_scale_sets, step.resource.name
        call = self.arm.compute_call
        if self._get(lambda: ops.get(self.group, name, **call)) is None:
            step.status, step.detail = "already", "gone"
            return
        if step.action == "deallocate":
            power = self._power(name)
            if power and set(power) == {"deallocated"}:
                step.status, step.detail = "already", "every VM deallocated"
                return
            if self.report.dry_run:
                step.detail = ", ".join(f"{k} {v}" for k, v in power.items())
                return
            if power and set(power) <= {"deallocated", "deallocating"}:
                # An earlier run's deallocate is still under way: asking again would conflict.
                wait_gone(lambda: set(self._power(name)) != {"deallocated"},
                          name=f"scale set {name} (deallocating)",
                          interval_s=self.arm.polling_interval_s)  # fmt: skip
                step.status, step.detail = "done", "waited for the deallocation under way"
                return
            ops.begin_deallocate(self.group, name, **call).result()
        else:
            if self.report.dry_run:
                return
            ops.begin_delete(self.group, name, **call).result()
        step.status = "done"

    def _power(self, name: str) -> dict[str, int]:
        """VM counts by power state ("running", "deallocated", ...) from the instance view."""
        ops, call = self.arm.compute.virtual_machine_scale_sets, self.arm.compute_call
        view = self._get(lambda: ops.get_instance_view(self.group, name, **call)) or {}
        summary = (view.get("virtualMachine") or {}).get("statusesSummary") or []
        return {
            str(s.get("code", "")).lower().removeprefix("powerstate/"): int(s.get("count") or 0)
            for s in summary
            if str(s.get("code", "")).lower().startswith("powerstate/")
        }

    # ------------------------------------------------------------------ Managed Lustre

    def _fs(self, name: str) -> dict[str, Any] | None:
        ops = self.arm.lustre.aml_filesystems
        return self._get(lambda: ops.get(self.group, name, **self.arm.call))

    def _archive(self, step: Step) -> None:
        name, ops, call = step.resource.name, self.arm.lustre.aml_filesystems, self.arm.call
        fs = self._fs(name)
        if fs is None:
            step.status, step.detail = "already", "file system gone"
            return
        if str((fs.get("properties") or {}).get("provisioningState")) == "Deleting":
            step.status, step.detail = "already", "a delete is in flight (an earlier run archived)"
            self.archived.add(name)
            return
        if not ((fs.get("properties") or {}).get("hsm") or {}).get("settings"):
            raise ArchiveError(
                f"file system {name} has no Blob integration (no hsm settings): there is "
                "nowhere to archive to; copy its data out (`stoker stage`), then run teardown "
                "with --no-archive to delete it anyway"
            )
        before = ArchiveState.of(fs)
        if self.report.dry_run:
            step.detail = f"last archive: {before.state or 'none'}"
            return
        if before.state in ("InProgress", "FSScanInProgress", "Cancelling"):
            step.detail, wait_from = "an archive was already running: waited for it", None
        else:
            ops.archive(self.group, name, {"filesystemPath": "/"}, **call)
            wait_from = before

        def read() -> ArchiveState:
            now = self._fs(name)
            if now is None:
                raise TeardownError(f"file system {name} disappeared while it was archiving")
            return ArchiveState.of(now)

        def on_poll(state: ArchiveState) -> None:
            self.emit({"event": "archive", "name": name, "state": state.state,
                       "percent": state.percent})  # fmt: skip

        done = wait_archive(read, name=name, before=wait_from, on_poll=on_poll,
                            interval_s=self.arm.polling_interval_s,
                            timeout_s=self.archive_timeout_s)  # fmt: skip
        self.archived.add(name)
        step.status = "done"
        step.detail = step.detail or f"completed {done.completed or ''}".strip()

    def _delete_fs(self, step: Step) -> None:
        name, ops, call = step.resource.name, self.arm.lustre.aml_filesystems, self.arm.call
        fs = self._fs(name)
        if fs is None:
            step.status, step.detail = "already", "gone"
            return
        if self.report.dry_run:
            return
        if any(s.action == "archive" and s.resource.name == name for s in self.report.steps):
            if name not in self.archived:  # the order is the point: never without the archive
                raise ArchiveError(f"file system {name}: not deleted, its archive did not complete")
        if str((fs.get("properties") or {}).get("provisioningState")) == "Deleting":
            wait_gone(lambda: self._fs(name) is not None, name=f"file system {name}",
                      interval_s=self.arm.polling_interval_s)  # fmt: skip
            step.status, step.detail = "done", "waited for the delete an earlier run issued"
            return
        ops.begin_delete(self.group, name, **call).result()
        step.status = "done"


__all__ = ["Expired", "TeardownReport", "expired", "teardown"]
