"""The transfer engine: many requests in flight, large objects in blocks, every step recorded.

One asyncio loop drives it. A semaphore caps the requests in flight (``concurrency``); large
objects are split into ``block_size`` ranges fetched in parallel and written at their offsets
into ``NAME.stoker-partial``, each finished block recorded in the manifest, so ``kill -9``
costs at most the blocks in flight. The MD5 of a download is computed in order as blocks
arrive (off the event loop: hashlib releases the GIL), and checked against Content-MD5. When
the source has no MD5 to check against, the recorded hash is XXH3-128 ("xxh128:..."), which
costs a hundredth of MD5's CPU: on a machine the emulator shares, MD5 alone caps a copy near
600 MB/s per core.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import xxhash

from ..errors import ChecksumError, StageError, StokerError
from ..store import PosixStore, Store
from ..store._posix import disk_error
from ._manifest import Manifest
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
    ) -> None:
        self.src, self.dst, self.manifest, self.reporter = src, dst, manifest, reporter
        self.block_size, self.hash_files = block_size, hash_files
        self.record_blocks = record_blocks  # False for a throw-away spool file
        self.requests = asyncio.Semaphore(concurrency)
        self.files_in_flight = asyncio.Semaphore(max(4, concurrency))
        self.counters = Counters()
        self.fatal: BaseException | None = None

    async def run(self, run: int) -> Counters:
        # Writes, fsyncs and hashes run in threads (they release the GIL); asyncio's default pool
        # of cpu + 4 threads would cap them far below the requests in flight.
        workers = ThreadPoolExecutor(max_workers=self.requests._value + 8, thread_name_prefix="io")
        asyncio.get_running_loop().set_default_executor(workers)
        tasks: set[asyncio.Task] = set()
        flusher = asyncio.create_task(self._flush_every(0.05))
        try:
            await self._copy_pending(run, tasks)
        finally:
            flusher.cancel()
            self.manifest.flush()
        if self.fatal:
            raise self.fatal
        return self.counters

    async def _flush_every(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            self.manifest.flush()

    async def _copy_pending(self, run: int, tasks: set[asyncio.Task]) -> None:
        for key, size, etag, md5 in self.manifest.pending(run):
            if self.fatal:
                break
            await self.files_in_flight.acquire()
            task = asyncio.create_task(self._one(key, size, etag, md5))
            tasks.add(task)
            task.add_done_callback(lambda t: (tasks.discard(t), self.files_in_flight.release()))
        if tasks:
            await asyncio.gather(*tasks)

    async def _one(self, key: str, size: int, etag: str, md5: str | None) -> None:
        try:
            digest = await self._copy(key, size, etag, md5)
        except (StageError, OSError) as exc:  # a full disk stops everything: all would fail
            self.fatal = self.fatal or exc
            return
        except StokerError as exc:  # this object only: the others go on
            self.counters.failed.append(str(exc))
            self.reporter.note(str(exc))
            return
        self.manifest.object_done(key, digest)
        self.counters.files += 1
        self.reporter.file_done()

    async def _copy(self, key: str, size: int, etag: str, md5: str | None) -> str | None:
        if isinstance(self.dst, PosixStore):
            if isinstance(self.src, PosixStore):
                return await self._local_copy(key, size)
            return await self._download(key, size, etag, md5)
        return await self._upload(key, size, etag, md5)

    # ----------------------------------------------------------------- remote or local -> POSIX
    async def _download(self, key: str, size: int, etag: str, md5: str | None) -> str | None:
        assert isinstance(self.dst, PosixStore)
        dst = self.dst
        fd, had_partial = await asyncio.to_thread(dst.open_partial, key, size)
        try:
            blocks = max(1, -(-size // self.block_size))
            resumable = blocks > 1 and self.record_blocks
            # Finished blocks count only if their partial file is still there: after a crash
            # between publishing and the done mark, the blocks live in the final file instead.
            done = self.manifest.blocks_done(key, etag) if resumable and had_partial else set()
            self.reporter.advance(
                sum(self._span(i, size)[1] - self._span(i, size)[0] for i in done)
            )
            hasher = _InOrderHasher(_hasher(md5)) if (self.hash_files and not done) else None

            failed = False

            async def fetch(i: int) -> None:
                nonlocal failed
                start, end = self._span(i, size)
                try:
                    if hasher:
                        await hasher.room_for(i)
                    async with self.requests:
                        if failed:  # a sibling failed: the file will be fetched again
                            return
                        data = (
                            await self.src.read_range(key, start, end, etag) if end > start else b""
                        )
                    if failed:
                        return
                    await asyncio.to_thread(os.pwrite, fd, data, start)
                except OSError as exc:
                    failed = True
                    if hasher:
                        await hasher.abort()
                    raise disk_error(exc, dst.partial(key)) from exc
                except BaseException:
                    failed = True
                    if hasher:
                        await hasher.abort()
                    raise
                if resumable:
                    self.manifest.block_done(key, etag, i)
                if hasher:
                    await hasher.add(i, data)
                self.counters.bytes += end - start
                self.reporter.advance(end - start)

            # Every block finishes (or gives up) before the fd is closed: a late write must never
            # land in whichever file reuses the descriptor number.
            outcomes = await asyncio.gather(
                *(fetch(i) for i in range(blocks) if i not in done), return_exceptions=True
            )
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
            if hasher:
                digest = hasher.hexdigest()
            elif self.hash_files:  # resumed: some blocks came from an earlier run
                digest = await asyncio.to_thread(_file_digest, fd, md5)
            else:
                digest = None
            if md5 and digest and digest != md5:
                self.manifest.mark_pending(key)
                os.close(fd)
                fd = -1
                dst.partial(key).unlink(missing_ok=True)
                raise ChecksumError(
                    f"{self.src}/{key}: MD5 {digest} of the copy does not match the "
                    f"source's Content-MD5 {md5}; re-run to fetch it again"
                )
            await asyncio.to_thread(dst.publish, key, fd)
            fd = -1
            return digest
        finally:
            if fd >= 0:
                os.close(fd)

    async def _local_copy(self, key: str, size: int) -> str | None:
        src = self.src
        assert isinstance(src, PosixStore) and isinstance(self.dst, PosixStore)
        async with self.requests:
            await self.dst.write_file(key, src.path(key), size, None)
        self.counters.bytes += size
        self.reporter.advance(size)
        if self.hash_files:
            return await asyncio.to_thread(_path_digest, self.dst.path(key), False)
        return None

    # ----------------------------------------------------------------- anything -> object store
    async def _upload(self, key: str, size: int, etag: str, md5: str | None) -> str | None:
        if isinstance(self.src, PosixStore):
            path = self.src.path(key)
            # One Put Blob gets its Content-MD5 from the service; a block upload carries ours.
            want_md5 = size > self.block_size
            digest = (
                await asyncio.to_thread(_path_digest, path, want_md5) if self.hash_files else None
            )
            async with self.requests:
                await self.dst.write_file(key, path, size, digest if want_md5 else None)
            self.counters.bytes += size
            self.reporter.advance(size)
            return digest
        # Object store to object store: through a temporary file, block by block.
        with tempfile.TemporaryDirectory(prefix="stoker-") as tmp:
            spool = PosixStore(Path(tmp))
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
            digest = await relay._download(key, size, etag, md5)
            self.counters.bytes += relay.counters.bytes
            carried = digest if digest and ":" not in digest else md5  # only an MD5 is carried
            async with self.requests:
                await self.dst.write_file(key, spool.path(key), size, carried)
        return digest

    def _span(self, i: int, size: int) -> tuple[int, int]:
        return i * self.block_size, min(size, (i + 1) * self.block_size)


class _InOrderHasher:
    """Feed blocks that finish out of order to a hash in order. A block may be fetched only
    ``window`` blocks ahead of the hash, so memory stays bounded when hashing is the slower."""

    def __init__(self, hasher: hashlib._Hash, window: int = 16) -> None:
        self.hasher, self.next, self.waiting, self.window = hasher, 0, {}, window
        self.lock = asyncio.Lock()
        self.moved = asyncio.Condition()
        self.aborted = False

    async def room_for(self, idx: int) -> None:
        async with self.moved:
            await self.moved.wait_for(lambda: self.aborted or idx < self.next + self.window)

    async def abort(self) -> None:
        """A block failed: the hash will never complete, so release every waiting block."""
        self.aborted = True
        async with self.moved:
            self.moved.notify_all()

    async def add(self, idx: int, data: bytes | memoryview) -> None:
        self.waiting[idx] = data
        async with self.lock:
            while self.next in self.waiting:
                await asyncio.to_thread(self.hasher.update, self.waiting.pop(self.next))
                self.next += 1
                async with self.moved:
                    self.moved.notify_all()

    def hexdigest(self) -> str:
        return _named(self.hasher)


class _Quiet(Reporter):
    """Counts bytes into the parent's bar but not files (the relay's file is the parent's)."""

    def __init__(self, parent: Reporter) -> None:
        self.parent = parent

    def advance(self, nbytes: int) -> None:
        self.parent.advance(nbytes)


def _hasher(md5: str | None):  # noqa: ANN202 - hashlib and xxhash share no base class
    """MD5 when there is a source MD5 to check against, else the much cheaper XXH3-128."""
    return hashlib.md5() if md5 else xxhash.xxh3_128()


def _named(hasher) -> str:  # noqa: ANN001
    """MD5 as plain hex (as Azure shows it); any other hash prefixed with its name."""
    return hasher.hexdigest() if hasher.name == "md5" else f"xxh128:{hasher.hexdigest()}"


def _file_digest(fd: int, md5: str | None) -> str:
    hasher = _hasher(md5)
    offset = 0
    while chunk := os.pread(fd, 8 << 20, offset):
        hasher.update(chunk)
        offset += len(chunk)
    return _named(hasher)


def _path_digest(path: Path, md5: bool) -> str:
    hasher = _hasher("md5" if md5 else None)
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            hasher.update(chunk)
    return _named(hasher)
