"""The node's own markers, per boot on ``/run``: one place that the node set-up writing them
(``stoker.provision``'s cloud-init and ``node/stoker-node.sh``) and the readers (``stoker doctor``
in measure, ``stoker guard`` in operate) share. A root module because those packages may not
import one another.

- ``ready``: set-up and health passed; it holds the time (``date -u +%FT%TZ``).
- ``unhealthy``: a health check failed and the node drained itself; it holds the time and the
  reason on one line (``2026-01-02T03:04:05Z azurehpc-health-checks failed``). The node's health
  timer removes it once the checks pass again.

The folder is ``$STOKER_RUN`` where set (the variable ``stoker-node.sh`` reads, so tests and a
node's script agree), else ``/run/stoker``; each reader also takes it as a parameter.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ._redact import printable

RUN_DIR = "/run/stoker"
RUN_DIR_ENV = "STOKER_RUN"
NODE_READY = f"{RUN_DIR}/ready"
NODE_UNHEALTHY = f"{RUN_DIR}/unhealthy"
MARKER_MAX_BYTES = 4096  # a time and a reason; the rest of a longer file is not read


@dataclass(frozen=True)
class Marker:
    """One marker found: the file, the time it holds and (``unhealthy``) the reason."""

    path: str
    at: str  # as written, "" where the file holds none
    reason: str = ""

    def __str__(self) -> str:
        since = f" (since {self.at})" if self.at else ""
        return f"{self.reason or 'no reason given'}{since}"


def run_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The markers' folder: ``path``, else ``$STOKER_RUN``, else ``/run/stoker``."""
    return Path(path if path is not None else os.environ.get(RUN_DIR_ENV) or RUN_DIR)


def unhealthy(path: str | os.PathLike[str] | None = None) -> Marker | None:
    """The node's unhealthy marker in ``run_dir(path)``, or None when there is none. A marker
    that is there but cannot be read still marks the node: its presence is the evidence."""
    return _read(run_dir(path) / "unhealthy", with_reason=True)


def ready(path: str | os.PathLike[str] | None = None) -> Marker | None:
    """The node's ready marker in ``run_dir(path)``, or None when there is none."""
    return _read(run_dir(path) / "ready", with_reason=False)


def _read(file: Path, *, with_reason: bool) -> Marker | None:
    shown = printable(str(file), lines=False)
    try:
        # O_NONBLOCK: a FIFO left in the marker's place cannot hang the reader.
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        return Marker(shown, "", f"the marker is there but unreadable ({exc.strerror})")
    try:
        data = os.read(fd, MARKER_MAX_BYTES)
    except OSError as exc:
        return Marker(shown, "", f"the marker is there but unreadable ({exc.strerror})")
    finally:
        os.close(fd)
    # The script writes the reason; it is still shown on one line, control characters escaped.
    line = printable(data.decode("utf-8", errors="replace").strip(), lines=False)
    at, _, reason = line.partition(" ")
    if not with_reason:
        return Marker(shown, line)
    return Marker(shown, at, reason.strip())
