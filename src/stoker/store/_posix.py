"""A POSIX directory as a store: Lustre, NetApp or Azure Files mounts, local NVMe.

Writes never show a partial file at its final path: data goes to ``NAME.stoker-partial`` in the
same directory, is fsynced, then renamed over the final name, and the directory is fsynced.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import re
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from .._libc import LIBC
from ..errors import StageError, StokerError, StoreError
from ._base import ObjectInfo, Store
from ._posix_tree import TreeListing
from ._safety import PARTIAL_SUFFIX, SafeRoot, check_key


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_LIBC = LIBC


def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    call = getattr(_LIBC, "sync_file_range", None)  # Linux only
    if call is not None:
        call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    return call


_SYNC_FILE_RANGE = _sync_file_range()
_SYNC_FILE_RANGE_WRITE = 2

# Local file systems whose syncfs(2) makes every file's data and metadata durable, as fsync of
# each would (statfs f_type magic numbers): ext4, XFS, btrfs, F2FS, tmpfs. Network and FUSE
# file systems (NFS, Lustre, SMB, blobfuse) are left out: their syncfs need not reach the server.
_WHOLE_SYNC_FS = {0xEF53, 0x58465342, 0x9123683E, 0xF2F52010, 0x01021994}


def fs_type(path: Path) -> int | None:
    """The statfs(2) f_type of the file system holding ``path`` (its nearest existing
    ancestor), or None where the call does not exist."""
    statfs = getattr(_LIBC, "statfs", None)
    if statfs is None:
        return None
    buf = ctypes.create_string_buffer(256)  # struct statfs; f_type is its first field (a long)
    while not path.exists() and path.parent != path:
        path = path.parent
    if statfs(os.fsencode(path), buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value


def syncs_as_a_whole(path: Path) -> bool:
    """Whether one syncfs(2) can stand for an fsync of every file written under ``path``:
    a local file system, on Linux 5.8 or later (before it, syncfs did not report a failed
    writeback, where fsync would)."""
    return (
        hasattr(_LIBC, "syncfs")
        and _release_at_least(os.uname().release, (5, 8))
        and fs_type(path) in _WHOLE_SYNC_FS
    )


def _release_at_least(release: str, wanted: tuple[int, int]) -> bool:
    """``release`` ("6.8.0-45-generic") is at least ``wanted`` (major, minor)."""
    parts = re.match(r"(\d+)\.(\d+)", release)
    return bool(parts) and (int(parts[1]), int(parts[2])) >= wanted


def syncfs(fd: int) -> None:
    """Write out and wait for everything dirty on ``fd``'s file system; since Linux 5.8 a
    failed writeback of any file on it is reported here."""
    assert _LIBC is not None  # (only called where syncs_as_a_whole said so)
    if _LIBC.syncfs(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


# A whole file written in order goes into the page cache WRITE_PIECE at a time. A write's
# length sets the size of the page-cache folio the kernel allocates for it (ext4 on Linux 6.x):
# a 1 MiB write takes a 1 MiB block of free memory, which on a VM that hands free memory back
# to its host (free page reporting) is memory the host must supply again, page by page. Small
# writes take small folios, which come from fragments the kernel never reports: 32 KiB writes
# (as rclone writes) cost the least system time. A large file's ranges go whole (1 MiB
# pieces): there the smaller folios cost more than they saved. (Figures:
# docs/stage-cpu-notes.md, "The size of a write".)
WRITE_PIECE = 32 << 10


def write_all(
    fd: int, data: bytes | memoryview, offset: int | None = None, *, step: int | None = None
) -> None:
    """Write all of ``data`` at ``offset`` (None: at the file's position), ``step`` bytes a
    call (None: as much as the kernel takes). A write may write less than it was given (a disk
    filling up): the rest is written, or the error raised, instead of a hole left in the file
    (with the last piece of a file, nothing later would have failed)."""
    view, done = memoryview(data).cast("B"), 0
    step = step or len(view)
    while done < len(view):
        part = view[done : done + step]
        written = os.write(fd, part) if offset is None else os.pwrite(fd, part, offset + done)
        if written == 0:  # (not seen on a regular file; never loop forever on it)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        done += written


def start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Ask the kernel to start writing ``[offset, offset + nbytes)`` to disk now, without
    waiting. The final fsync then finds little left to write: the disk works while the network
    does, instead of after it. A no-op where
    the call does not exist."""
    if _SYNC_FILE_RANGE is not None:
        _SYNC_FILE_RANGE(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)


def disk_error(exc: OSError, path: Path | str) -> StokerError:
    """A full, read-only or forbidden disk stops the whole copy (StageError: every file would
    fail alike, and it is said once); other errors concern one file."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StageError(
            f"no space left writing {path}: free space or pick another destination; "
            "files already copied are kept and a re-run continues from here"
        )
    if exc.errno == errno.EROFS:
        return StageError(
            f"cannot write {path}: the file system is read-only; remount it read-write or "
            "pick another destination"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return StageError(
            f"permission denied writing {path}: this user (uid {os.getuid()}) may not write "
            "there; fix the folder's permissions or pick another destination"
        )
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return StageError(
            f"too many open files writing {path}: lower --concurrency, or raise the limit "
            "(ulimit -n); files already copied are kept and a re-run continues from here"
        )
    return StoreError(f"cannot write {path}: {exc.strerror or exc}")


COPY_PIECE = 16 << 20


def copy_range(src: int, dst: int, size: int, limiter: Any = None) -> None:
    """Copy ``size`` bytes in the kernel (copy_file_range; reflinks where the FS has them), in
    pieces whose writeback starts as each is copied; ``limiter`` (a run's --bwlimit) takes
    each piece before it is copied."""
    done = 0
    try:
        while done < size:
            if limiter is not None:
                limiter.take_blocking(min(COPY_PIECE, size - done))
            n = os.copy_file_range(src, dst, min(COPY_PIECE, size - done), done, done)
            if n == 0:
                break
            if size > COPY_PIECE:  # (one piece is fsynced at once anyway)
                start_writeback(dst, done, n)
            done += n
    except OSError as exc:
        if exc.errno not in (18, 38, 95):  # EXDEV, ENOSYS, EOPNOTSUPP: copy by hand instead
            raise
        os.lseek(src, done, 0)
        os.lseek(dst, done, 0)
        with os.fdopen(os.dup(src), "rb") as fsrc, os.fdopen(os.dup(dst), "wb") as fdst:
            shutil.copyfileobj(fsrc, fdst, 8 << 20)


def create_partial_at(final: str) -> int:
    """A writable fd on a fresh, empty partial file for ``final`` (a checked path), for a file
    written whole (no resume). The folder is made only when the open finds it missing: one
    system call per small file instead of three."""
    partial = final + PARTIAL_SUFFIX
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        try:
            return os.open(partial, flags, 0o644)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(partial), exist_ok=True)
            return os.open(partial, flags, 0o644)
    except OSError as exc:
        raise disk_error(exc, partial) from exc


def publish_at(final: str, fd: int, *, sync: bool = True, sync_dir: bool = True) -> str:
    """fsync the partial file of ``final`` (a checked path), rename it to ``final``, fsync the
    directory (unless the caller syncs it later, once for many files); closes ``fd``. If the
    fsync or the rename fails the partial file is removed: after a failed fsync its pages may
    be gone, so the next run must write it again anyway. ``sync=False`` is for a caller that
    made the data durable already (a group's syncfs)."""
    partial = final + PARTIAL_SUFFIX
    try:
        try:
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(partial, final)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise disk_error(exc, final) from exc
    try:
        if sync and sync_dir:
            fsync_dir(Path(final).parent)
    except OSError as exc:
        raise disk_error(exc, final) from exc
    return final


class PosixStore(Store):
    """``follow_symlinks`` (a source's, for ``--follow-symlinks``): the listing takes what
    symbolic links point to, files and folders, as if they were there; without it links are
    skipped, and counted (see _posix_tree.py)."""

    def __init__(self, root: Path, *, follow_symlinks: bool = False) -> None:
        self.root = root
        self._root = str(root)
        self._safe = SafeRoot(self._root)
        self.follow_symlinks = follow_symlinks
        self._tree: TreeListing | None = None  # the last listing (what it said of links)

    exact_times = True  # (mtime_ns in the ETag)

    def __str__(self) -> str:
        return str(self.root)

    @property
    def local_root(self) -> Path:
        return self.root

    def local_path(self, key: str) -> Path:
        return self.path(key)

    def modified(self, obj: ObjectInfo) -> float | None:
        """A POSIX ETag is ``mtime_ns:size``."""
        if obj.mtime is not None:
            return obj.mtime
        with contextlib.suppress(ValueError):
            return int(obj.etag.partition(":")[0]) / 1e9
        return None

    def sync_folders(self, folders: set[str]) -> None:
        for folder in folders:
            try:
                fsync_dir(self.root.joinpath(*folder.split("/")) if folder else self.root)
            except FileNotFoundError:  # removed meanwhile (a relay's spool): nothing to keep
                pass

    def file(self, key: str) -> str:
        """The checked path of ``key`` as a string (see SafeRoot). A source that follows
        symbolic links reads where they lead, inside the root or not (it is never written)."""
        if self.follow_symlinks:
            check_key(key)
            return f"{self._root.rstrip('/')}/{key}"
        return self._safe.file(key)

    def path(self, key: str) -> Path:
        return Path(self.file(key))

    def partial(self, key: str) -> Path:
        return Path(self.file(key) + PARTIAL_SUFFIX)

    async def list(self) -> AsyncIterator[list[ObjectInfo]]:  # type: ignore[override]
        if not self.root.exists():
            return
        self._tree = TreeListing(self._root, follow_symlinks=self.follow_symlinks)
        async for batch in self._tree.batches():
            yield batch

    def link_notes(self) -> list[str]:
        """What the last listing said of symbolic links, for the summary's notes."""
        return self._tree.notes(str(self)) if self._tree else []

    async def head(self, key: str) -> ObjectInfo | None:
        try:
            st = self.path(key).stat()
        except FileNotFoundError:
            return None
        return ObjectInfo(key, st.st_size, f"{st.st_mtime_ns}:{st.st_size}")

    async def read_range(self, key: str, start: int, end: int, etag: str | None = None) -> bytes:
        def read() -> bytes:
            with open(self.path(key), "rb", buffering=0) as f:
                return os.pread(f.fileno(), end - start, start)

        return await asyncio.to_thread(read)

    def open_partial(self, key: str, size: int) -> tuple[int, bool]:
        """A writable fd on the partial file, sized to ``size``, and whether an earlier run's
        partial file of that size was there to resume."""
        partial = self.partial(key)
        try:
            partial.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(partial, os.O_RDWR | os.O_CREAT, 0o644)
            resumable = os.fstat(fd).st_size == size
            if not resumable:
                os.ftruncate(fd, size)
            return fd, resumable
        except OSError as exc:
            raise disk_error(exc, partial) from exc

    def publish(self, key: str, fd: int, *, sync: bool = True, sync_dir: bool = True) -> str:
        return publish_at(self.file(key), fd, sync=sync, sync_dir=sync_dir)

    async def write_file(
        self, key: str, source: Path, size: int, md5: str | None = None, *, sync_dir: bool = True
    ) -> None:
        """Copy a local file in (see copy_range) and publish it; ``sync_dir=False`` leaves the
        folder's fsync to a caller that does it once for many files."""

        def copy() -> None:
            try:
                src = open(source, "rb")  # noqa: SIM115 - closed below
            except OSError as exc:  # the source's problem, and this file's only
                raise StoreError(f"cannot read {source}: {exc.strerror or exc}") from exc
            with src:
                fd, _ = self.open_partial(key, 0)
                try:
                    copy_range(src.fileno(), fd, size, self.limiter)
                except OSError as exc:
                    os.close(fd)
                    raise disk_error(exc, self.path(key)) from exc
            self.publish(key, fd, sync_dir=sync_dir)

        await asyncio.to_thread(copy)

    async def create_bytes(self, key: str, data: bytes) -> bool:
        """Made only where no file is, and whole (``_create_once.py``)."""
        from ._create_once import create_once

        return await asyncio.to_thread(create_once, self.path(key), data)

    async def delete(self, key: str) -> None:
        """Remove the file, then the folders it leaves empty, as an object store has no empty
        folders (one left behind would block a file of that name, on every later run)."""
        path = self.path(key)
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        for folder in path.parents:
            if folder == self.root or self.root not in folder.parents:
                break
            try:
                folder.rmdir()
            except OSError:  # not empty (or gone): the folders above are not empty either
                break
