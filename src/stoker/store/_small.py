"""Small files are written in groups, each group in one thread call and one commit.

For a 64 KiB file the steps (open, write, hash, fsync, close, rename) cost less than the hops
between the event loop and the thread pool that run them, and every hop is another wait for the
GIL. Files wait in a queue; each of a few writers takes whatever is waiting, up to GROUP_FILES,
and writes them all under their partial names. Then the group is made durable at once and each
file renamed to its final name. Where the file system's syncfs(2) covers every file on it (ext4,
XFS, btrfs on Linux 5.8+: see ``syncs_as_a_whole``) one syncfs stands for the group's fsyncs: it
sends all their data to the disk in one batch and commits the journal once, where an fsync per
file waits for a journal commit each. Elsewhere (NFS, Lustre, SMB) each file is fsynced. Either
way no file is renamed before its data is on disk. A group's local sources are first read ahead
(posix_fadvise WILLNEED), so their reads queue on the disk together instead of one after
another. Where a syncfs stands for the fsyncs, a group also takes what arrives within GATHER_S
(20 ms) of its first file: a file waits that long at most, and a copy from a remote source,
whose files arrive one by one, makes a syncfs for every few files instead of one for each.
(Figures: docs/stage-cpu-notes.md.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass

import xxhash

from .._many_md5 import md5s, new_md5, update_together
from ..errors import ChecksumError, StokerError, StoreError
from ._base import Store
from ._posix import (
    WRITE_PIECE,
    copy_range,
    create_partial_at,
    disk_error,
    publish_at,
    syncfs,
    syncs_as_a_whole,
    write_all,
)
from ._safety import PARTIAL_SUFFIX

SMALL = 1 << 20  # a file that arrives in one piece
# From a remote source, files up to WHOLE go this way too: fetched whole (one call, no copy),
# MD5 taken in memory, one syncfs a group; a file of 1-4 MiB streamed into its partial file,
# read back for its MD5 and fsynced alone cost more CPU and a journal commit each. At most
# HELD_WHOLE of those above SMALL are held in memory at once (64 MiB).
WHOLE = 4 << 20
HELD_WHOLE = 16
# Objects in memory are hashed and written side by side (write_held) this much of each a round:
# 32 files' pieces (4 MiB) stay in the L3 cache until written, and a round's Python is paid
# once per 128 KiB of each.
HASH_ROUND = 128 << 10
# 8 writers of up to 32 files each beat fewer, larger groups and more, smaller ones; more
# threads spend the difference queueing for the GIL.
GROUP_FILES = 32
WRITERS = 8
# A syncfs stalls the file system's other writers while it commits: files that arrive one by
# one would each make a group (and a syncfs) of their own; 20 ms gathers a few per group.
GATHER_S = 0.02


def hasher_for(md5: str | None):  # noqa: ANN201 - hashlib and xxhash share no base class
    """MD5 when there is a source MD5 to check against, else the much cheaper XXH3-128."""
    return new_md5() if md5 else xxhash.xxh3_128()


def named(hasher) -> str:  # noqa: ANN001
    """MD5 as plain hex (as Azure shows it); any other hash prefixed with its name."""
    return hasher.hexdigest() if hasher.name == "md5" else f"xxh128:{hasher.hexdigest()}"


@dataclass
class Job:
    """One small file: ``fill(fd)`` writes its bytes into the open partial file and returns
    its hash (or None); it runs in a writer's thread, after ``prepare()`` (when there is one)
    ran for every job of its group. A ``Held`` fill is written with the group's others."""

    key: str
    final: str  # its checked path (PosixStore.file)
    fill: Callable[[int], str | None] | Held
    prepare: Callable[[], None] | None = None


@dataclass
class Held:
    """A job's ``fill`` for an object that arrived whole, in memory (see ``from_bytes``)."""

    data: memoryview
    md5: str | None  # the source's, to check the copy against
    hash_files: bool
    source: str  # its URL, for the error


def from_bytes(data: bytes | memoryview, md5: str | None, hash_files: bool, source: str) -> Held:
    """A job's ``fill`` for an object that arrived whole: its group writes it into its partial
    file with the group's other such objects (``write_held``), hashed as it is written, and
    checks it before it is published (a damaged copy's partial file is removed: it never gets
    its name)."""
    return Held(memoryview(data), md5, hash_files, source)


def write_held(items: list[tuple[Held, int]]) -> list[str | None | BaseException]:
    """Write each object into its open partial file, a HASH_ROUND at a time (in WRITE_PIECE
    writes), each piece right after it is hashed, while the CPU's cache still holds it
    (hashed whole, then written whole, a 4 MiB object would come back from memory for the
    kernel's copy into the page cache). The objects go side by side: a round takes the next piece of
    each, and their MD5s in one call (one SIMD lane each: see stoker._many_md5). Per object,
    its hash or its error."""
    outcomes: list[str | None | BaseException] = [None] * len(items)
    checked = [i for i, (held, _) in enumerate(items) if held.hash_files and held.md5]
    md5_of = dict(zip(checked, md5s(len(checked)), strict=True))
    # No MD5 to check against: the cheaper hash, one object at a time.
    xxh_of = {i: xxhash.xxh3_128() for i, (h, _) in enumerate(items) if h.hash_files and not h.md5}
    live = list(range(len(items)))
    at = 0
    while live := [i for i in live if at < len(items[i][0].data)]:
        pieces = {i: items[i][0].data[at : at + HASH_ROUND] for i in live}
        md5_now = [i for i in live if i in md5_of]
        try:
            update_together([md5_of[i] for i in md5_now], [pieces[i] for i in md5_now])
        except Exception as exc:  # (no memory, a bug): those files fail, not silently
            for i in md5_now:
                outcomes[i] = exc
        for i in live:
            if outcomes[i] is not None:
                continue
            if i in xxh_of:
                xxh_of[i].update(pieces[i])
            try:
                write_all(items[i][1], pieces[i], step=WRITE_PIECE)
            except OSError as exc:
                outcomes[i] = exc
        live = [i for i in live if outcomes[i] is None]
        at += HASH_ROUND
    for i, hasher in {**md5_of, **xxh_of}.items():
        if outcomes[i] is None:
            outcomes[i] = _checked(items[i][0], named(hasher))
    return outcomes


def _checked(held: Held, digest: str) -> str | BaseException:
    if held.md5 and digest != held.md5:
        return ChecksumError(
            f"{held.source}: MD5 {digest} of the copy does not match the source's "
            f"Content-MD5 {held.md5} (it changed since it was listed, or was damaged on "
            "the way); re-run to fetch it again"
        )
    return digest


def read_ahead(path: str) -> Callable[[], None]:
    """A job's ``prepare`` for a local file: ask the kernel to start reading it now."""

    def prepare() -> None:
        if not hasattr(os, "posix_fadvise"):  # (not on macOS)
            return
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:  # fill reports it
            return
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        finally:
            os.close(fd)

    return prepare


def from_file(path: str, size: int, hash_files: bool) -> Callable[[int], str | None]:
    """A job's ``fill`` for a local file: read once and hashed when hashing, else copied by
    the kernel."""

    def fill(fd: int) -> str | None:
        try:
            source = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from exc
        try:
            if not hash_files:
                copy_range(source, fd, size)
                return None
            data = _read_all(source, size)
        finally:
            os.close(source)
        write_all(fd, data, step=WRITE_PIECE)
        return named(xxhash.xxh3_128(data))

    return fill


class SmallWriter:
    """Writers that drain a queue of Jobs in groups into ``dst`` (each Job knows its path)."""

    def __init__(self, dst: Store, writers: int) -> None:
        assert dst.local_root is not None  # (a folder's writer)
        self.group_commit = syncs_as_a_whole(dst.local_root)
        self.queue: asyncio.Queue[tuple[Job, asyncio.Future]] = asyncio.Queue()
        self.gathering = asyncio.Lock()
        self.group_full = asyncio.Event()  # a whole group waits: the gathering need wait no more
        self.tasks = [asyncio.create_task(self._drain()) for _ in range(writers)]

    async def write(self, job: Job) -> str | None:
        """Write and publish one file; returns its hash, or raises its error."""
        done = asyncio.get_running_loop().create_future()
        self.queue.put_nowait((job, done))
        if self.queue.qsize() >= GROUP_FILES - 1:
            self.group_full.set()
        return await done

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _gather(self) -> list[tuple[Job, asyncio.Future]]:
        """The next group: the first file waiting, and what else arrives within GATHER_S, up
        to GROUP_FILES. One writer gathers at a time, so that files arriving one by one (a
        remote source) still travel together and share a syncfs."""
        async with self.gathering:
            group = [await self.queue.get()]
            # Woken by the file that fills the group, or at GATHER_S (a timer per group, not a
            # poll, which would wake the loop thousands of times for nothing).
            self.group_full.clear()
            try:
                if self.group_commit and self.queue.qsize() < GROUP_FILES - 1:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(GATHER_S):
                            await self.group_full.wait()
            except asyncio.CancelledError:
                group[0][1].cancel()  # its waiter must not wait for ever
                raise
            while len(group) < GROUP_FILES and not self.queue.empty():
                group.append(self.queue.get_nowait())
            return group

    async def _drain(self) -> None:
        while True:
            group = await self._gather()
            try:
                jobs = [job for job, _ in group]
                outcomes = await asyncio.to_thread(write_group, jobs, self.group_commit)
            except asyncio.CancelledError:
                for _, done in group:
                    done.cancel()
                raise
            except Exception as exc:  # every waiter must hear of it
                outcomes = [exc] * len(group)
            for (_, done), outcome in zip(group, outcomes, strict=True):
                if done.done():
                    continue
                if isinstance(outcome, BaseException):
                    done.set_exception(outcome)
                else:
                    done.set_result(outcome)


def write_group(jobs: list[Job], group_commit: bool) -> list[str | None | BaseException]:
    """Write each job's file, make them durable (one syncfs, or an fsync each), rename each;
    per file, its hash or its error. One file's error does not stop the others."""
    for job in jobs:
        if job.prepare:
            job.prepare()
    outcomes: list[str | None | BaseException] = [None] * len(jobs)
    written: list[tuple[int, int]] = []
    held: list[tuple[int, int]] = []  # (job, fd) of the objects in memory, written together
    for i, job in enumerate(jobs):
        fd = -1
        try:
            fd = create_partial_at(job.final)
            if isinstance(job.fill, Held):
                held.append((i, fd))
                continue
            outcomes[i] = job.fill(fd)
            written.append((i, fd))
        except (OSError, StokerError) as exc:
            outcomes[i] = _failed(job, fd, exc)
    together = write_held([(jobs[i].fill, fd) for i, fd in held])  # type: ignore[misc]
    for (i, fd), outcome in zip(held, together, strict=True):
        if isinstance(outcome, BaseException):
            outcomes[i] = _failed(jobs[i], fd, outcome)
        else:
            outcomes[i] = outcome
            written.append((i, fd))
    if group_commit and written:
        try:
            syncfs(written[0][1])
        except OSError as exc:  # which file failed is not known: none is published
            for i, fd in written:
                _discard(jobs[i].final, fd)
                outcomes[i] = disk_error(exc, jobs[i].final)
            return outcomes
    for i, fd in written:
        try:
            publish_at(jobs[i].final, fd, sync=not group_commit, sync_dir=False)
        except StokerError as exc:
            outcomes[i] = exc
    return outcomes


def _failed(job: Job, fd: int, exc: BaseException) -> BaseException:
    """A file that failed: its partial file removed; the error to report for it."""
    if fd >= 0:
        _discard(job.final, fd)
    return disk_error(exc, job.final) if isinstance(exc, OSError) else exc


def _discard(final: str, fd: int) -> None:
    os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(final + PARTIAL_SUFFIX)


def _read_all(fd: int, size: int) -> bytes:
    parts, got = [], 0
    while got < size and (part := os.read(fd, size - got)):
        parts.append(part)
        got += len(part)
    return b"".join(parts)
