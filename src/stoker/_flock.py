"""An exclusive ``fcntl.flock`` that names its holder: one writer at a time, refused (not
waited for) with the host, PID and start time of the process that has it.

The kernel releases a flock when its process ends, however it ends, so a lock never outlives
a crashed run. A file system without flock (some NFS and Lustre mounts) gives no lock: the
caller is told (``None``) and says so.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # (not on Windows: nothing is locked there)
    fcntl = None  # type: ignore[assignment]

NO_FLOCK = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


class Held(Exception):
    """Another process holds the lock; ``holder`` reads `` (PID 123 on host, since ...)``."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"{path} is held{holder}")
        self.path, self.holder = path, holder


def take(path: Path, *, shared: bool = False, wait: bool = False) -> int | None:
    """The lock's file descriptor (close it to release), or None where there is no flock.
    ``shared``: one of many readers' (LOCK_SH) rather than the one writer's. ``wait``: block
    until it is free, instead of raising ``Held`` when another process has it. Raises
    ``OSError`` when the file cannot be made."""
    if fcntl is None:
        return None
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        held = lock_fd(fd, shared=shared, wait=wait)
    except BlockingIOError:
        holder = holder_of(fd)
        os.close(fd)
        raise Held(path, holder) from None
    except OSError:
        os.close(fd)
        raise
    if not held:
        os.close(fd)
        return None
    if wait:
        return fd  # a waiter is never refused, so nobody reads who holds it
    me = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": int(time.time())})
    with contextlib.suppress(OSError):  # (who holds it is a courtesy, not the lock)
        os.ftruncate(fd, 0)
        os.pwrite(fd, me.encode(), 0)
    return fd


def lock_fd(fd: int, *, shared: bool = False, wait: bool = False) -> bool:
    """flock an open descriptor (a folder's too): True if held, False where there is no flock
    (no fcntl, or a file system without it). Raises ``BlockingIOError`` when another process
    holds it and ``wait`` is off."""
    if fcntl is None:
        return False
    mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB)
    try:
        fcntl.flock(fd, mode)
    except BlockingIOError:
        raise
    except OSError as exc:
        if exc.errno in NO_FLOCK:
            return False
        raise
    return True


def holder_of(fd: int) -> str:
    """`` (PID 123 on host, since 10:02:03 UTC)`` from a lock file, or ``""``."""
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        since = time.strftime("%H:%M:%S UTC", time.gmtime(int(info["since"])))
        return f" (PID {int(info['pid'])} on {info['host']}, since {since})"
    except (OSError, ValueError, KeyError, TypeError):
        return ""
