"""A file made only where none is, and whole (a checkpoint prefix's claim, ``create_bytes``):
the data is written and synced beside the name, then hard-linked to it, since link(2) fails if
the name exists on every file system that has links (NFS included). Where links are not offered
(SMB), O_EXCL creates the name and the data follows: a reader may briefly see it empty."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from ._posix import fsync_dir
from ._safety import PARTIAL_SUFFIX


def create_once(path: Path, data: bytes) -> bool:
    """True if ``path`` was made with ``data``; False if something was there already."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}{PARTIAL_SUFFIX}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            return _create_exclusive(path, data)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    fsync_dir(path.parent)
    return True


def _create_exclusive(path: Path, data: bytes) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(path.parent)
    return True
