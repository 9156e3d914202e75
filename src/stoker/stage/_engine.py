"""The transfer engine: many requests in flight, large objects in blocks, every step recorded.

One asyncio loop drives it. A semaphore caps the requests in flight (``concurrency``); a large
object is fetched in several ranged requests at once (of a block up to 32 MiB, started in file
order, see _fetch) written at their offsets into ``NAME.stoker-partial``, each finished 4 MiB
unit recorded in the manifest as the stream passes it, so ``kill -9`` costs at most a unit per
request in flight. A request streams in as 1 MiB pieces, each written (and, for XXH3, hashed
when the hash has reached it) on the loop's thread the moment it lands, while it is still in the
CPU cache: collecting whole blocks first made the copy into the page cache cost about twice the
CPU. Writeback to disk starts as each 32 MiB span lands, so the final fsync finds little left. The
MD5 is computed in file order, read back on a thread, every file's side by side (see
_file_hasher, _read_backs), and checked against Content-MD5. When the source has no MD5 to check
against, the recorded hash is XXH3-128 ("xxh128:..."), which costs a hundredth of MD5's CPU: MD5
alone caps a copy near 600-700 MB/s per core. Files bound for POSIX of up to 1 MiB from a local
source, or 4 MiB from a remote one, are fetched whole (in one call, no copy) and written in
groups by a SmallWriter (see _small): their MD5 taken in memory, one syncfs for a group.
Uploads: a file up to ``block_size`` is read once and sent in one request; larger ones go in
blocks that the store hashes as it reads them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import xxhash

from .._malloc import raise_dynamic_thresholds
from ..errors import (
    AccessDeniedError,
    NoContainerError,
    SourceChangedError,
    StageError,
    StokerError,
    StoreError,
)
from ..store import PosixStore, Store
from ..store._blocks import take_resumed
from ..store._bwlimit import take
from ..store._posix import disk_error, fsync_dir
from ._fetch import download
from ._manifest import Manifest, Pending
from ._progress import Reporter
from ._read_backs import ReadBacks
from ._small import (
    HELD_WHOLE,
    SMALL,
    WHOLE,
    WRITERS,
    Job,
    SmallWriter,
    from_bytes,
    from_file,
    named,
    read_ahead,
)
from ._spool import spool_folder


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
    ) -> None:
        self.src, self.dst, self.manifest, self.reporter = src, dst, manifest, reporter
        self.block_size, self.hash_files = block_size, hash_files
        self.record_blocks = record_blocks  # False for a throw-away spool file
        self.spool = spool  # where objects between two object stores wait (see _spool)
        self.concurrency = concurrency
        self.requests = asyncio.Semaphore(concurrency)
        # Into POSIX, more files than requests: a small file keeps its place while it waits
        # to be written and made durable with its group, and the requests go on meanwhile.
        # A local source's file holds no memory while it waits, so there are more of those.
        # An upload holds its file's bytes (up to block_size) until sent, so there files stay
        # near the requests.
        into_posix = isinstance(dst, PosixStore)
        local = isinstance(src, PosixStore)
        files = max(4, concurrency) * (1 if not into_posix else 8 if local else 4)
        self.files_in_flight = asyncio.Semaphore(files)
        # Files fetched whole and written in groups (see _small): from a remote source up to
        # WHOLE (zero-copy, hashed in memory, one syncfs a group instead of a read-back and an
        # fsync each), at most HELD_WHOLE of those above SMALL in memory at once.
        self.small = min(SMALL if local else WHOLE, block_size)
        self.held = asyncio.Semaphore(HELD_WHOLE)
        self.writer: SmallWriter | None = None
        self.read_backs = ReadBacks()  # large files' MD5s, side by side (see _read_backs)
        self.counters = Counters()
        self.folders_to_sync: set[str] = set()  # of keys written, fsynced once at the end
        self.fatal: BaseException | None = None

    async def run(self, batches: AsyncIterator[list[Pending]]) -> Counters:
        """Copy every object of ``batches`` (as the listing yields them)."""
        # Writes, fsyncs and hashes run in threads (they release the GIL); asyncio's default pool
        # of cpu + 4 threads would cap them far below the requests in flight.
        workers = ThreadPoolExecutor(max_workers=self.concurrency + 8, thread_name_prefix="io")
        raise_dynamic_thresholds()  # (obstore's pieces reuse the heap: see _malloc)
        asyncio.get_running_loop().set_default_executor(workers)
        tasks: set[asyncio.Task] = set()
        flusher = asyncio.create_task(self._flush_every(0.05))
        if isinstance(self.dst, PosixStore):
            self.writer = SmallWriter(self.dst, max(1, min(WRITERS, self.concurrency)))
        try:
            await self._copy_all(batches, tasks)
        finally:
            flusher.cancel()
            if self.writer:
                await self.writer.close()
            # Renames become durable here, once per folder instead of once per file. A power
            # cut before this can lose a rename the manifest already counts as done; the next
            # run's check of the destination copies such a file again.
            if self.folders_to_sync:
                await asyncio.to_thread(_fsync_folders, self.dst, self.folders_to_sync)
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
        try:
            async for batch in batches:
                for key, size, etag, md5 in batch:
                    if self.fatal:
                        return
                    await self.files_in_flight.acquire()
                    task = asyncio.create_task(self._one(key, size, etag, md5))
                    tasks.add(task)
                    task.add_done_callback(
                        lambda t: (tasks.discard(t), self.files_in_flight.release())
                    )
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
            self.manifest.object_done(key, digest, now=size > self.block_size)
        # A full, read-only or forbidden disk, or refused credentials stop everything (once):
        # every file would fail alike.
        except (StageError, AccessDeniedError, NoContainerError) as exc:
            self.fatal = self.fatal or exc
            return
        except OSError as exc:  # (one no layer below named)
            self.fatal = self.fatal or disk_error(exc, exc.filename or self.dst)
            return
        except StokerError as exc:  # this object only: the others go on
            self.counters.failed.append(str(exc))
            self.reporter.note(str(exc))
            return
        self.counters.files += 1
        self.reporter.file_done()

    async def _copy(self, key: str, size: int, etag: str, md5: str | None) -> str | None:
        if isinstance(self.dst, PosixStore):
            if size <= self.small and self.writer:
                return await self._small_copy(key, size, etag, md5)
            if isinstance(self.src, PosixStore):
                return await self._local_copy(key, size)
            return await download(self, key, size, etag, md5)
        return await self._upload(key, size, etag, md5)

    # ----------------------------------------------------------------- small files, whole
    async def _small_copy(self, key: str, size: int, etag: str, md5: str | None) -> str | None:
        """A small file is fetched whole (or, when local, read in the writer's thread) and
        handed to the writers, which write it with others in one thread call."""
        assert isinstance(self.dst, PosixStore) and self.writer
        final = self.dst.file(key)  # (checked before anything is fetched)
        if isinstance(self.src, PosixStore):
            path = self.src.file(key)
            await take(self.dst.limiter, size)  # (--bwlimit; a remote source's reads take)
            job = Job(key, final, from_file(path, size, self.hash_files), read_ahead(path))
            digest = await self.writer.write(job)
        else:
            # Checked against the listing's MD5, the bytes need no version check as well (a
            # changed object fails it): the read is then one call, ~0.13 ms less CPU a file.
            version = None if md5 and self.hash_files else etag
            async with self.held if size > SMALL else contextlib.nullcontext():
                async with self.requests:
                    data = await self.src.read_range(key, 0, size, version)
                source = f"{self.src}/{key}"
                job = Job(key, final, from_bytes(data, md5, self.hash_files, source))
                digest = await self.writer.write(job)  # (its bytes are held until written)
        self.folders_to_sync.add(key.rpartition("/")[0])
        self.counters.bytes += size
        self.reporter.advance(size)
        return digest

    async def _local_copy(self, key: str, size: int) -> str | None:
        src = self.src
        assert isinstance(src, PosixStore) and isinstance(self.dst, PosixStore)
        async with self.requests:
            await self.dst.write_file(key, src.path(key), size, sync_dir=False)
        self.folders_to_sync.add(key.rpartition("/")[0])
        self.counters.bytes += size
        self.reporter.advance(size)
        if self.hash_files:
            return await asyncio.to_thread(_path_digest, self.dst.path(key))
        return None

    # ----------------------------------------------------------------- anything -> object store
    async def _upload(self, key: str, size: int, etag: str, md5: str | None) -> str | None:
        if isinstance(self.src, PosixStore):
            path = self.src.path(key)
            try:
                if size <= self.block_size:
                    # Read once, hash what was read, send it in one request (the service
                    # records its Content-MD5).
                    data = await asyncio.to_thread(path.read_bytes)
                    digest = named(xxhash.xxh3_128(data)) if self.hash_files else None
                    resumed = 0
                    async with self.requests:
                        await self.dst.write_bytes(key, data)
                else:  # in blocks: the store hashes the file as it sends it; each block
                    # takes a slot of the run's requests (not the file: see upload_file)
                    digest = await self.dst.write_file(key, path, size, gate=self.requests)
                    digest = digest if self.hash_files else None
                    resumed = take_resumed(self.dst, key)  # (blocks an earlier run sent)
            except FileNotFoundError:
                digest, changed, resumed = None, True, 0  # (this file's failure, not the run's)
            except OSError as exc:  # an unreadable source file fails alone
                raise StoreError(
                    f"cannot read {path}: {exc.strerror or exc}; fix its permissions, or "
                    "--exclude it"
                ) from exc
            else:
                changed = False
            # A file written to while it was read goes up torn: fail it, and the re-run (which
            # sees its new size or mtime) sends it again.
            now = await self.src.head(key)
            if changed or now is None or now.etag != etag:
                raise SourceChangedError(
                    f"{self.src}/{key} changed while it was being copied; re-run to copy it again"
                )
            self.counters.bytes += size - resumed
            self.reporter.advance(size)
            return digest
        if self.dst.copies_from(self.src):  # the service copies it: no byte comes here
            try:  # (each block's request takes a slot of the run's requests, not the file)
                digest = await self.dst.copy_from(
                    self.src, key, etag, md5, size, gate=self.requests
                )
            except NotImplementedError:  # it cannot after all (see _blob_copy): relayed
                pass
            else:
                self.counters.bytes += size
                self.reporter.advance(size)
                return digest
        # Object store to object store elsewhere: through a temporary file, block by block.
        assert self.spool is not None
        with spool_folder(self.spool) as folder:
            spool = PosixStore(folder)
            relay = Engine(
                self.src,
                spool,
                self.manifest,
                _Quiet(self.reporter),
                concurrency=4,
                block_size=self.block_size,
                hash_files=self.hash_files,
                record_blocks=False,
            )
            digest = await download(relay, key, size, etag, md5)
            self.counters.bytes += relay.counters.bytes
            carried = digest if digest and ":" not in digest else md5  # only an MD5 is carried
            async with self.requests:
                await self.dst.write_file(key, spool.path(key), size, carried)
        return digest


class _Quiet(Reporter):
    """Counts bytes into the parent's bar but not files (the relay's file is the parent's)."""

    def __init__(self, parent: Reporter) -> None:
        self.parent = parent

    def advance(self, nbytes: int) -> None:
        self.parent.advance(nbytes)


def _fsync_folders(dst: Store, folders: set[str]) -> None:
    assert isinstance(dst, PosixStore)
    for folder in folders:
        try:
            fsync_dir(dst.root.joinpath(*folder.split("/")) if folder else dst.root)
        except FileNotFoundError:  # removed meanwhile (a relay's spool): nothing to keep
            pass


def _path_digest(path: Path) -> str:
    hasher = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            hasher.update(chunk)
    return named(hasher)
