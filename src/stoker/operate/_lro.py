"""Waiting on Azure operations that the SDK's pollers do not cover.

The AMLFS ``archive`` action is not a long-running operation: ``POST .../archive`` answers 200
with no body, and its progress shows only in the file system's
``properties.hsm.archiveStatus``, one entry per archived path with ``status.state`` one of
NotConfigured, Idle, InProgress, FSScanInProgress, Cancelling, Completed, Failed, Canceled
(azure-rest-api-specs StorageCache 2026-01-01, amlfilesystem.json). ``wait_archive`` polls it.

An earlier run may also have left a delete in flight (``provisioningState: Deleting``); there is
no operation URL to poll then, so ``wait_gone`` reads the resource until it answers 404.

Both take the read as a function and the clock and sleep as arguments, so tests drive them
without a server or real time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ArchiveError, TeardownError

RUNNING = {"InProgress", "FSScanInProgress", "Cancelling"}
FAILED = {"Failed", "Canceled"}


@dataclass(frozen=True)
class ArchiveState:
    """The archive of one path, as the file system reports it."""

    state: str  # "" when the file system has no archive entry for the path
    percent: int | None = None
    started: str | None = None  # lastStartedTime as ARM wrote it
    completed: str | None = None
    error_code: str | None = None
    error_message: str | None = None

    @classmethod
    def of(cls, filesystem: dict[str, Any], path: str = "/") -> ArchiveState:
        """Read the entry for ``path`` out of a file system's GET body (camelCase)."""
        hsm = (filesystem.get("properties") or {}).get("hsm") or {}
        for entry in hsm.get("archiveStatus") or []:
            if (entry.get("filesystemPath") or "/") == path:
                s = entry.get("status") or {}
                return cls(
                    str(s.get("state") or ""),
                    s.get("percentComplete"),
                    _text(s.get("lastStartedTime")),
                    _text(s.get("lastCompletionTime")),
                    s.get("errorCode"),
                    s.get("errorMessage"),
                )
        return cls("")

    def why(self) -> str:
        parts = [p for p in (self.error_code, self.error_message) if p]
        return ": ".join(parts) if parts else "Azure gave no reason"


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def wait_archive(
    read: Callable[[], ArchiveState],
    *,
    name: str,
    before: ArchiveState | None = None,
    interval_s: float = 30.0,
    timeout_s: float = 24 * 3600.0,
    on_poll: Callable[[ArchiveState], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> ArchiveState:
    """Poll ``read`` until the archive of file system ``name`` has completed; return its state.

    ``before`` is the entry as it was before this run asked for an archive: a ``Completed``
    entry with the same start time is that older archive, not ours, and is waited past. Raises
    ``ArchiveError`` when the archive fails or is cancelled (the file system is then left in
    place) and ``TeardownError`` after ``timeout_s`` (a re-run waits on the same archive).
    """
    deadline = clock() + timeout_s
    while True:
        state = read()
        if on_poll is not None:
            on_poll(state)
        if state.state in RUNNING:
            before = None  # ours is running: whatever ends it next is ours
        stale = before is not None and state.started == before.started and before.state != ""
        if state.state == "Completed" and not stale:
            return state
        if state.state in FAILED and not stale:
            raise ArchiveError(
                f"the archive of file system {name} to Blob {state.state.lower()} "
                f"({state.why()}); the file system was NOT deleted and still holds the data. "
                "Fix the cause (the Blob container's role assignments, an import job still "
                "running), then run teardown again: it archives what is still missing"
            )
        if state.state in ("NotConfigured",):
            raise ArchiveError(
                f"file system {name} has no Blob integration (archive status NotConfigured): "
                "there is nowhere to archive to; copy its data out (`stoker stage`) and run "
                "teardown with --no-archive to delete it anyway"
            )
        if clock() >= deadline:
            raise TeardownError(
                f"the archive of file system {name} is still {state.state or 'not started'} "
                f"after {timeout_s:.0f} s ({state.percent or 0} %); it goes on in Azure. Run "
                "teardown again to keep waiting; the file system is deleted only once it completes"
            )
        sleep(interval_s)


def wait_gone(
    exists: Callable[[], bool],
    *,
    name: str,
    interval_s: float = 30.0,
    timeout_s: float = 3 * 3600.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Poll until ``exists()`` is False (the resource answers 404)."""
    deadline = clock() + timeout_s
    while exists():
        if clock() >= deadline:
            raise TeardownError(
                f"{name} is still being deleted after {timeout_s:.0f} s; it goes on in Azure. "
                "Run teardown again to keep waiting"
            )
        sleep(interval_s)
