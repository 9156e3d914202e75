"""What keeps a run from hurting what is already there: one run per destination at a time,
a destination whose folder exists, and the errors of stoker's own state (its manifest and its
lock) said as a user can act on them.

Concurrent runs. A run takes an ``fcntl.flock`` on a lock file next to its manifest: in
``DST/.stoker/lock`` for a local destination, else ``lock-<hash of the destination>`` in the
state folder (``--state-dir``, or ``~/.cache/stoker/stage/``; so two machines staging into one
Blob prefix do not see each other's lock). A run of the whole dataset holds it exclusively; a
run of one share (``--world-size`` above 1) holds it shared, plus its share's own lock
exclusively, so the ranks of one job stage side by side into one shared folder while a second
run of the same share, or of the whole, is refused. The holder writes its host, PID and start
time into the file, and the refusal names them. The kernel releases a flock when its process
ends, however it ends: a lock never outlives a crashed run. A file system without flock (some
NFS and Lustre mounts: ``ENOLCK``, ``EOPNOTSUPP``) runs unlocked, with a note.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from .. import _flock
from ..errors import StageError

try:
    import fcntl
except ImportError:  # (not on Windows: runs there are not locked)
    fcntl = None  # type: ignore[assignment]

_FULL = (errno.ENOSPC, errno.EDQUOT)
_SQLITE_FULL, _SQLITE_IOERR, _SQLITE_READONLY, _SQLITE_BUSY = 13, 10, 8, 5


def check_parent(root: Path) -> None:
    """A local destination may be created, but its parent folder must exist: a mistyped path,
    or a file system that is not mounted, must not become a new tree on the root disk."""
    if root.exists():
        if not root.is_dir():
            raise StageError(
                f"the destination {root} is a file: the destination must be a folder this "
                "user can write (it is made if missing); nothing was copied"
            )
        return
    parent = root.parent
    if not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist"
        raise StageError(
            f"the destination's folder {parent} {what}: create it first (mkdir -p {parent}) or "
            "check the path (is its file system mounted?); nothing was copied"
        )


def check_writable(root: Path) -> None:
    """Stop at once, with one error, when the destination folder (or the folder it will be
    made in) cannot be written: read-only, or not this user's to write. Otherwise every file
    would fail alike."""
    here = root
    while not here.exists() and here.parent != here:
        here = here.parent
    if _read_only(here):
        raise StageError(
            f"the destination {root} is on a read-only file system: remount it read-write or "
            "pick another destination; nothing was copied"
        )
    if not os.access(here, os.W_OK | os.X_OK):
        raise StageError(
            f"permission denied: this user (uid {os.getuid()}) may not write into {here}; fix "
            "its permissions, run as its owner, or pick another destination; nothing was copied"
        )


def _free_bytes(path: Path) -> int | None:
    while not path.exists() and path.parent != path:
        path = path.parent
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _read_only(path: Path) -> bool:
    while not path.exists() and path.parent != path:
        path = path.parent
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def state_error(
    path: Path,
    exc: BaseException,
    what: str = "the job's manifest",
    elsewhere: str = "pass --state-dir DIR on another file system",
) -> StageError:
    """``exc`` (an OSError or a sqlite3.Error) met keeping stoker's state at ``path``, as one
    StageError that says what to do (``elsewhere``: how to keep it somewhere else). SQLite
    reports a full disk as SQLITE_FULL, or, when the write that failed was its journal's, as a
    bare I/O error: the free space decides."""
    code = getattr(exc, "sqlite_errorcode", None)
    code = code & 0xFF if isinstance(code, int) else None
    errno_ = exc.errno if isinstance(exc, OSError) else None
    free = _free_bytes(path)
    nearly_full = free is not None and free < (1 << 20)
    if errno_ in _FULL or code == _SQLITE_FULL or (code == _SQLITE_IOERR and nearly_full):
        return StageError(
            f"no space left for {what} at {path}: free space there, or {elsewhere}; files "
            "already copied are kept and the same command continues from here"
        )
    if errno_ == errno.EROFS or code == _SQLITE_READONLY or _read_only(path):
        return StageError(
            f"{path.parent} is on a read-only file system, and {what} must be written there: "
            f"{elsewhere}"
        )
    if errno_ in (errno.EACCES, errno.EPERM):
        return StageError(
            f"permission denied writing {what} at {path}: this user (uid {os.getuid()}) may not "
            f"write there; fix the folder's permissions, or {elsewhere}"
        )
    if code == _SQLITE_BUSY:
        return StageError(
            f"{what} at {path} is held by another process: wait for the other stoker run to "
            "end (or stop it), then run this again"
        )
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return StageError(
        f"cannot keep {what} at {path} ({reason}): {path.parent} must be a folder this user "
        f"can write, or {elsewhere}"
    )


def lock_name(dst: str, local_default: bool) -> str:
    """``lock`` in a local destination's own state folder; elsewhere one per destination."""
    if local_default:
        return "lock"
    return "lock-" + hashlib.blake2b(dst.encode(), digest_size=8).hexdigest()


@contextlib.contextmanager
def destination_lock(
    folder: Path, name: str, dst: str, share: tuple[int, int], notes: list[str]
) -> Iterator[None]:
    """Hold the destination's lock (see the module doc) for the ``with`` block; raise a
    StageError naming the holder if another run has it."""
    if fcntl is None:
        yield
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise state_error(folder / name, exc, "the run's lock") from exc
    rank, world = share
    wanted = (
        [(folder / name, fcntl.LOCK_EX)]
        if world == 1
        else [(folder / name, fcntl.LOCK_SH), (folder / f"{name}.{rank}-of-{world}", fcntl.LOCK_EX)]
    )
    held: list[int] = []
    try:
        for path, mode in wanted:
            fd = _take(path, mode, dst, rank, world, notes)
            if fd is None:  # no flock here: unlocked, as said
                break
            held.append(fd)
        yield
    finally:
        for fd in reversed(held):
            os.close(fd)  # (closing releases the flock)


def _take(path: Path, mode: int, dst: str, rank: int, world: int, notes: list[str]) -> int | None:
    try:
        fd = _flock.take(path, shared=mode == fcntl.LOCK_SH)
    except _flock.Held as held:
        share = f" (share {rank} of {world})" if mode == fcntl.LOCK_EX and world > 1 else ""
        raise StageError(
            f"another stoker run{held.holder} is copying into {dst}{share}: wait for it to end, "
            f"or stop it, then run this again (its lock: {path})"
        ) from None
    except OSError as exc:
        raise state_error(path, exc, "the run's lock") from exc
    if fd is None:
        notes.append(
            f"{path.parent}'s file system has no flock: this run is not locked against "
            "another one into the same destination"
        )
    return fd
