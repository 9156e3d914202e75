"""The transfer engine: many files in flight, every step recorded, one error stopping only
what it must.

One asyncio loop drives it. A semaphore caps the requests in flight (``concurrency``), another
the files; each file is copied by the strategy its two stores call for (``copy_object``, the
table in store/_copy.py), which takes the run's request slots, progress callbacks and manifest
(as its resume journal), not the engine. There: a large object is fetched in several ranged
requests at once, written at their offsets into ``NAME.stoker-partial`` as 1 MiB pieces land,
each 4 MiB unit recorded as the stream passes it, its MD5 taken in file order and checked
against Content-MD5, or without one each unit hashed as it streams past (store/_copy_down.py);
under ``batch`` durability finished large files wait under their partial names until a sync
point makes them durable together (every SYNC_EVERY bytes and at the end), and are named and
recorded done only then (store/_durable.py); small files are written in groups, one syncfs a
group (store/_small.py); local files are copied by the kernel (store/_copy_local.py); uploads go
in one request or in blocks (store/_copy_up.py). The engine makes the renames durable, once per
folder, when the run ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .._malloc import raise_dynamic_thresholds
from ..errors import AccessDeniedError, NoContainerError, StageError, StokerError
from ..store import (
    HELD_WHOLE,
    SMALL,
    SYNC_EVERY,
    WHOLE,
    WRITERS,
    CopyRun,
    Durability,
    SmallWriter,
    Store,
    copy_object,
    default_durability,
    disk_error,
    publish_synced,
)
from ._boot import forget_units_of_another_boot
from ._manifest import Manifest, Pending
from ._progress import Reporter


@dataclass
class Counters:
    files: int = 0
    bytes: int = 0
    failed: list[str] = field(default_factory=list)


class Engine:
    def __init__(
        self,
        src: Store,
        dst: Store,
        manifest: Manifest,
        reporter: Reporter,
        *,
        concurrency: int,
        block_size: int,
        hash_files: bool,
        record_blocks: bool = True,
        spool: Path | None = None,
        durability: Durability | None = None,
    ) -> None:
        self.src, self.dst, self.manifest, self.reporter = src, dst, manifest, reporter
        self.block_size = block_size
        self.concurrency = concurrency
        self.requests = asyncio.Semaphore(concurrency)
        # Into a folder, more files than requests: a small file keeps its place while it waits
        # to be written and made durable with its group, and the requests go on meanwhile.
        # A local source's file holds no memory while it waits, so there are more of those.
        # An upload holds its file's bytes (up to block_size) until sent, so there files stay
        # near the requests.
        into_folder = dst.local_root is not None
        local = src.local_root is not None
        files = max(4, concurrency) * (1 if not into_folder else 8 if local else 4)
        self.files_in_flight = asyncio.Semaphore(files)
        self.counters = Counters()
        # How durable a large file is before it counts (store/_durable.py); None: by the
        # destination's file system. Into an object store nothing here is a file of ours.
        root = dst.local_root
        self.durability: Durability = (
            "fsync" if root is None else durability or default_durability(root)
        )
        self.held: list[tuple[str, int, str | None]] = []  # written, waiting for a sync point
        self.held_bytes = 0
        self.sync_point = asyncio.Lock()  # (one at a time: each takes what waits)
        # What each file's copy takes from the run (see store/_copy.py for the strategies).
        # Files fetched whole and written in groups (see store/_small.py): from a remote source
        # up to WHOLE (zero-copy, hashed in memory, one syncfs a group instead of a read-back
        # and an fsync each), at most HELD_WHOLE of those above SMALL in memory at once.
        self.copy = CopyRun(
            requests=self.requests,
            block_size=block_size,
            concurrency=concurrency,
            hash_files=hash_files,
            progress=reporter.advance,
            moved=self._moved,
            journal=manifest,
            record_blocks=record_blocks,  # False for a throw-away spool file
            small=min(SMALL if local else WHOLE, block_size),
            held=asyncio.Semaphore(HELD_WHOLE),
            spool=spool,  # where objects between two object stores wait (see store/_spool.py)
            durability=self.durability,
        )
        self.fatal: BaseException | None = None

    def _moved(self, nbytes: int) -> None:
        self.counters.bytes += nbytes

    async def run(self, batches: AsyncIterator[list[Pending]]) -> Counters:
        """Copy every object of ``batches`` (as the listing yields them)."""
        # Writes, fsyncs and hashes run in threads (they release the GIL); asyncio's default pool
        # of cpu + 4 threads would cap them far below the requests in flight.
        workers = ThreadPoolExecutor(max_workers=self.concurrency + 8, thread_name_prefix="io")
        raise_dynamic_thresholds()  # (obstore's pieces reuse the heap: see _malloc)
        asyncio.get_running_loop().set_default_executor(workers)
        tasks: set[asyncio.Task] = set()
        forget_units_of_another_boot(self.manifest)  # (before any download reads them)
        flusher = asyncio.create_task(self._flush_every(0.05))
        if self.dst.local_root is not None:
            self.copy.writer = SmallWriter(self.dst, max(1, min(WRITERS, self.concurrency)))
        try:
            await self._copy_all(batches, tasks)
        finally:
            flusher.cancel()
            await self._publish_held()  # (a Ctrl-C's too: what finished is named and kept)
            if self.copy.writer:
                await self.copy.writer.close()
            # Renames become durable here, once per folder instead of once per file. A power
            # cut before this can lose a rename the manifest already counts as done; the next
            # run's check of the destination copies such a file again.
            if self.copy.folders and self.durability != "none":
                await asyncio.to_thread(self.dst.sync_folders, self.copy.folders)
            self.manifest.flush()
        if self.fatal:
            raise self.fatal
        return self.counters

    async def _flush_every(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                self.manifest.flush()
            except StageError as exc:  # the manifest's disk is full: the run stops
                self.fatal = self.fatal or exc
                return

    async def _copy_all(
        self, batches: AsyncIterator[list[Pending]], tasks: set[asyncio.Task]
    ) -> None:
        def done(task: asyncio.Task) -> None:  # a file's task ended: its slot is free
            tasks.discard(task)
            self.files_in_flight.release()

        try:
            async for batch in batches:
                for key, size, etag, md5 in batch:
                    if self.fatal:
                        return
                    await self.files_in_flight.acquire()
                    task = asyncio.create_task(self._one(key, size, etag, md5))
                    tasks.add(task)
                    task.add_done_callback(done)
        except asyncio.CancelledError:  # Ctrl-C: the files in flight stop where they are (their
            for task in tasks:  # finished blocks are recorded), rather than finish first
                task.cancel()
            raise
        finally:  # (a failed listing too lets the files under way finish and be recorded)
            if tasks:
                for outcome in await asyncio.gather(*tasks, return_exceptions=True):
                    if isinstance(outcome, Exception):
                        raise outcome

    async def _one(self, key: str, size: int, etag: str, md5: str | None) -> None:
        try:
            digest = await self._copy(key, size, etag, md5)
            if key in self.copy.unpublished:  # (batch durability): counted at a sync point
                self.copy.unpublished.discard(key)
                self.held.append((key, size, digest))
                self.held_bytes += size
                if self.held_bytes >= SYNC_EVERY:
                    await self._publish_held()
            else:
                self.manifest.object_done(key, digest, now=size > self.block_size)
        # A full, read-only or forbidden disk, or refused credentials stop everything (once):
        # every file would fail alike.
        except (StageError, AccessDeniedError, NoContainerError) as exc:
            self.fatal = self.fatal or exc
            return
        except OSError as exc:  # (one no layer below named)
            self.fatal = self.fatal or disk_error(exc, exc.filename or str(self.dst))
            return
        except StokerError as exc:  # this object only: the others go on
            self.counters.failed.append(str(exc))
            self.reporter.note(str(exc))
            return
        self.counters.files += 1
        self.reporter.file_done()

    async def _publish_held(self) -> None:
        """A sync point: the files waiting are made durable together, named, and recorded
        done. If the sync fails none is named; each is recorded to be fetched again."""
        async with self.sync_point:
            held, self.held, self.held_bytes = self.held, [], 0
            if not held:
                return
            keys = [key for key, _, _ in held]
            try:
                await asyncio.to_thread(publish_synced, self.dst, keys)
            except StokerError as exc:
                for key in keys:
                    self.manifest.mark_pending(key)
                self.fatal = self.fatal or exc
                return
            for key, _, digest in held:
                self.copy.published(key)
                self.manifest.object_done(key, digest)
            self.manifest.flush()

    async def _copy(self, key: str, size: int, etag: str, md5: str | None) -> str | None:
        """The object's way is the stores' to decide (see store/_copy.py)."""
        return await copy_object(self.src, self.dst, key, size, etag, md5, self.copy)
