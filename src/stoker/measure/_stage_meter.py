"""A stage's progress as counters for the exporter: pass ``StageMeter()`` as ``stage(...,
reporter=)`` (wrapping the bar or JSON reporter you would have used) and ``serve(stage=meter)``."""

from __future__ import annotations

from typing import Any

from ..stage import Reporter


class StageMeter(Reporter):
    """Counts bytes and files as the engine reports them, and passes every call on."""

    def __init__(self, inner: Reporter | None = None) -> None:
        self.inner = inner or Reporter()
        self.bytes_done = self.files_done = self.bytes_planned = 0

    def start(self) -> None:
        self.inner.start()

    def grow(self, files: int, nbytes: int) -> None:
        self.bytes_planned += nbytes
        self.inner.grow(files, nbytes)

    def listed(self) -> None:
        self.inner.listed()

    def advance(self, nbytes: int) -> None:
        self.bytes_done += nbytes  # one int add under the GIL: read whole by a scrape
        self.inner.advance(nbytes)

    def file_done(self) -> None:
        self.files_done += 1
        self.inner.file_done()

    def note(self, message: str) -> None:
        self.inner.note(message)

    def deleting(self, key: str) -> None:
        self.inner.deleting(key)

    def finish(self, summary: dict[str, Any]) -> None:
        self.inner.finish(summary)

    def stop(self) -> None:
        self.inner.stop()
