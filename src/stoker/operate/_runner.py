"""Running teardown's steps against ARM: each step reads its resource first (idempotent,
resumable), and every mutating call (deallocate, delete, archive) is preceded by a fresh GET
that proves the resource still carries the deployment's ``stoker-deployment-id``; one whose tag
changed since the inventory is not touched. A file system is archived and deleted only once
every compute resource that may mount it (the template's scale sets, and every scale set or VM
in the group carrying the deployment's id, e.g. CycleCloud node arrays) is deallocated or gone.
A dry run makes the same reads and records what it saw."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ArchiveError, TeardownError
from ..provision.tags import TAG_DEPLOYMENT
from ._lro import ArchiveState, wait_archive, wait_gone
from ._ownership import Foreign
from ._steps import AMLFS, VM, VMSS, Resource, Step

Progress = Callable[[dict[str, Any]], None]


def list_group(arm: Any, group: str) -> list[Resource]:
    """Every resource in ``group`` with its tags; [] when the group is gone."""
    from ._arm import not_found, translate

    try:
        return [
            Resource(r.type, r.name, dict(r.tags or {}), r.id, group)
            for r in arm.resources.resources.list_by_resource_group(group, **arm.call)
        ]
    except Exception as exc:  # noqa: BLE001 - SDK and credential errors, translated
        if not_found(exc):
            return []  # the group is gone: so is everything in it
        raise translate(exc, f"listing resource group {group}") from exc


class Runner:
    def __init__(self, arm: Any, report: Any, progress: Progress, *, archive_timeout_s: float,
                 skip_foreign: bool, template_scale_sets: set[str]) -> None:  # fmt: skip
        self.arm, self.report, self.emit = arm, report, progress
        self.group: str = report.group
        self.deployment_id: str | None = report.deployment_id
        self.archive_timeout_s = archive_timeout_s
        self.skip_foreign = skip_foreign
        self.template_scale_sets = {n.lower() for n in template_scale_sets}
        self.archived: set[str] = set()  # file systems whose archive completed in this run
        self.skipped: set[tuple[str, str]] = set()  # (kind, name) found foreign mid-run

    def run(self) -> None:
        for step in self.report.steps:
            if step.action == "keep":
                step.status = "kept"
                step.live = "listed in the group" if step.resource.id else "not found"
                continue
            r = step.resource
            if (r.kind, r.name.lower()) in self.skipped:
                step.status, step.detail = "skipped", "not stoker's: left alone"
                continue
            self.emit({"event": "step", "action": step.action, "name": r.name,
                       "status": "checking"})  # fmt: skip
            try:
                self._one(step)
            except Exception as exc:
                step.status = "failed"
                step.detail = str(exc) if isinstance(exc, TeardownError) else type(exc).__name__
                if isinstance(exc, TeardownError):
                    exc.report = self.report  # type: ignore[attr-defined]
                    raise
                from ._arm import translate

                err = translate(exc, f"{step.action} {r.name}")
                err.report = self.report  # type: ignore[attr-defined]
                raise err from exc
            self.emit({"event": "step", "action": step.action, "name": r.name,
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
        from ._arm import not_found

        try:
            return read().as_dict()
        except Exception as exc:  # noqa: BLE001 - 404 is an answer here
            if not_found(exc):
                return None
            raise

    # ------------------------------------------------------------------ ownership

    def _read(self, r: Resource) -> dict[str, Any] | None:
        if r.kind == VMSS:
            ops, call = self.arm.compute.virtual_machine_scale_sets, self.arm.compute_call
            return self._get(lambda: ops.get(self.group, r.name, **call))
        return self._fs(r.name)

    def _proven(self, step: Step) -> bool:
        """A fresh GET right before a mutating call: True when the resource still carries the
        deployment's id. A resource gone meanwhile is a done step; one whose tag changed is
        left alone (and stops the run unless foreign resources are to be skipped)."""
        r = step.resource
        body = self._read(r)
        if body is None:
            step.status, step.detail, step.live = "already", "gone", "gone"
            return False
        found = (body.get("tags") or {}).get(TAG_DEPLOYMENT)
        if self.deployment_id and found == self.deployment_id:
            step.owned = True
            return True
        step.owned, step.status = False, "skipped"
        step.detail = f"not stoker's: its {TAG_DEPLOYMENT} is now {found or 'gone'}; left alone"
        self.skipped.add((r.kind, r.name.lower()))
        self.report.foreign.append(Foreign(r, found))
        if self.skip_foreign:
            return False
        raise TeardownError(
            f"{r.label} {r.name} in {self.report.where()}: not touched, its {TAG_DEPLOYMENT} "
            f"changed to {found or 'none'} (not {self.deployment_id}) since teardown listed "
            "the group; it is no longer provably this deployment's. Pass --skip-foreign to "
            "leave it alone and go on"
        )

    # ------------------------------------------------------------------ scale sets

    def _scale_set(self, step: Step) -> None:
        ops, name = self.arm.compute.virtual_machine_scale_sets, step.resource.name
        call = self.arm.compute_call
        if self._get(lambda: ops.get(self.group, name, **call)) is None:
            step.status, step.detail, step.live = "already", "gone", "gone"
            return
        power = self._power(name) or {}
        step.live = ", ".join(f"{k} {v}" for k, v in power.items()) or "no VMs"
        if step.action == "deallocate":
            if power and set(power) == {"deallocated"}:
                step.status, step.detail = "already", "every VM deallocated"
                return
            if self.report.dry_run:
                step.detail = step.live
                return
            if power and set(power) <= {"deallocated", "deallocating"}:
                # An earlier run's deallocate is still under way: asking again would conflict.
                wait_gone(lambda: set(self._power(name) or {}) != {"deallocated"},
                          name=f"scale set {name} (deallocating)",
                          interval_s=self.arm.polling_interval_s)  # fmt: skip
                step.status, step.detail = "done", "waited for the deallocation under way"
                return
            if not self._proven(step):
                return
            ops.begin_deallocate(self.group, name, **call).result()
        else:
            if self.report.dry_run or not self._proven(step):
                return
            ops.begin_delete(self.group, name, **call).result()
        step.status = "done"

    def _power(self, name: str) -> dict[str, int] | None:
        """VM counts by power state ("running", "deallocated", ...) from the instance view;
        None when the scale set is gone."""
        ops, call = self.arm.compute.virtual_machine_scale_sets, self.arm.compute_call
        view = self._get(lambda: ops.get_instance_view(self.group, name, **call))
        if view is None:
            return None
        return _counts((view.get("virtualMachine") or {}).get("statusesSummary") or [])

    def _vm_power(self, name: str) -> dict[str, int] | None:
        ops, call = self.arm.compute.virtual_machines, self.arm.compute_call
        view = self._get(lambda: ops.instance_view(self.group, name, **call))
        if view is None:
            return None
        return _counts([{**s, "count": 1} for s in view.get("statuses") or []])

    def _in_use(self, *, stopping: set[str]) -> list[str]:
        """The compute resources that may mount the deployment's file systems and are not
        deallocated: the template's scale sets and every scale set or VM in the group that
        carries the deployment's id, read afresh; those named in ``stopping`` (a dry run's
        planned stops) are left out."""
        users = []
        for r in list_group(self.arm, self.group):
            name = r.name.lower()
            ours = bool(self.deployment_id) and r.tags.get(TAG_DEPLOYMENT) == self.deployment_id
            if name in stopping or r.kind not in (VMSS, VM):
                continue
            if not ours and not (r.kind == VMSS and name in self.template_scale_sets):
                continue
            power = self._power(r.name) if r.kind == VMSS else self._vm_power(r.name)
            if power is None or (power and set(power) == {"deallocated"}):
                continue  # gone, or every VM deallocated
            if r.kind == VMSS and not power:
                continue  # no VMs at all
            state = ", ".join(f"{k} {v}" for k, v in power.items()) or "power state unknown"
            users.append(f"{r.label} {r.name} ({state})")
        return users

    def _check_unmounted(self, step: Step) -> bool:
        """Nothing that may mount the file system still runs; a dry run notes what would stop
        it, a real run refuses (before the archive, since writers make it incomplete, and
        again before the delete)."""
        stopping = set()
        if self.report.dry_run:
            stopping = {s.resource.name.lower() for s in self.report.steps
                        if s.resource.kind == VMSS and s.action in ("deallocate", "delete")
                        and s.owned is not False}  # fmt: skip
        users = self._in_use(stopping=stopping)
        if not users:
            return True
        name = step.resource.name
        if self.report.dry_run:
            step.detail = f"would refuse: still running: {', '.join(users)}"
            return False
        raise TeardownError(
            f"file system {name} in {self.report.where()}: not {step.action}d, it may still be "
            f"mounted by {', '.join(users)}; deallocate or delete them first (teardown stops "
            "only the scale sets its template names), then run it again"
        )

    # ------------------------------------------------------------------ Managed Lustre

    def _fs(self, name: str) -> dict[str, Any] | None:
        ops = self.arm.lustre.aml_filesystems
        return self._get(lambda: ops.get(self.group, name, **self.arm.call))

    def _archive(self, step: Step) -> None:
        name, ops, call = step.resource.name, self.arm.lustre.aml_filesystems, self.arm.call
        fs = self._fs(name)
        if fs is None:
            step.status, step.detail, step.live = "already", "file system gone", "gone"
            return
        props = fs.get("properties") or {}
        before = ArchiveState.of(fs)
        step.live = f"{props.get('provisioningState')}; last archive {before.state or 'none'}"
        if str(props.get("provisioningState")) == "Deleting":
            step.status, step.detail = "already", "a delete is in flight (an earlier run archived)"
            self.archived.add(name)
            return
        if not (props.get("hsm") or {}).get("settings"):
            raise ArchiveError(
                f"file system {name} has no Blob integration (no hsm settings): there is "
                "nowhere to archive to; copy its data out (`stoker stage`), then run teardown "
                "with --no-archive to delete it anyway"
            )
        if not self._check_unmounted(step) or self.report.dry_run:
            step.detail = step.detail or f"last archive: {before.state or 'none'}"
            return
        if before.state in ("InProgress", "FSScanInProgress", "Cancelling"):
            step.detail, wait_from = "an archive was already running: waited for it", None
        else:
            if not self._proven(step):
                return
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
            step.status, step.detail, step.live = "already", "gone", "gone"
            return
        props = fs.get("properties") or {}
        step.live = str(props.get("provisioningState"))
        if self.report.dry_run:
            self._check_unmounted(step)
            return
        if any(s.action == "archive" and s.resource.name == name for s in self.report.steps):
            if name not in self.archived:  # the order is the point: never without the archive
                raise ArchiveError(f"file system {name}: not deleted, its archive did not complete")
        if str(props.get("provisioningState")) == "Deleting":
            wait_gone(lambda: self._fs(name) is not None, name=f"file system {name}",
                      interval_s=self.arm.polling_interval_s)  # fmt: skip
            step.status, step.detail = "done", "waited for the delete an earlier run issued"
            return
        self._check_unmounted(step)
        if not self._proven(step):
            return
        ops.begin_delete(self.group, name, **call).result()
        step.status = "done"


def _counts(statuses: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in statuses:
        code = str(s.get("code", "")).lower()
        if code.startswith("powerstate/"):
            key = code.removeprefix("powerstate/")
            out[key] = out.get(key, 0) + int(s.get("count") or 0)
    return out
