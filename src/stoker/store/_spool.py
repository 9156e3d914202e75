"""Where a copy between two object stores that the service cannot copy holds each object on its
way: a folder next to the job's manifest, not /tmp. Each run's files sit in a folder named by
host and process, so a later run finds what a killed run (``kill -9``, no cleanup) left and
removes it, and never touches a live run's files."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _prefix(pid: int) -> str:
    return f"{socket.gethostname()}-{pid}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def clear_stale(root: Path) -> None:
    """Remove the spool folders of this host's runs that are no longer running."""
    host = socket.gethostname()
    for folder in root.glob(f"{host}-*-*") if root.is_dir() else ():
        pid = folder.name[len(host) + 1 :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def spool_folder(root: Path) -> Iterator[Path]:
    """A fresh folder for one object, removed when it has gone up."""
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=_prefix(os.getpid()), dir=root) as folder:
        yield Path(folder)
