"""Progress of a copy: a rich bar (bytes, files, MB/s, ETA) on a terminal, JSON lines for
automation, or nothing (the Python API). The engine only calls these methods.

Copying starts while the source is still being listed, so the totals grow: ``grow`` adds each
listed batch's files and bytes to copy, and ``listed`` says the totals are final."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from .._redact import printable, shown


class Reporter:
    """Silent: what the Python API uses unless asked for more."""

    def start(self) -> None: ...
    def grow(self, files: int, nbytes: int) -> None: ...
    def listed(self) -> None: ...
    def advance(self, nbytes: int) -> None: ...
    def file_done(self) -> None: ...
    def note(self, message: str) -> None: ...
    def deleting(self, key: str) -> None:
        """``--delete`` is about to delete ``key`` from the destination."""

    def finish(self, summary: dict[str, Any]) -> None: ...
    def stop(self) -> None:
        """A run that failed: take the bar down, so the error prints on a line of its own."""


class JsonReporter(Reporter):
    """One JSON object per line on stdout: ``start``, ``progress`` at most once a second (its
    totals so far, and whether the listing is still running), ``listed`` with the final totals,
    ``delete`` (with its ``key``) as ``--delete`` deletes each file, then ``summary``."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s, self.files, self.bytes, self.total_files, self.total_bytes = (
            every_s,
            0,
            0,
            0,
            0,
        )
        self.last, self.listing, self.start_seen = 0.0, True, False
        self.t0 = time.perf_counter()

    def _emit(self, event: str, **data: Any) -> None:
        sys.stdout.write(json.dumps({"event": event, **data}) + "\n")
        sys.stdout.flush()

    def start(self) -> None:
        self.start_seen = True
        self._emit("start")

    def grow(self, files: int, nbytes: int) -> None:
        self.total_files += files
        self.total_bytes += nbytes

    def listed(self) -> None:
        self.listing = False
        self._emit("listed", files=self.total_files, bytes=self.total_bytes)

    def advance(self, nbytes: int) -> None:
        self.bytes += nbytes
        now = time.perf_counter()
        if now - self.last >= self.every_s:
            self.last = now
            self._progress(now)

    def _progress(self, now: float) -> None:
        self._emit(
            "progress",
            files=self.files,
            bytes=self.bytes,
            total_files=self.total_files,
            total_bytes=self.total_bytes,
            listing=self.listing,
            mb_per_s=round(self.bytes / max(now - self.t0, 1e-9) / 1e6, 1),
        )

    def file_done(self) -> None:
        self.files += 1

    def note(self, message: str) -> None:
        self._emit("error", message=message)

    def deleting(self, key: str) -> None:
        self._emit("delete", key=key)

    def finish(self, summary: dict[str, Any]) -> None:
        # The events say what the summary says: a name the listing refused is an error, as
        # one that failed to copy was (the terminal prints both), and the last progress is
        # the run's whole, however it ended. (A dry run prints its summary alone.)
        if self.start_seen:
            for problem in summary.get("refused", ()):
                self._emit("error", message=problem)
            self._progress(time.perf_counter())
        self._emit("summary", **summary)


def terminal_reporter(description: str) -> Reporter:
    """What the commands show: a bar on a terminal; elsewhere (a log, a pipe, where a bar's last
    frame is a wrapped, cut-off line) the notes and deletions as plain lines, without loading
    rich's progress machinery or updating a bar nobody sees once per file."""
    from rich.console import Console  # (its idea of a terminal: FORCE_COLOR, TTY_COMPATIBLE)

    return RichReporter(description) if Console(stderr=True).is_terminal else LineReporter()


class LineReporter(Reporter):
    """A bar's notes and deletions as plain lines on stderr; no bar."""

    def note(self, message: str) -> None:
        _line(f"! {message}")

    def deleting(self, key: str) -> None:
        _line(f"deleting {key}")


def _line(text: str) -> None:
    sys.stderr.write(printable(text) + "\n")  # a key holding ESC must not drive the terminal
    sys.stderr.flush()


class RichReporter(Reporter):
    def __init__(self, description: str) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self.console = Console(stderr=True)
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TextColumn("{task.fields[files]} files"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
            # Only on a terminal: piped, its last frame is a wrapped, cut-off line in the log
            # (the summary line says it all; --json is for machines).
            disable=not self.console.is_terminal,
        )
        self.files, self.total_files, self.total_bytes = 0, 0, 0
        self.description = shown(description)  # a URL's SAS must not reach the terminal
        self.listing = True
        self.task: Any = None

    def start(self) -> None:
        self.progress.start()
        self.task = self.progress.add_task(
            f"{self.description} (listing)", total=None, files=self._files()
        )

    def grow(self, files: int, nbytes: int) -> None:
        self.total_files += files
        self.total_bytes += nbytes
        self.progress.update(self.task, total=self.total_bytes, files=self._files())

    def listed(self) -> None:
        self.listing = False
        self.progress.update(
            self.task, description=self.description, total=self.total_bytes, files=self._files()
        )

    def _files(self) -> str:
        return f"{self.files}/{self.total_files}{'+' if self.listing else ''}"

    def advance(self, nbytes: int) -> None:
        if self.task is not None:
            self.progress.advance(self.task, nbytes)

    def file_done(self) -> None:
        self.files += 1
        if self.task is not None:
            self.progress.update(self.task, files=self._files())

    def note(self, message: str) -> None:
        from rich.markup import escape  # keys and messages may hold brackets

        self.progress.console.print(f"[yellow]![/] {escape(printable(message))}", highlight=False)

    def deleting(self, key: str) -> None:
        self.progress.console.print(
            f"deleting {printable(key)}", highlight=False, markup=False, soft_wrap=True
        )

    def finish(self, summary: dict[str, Any]) -> None:
        self.progress.stop()

    def stop(self) -> None:
        if self.progress.live.is_started:  # a failed run: the bar goes, the error stands alone
            self.progress.live.transient = True
        self.progress.stop()  # (shows the cursor again; stopping twice is harmless)
