"""Remote to local: an object from an object store into its file in a folder.

A small one (see ``fetch_small``) is fetched whole and handed to the SmallWriter. A large one
is fetched in several ranged requests at once (see REQUEST) and written at its offsets into
``NAME.stoker-partial`` as each 1 MiB piece lands. Each finished UNIT is recorded in the
run's journal (its manifest) as the stream passes it, so ``kill -9`` costs at most a unit per
request in flight. With a Content-MD5, each unit is also hashed in file order (see
_file_hasher) and the MD5 checked before the file is published under its name; without one,
each unit is hashed as it streams past and the file's hash is the list of them (_unit_hasher),
nothing read back. Then, where the store reads on its own threads (_direct_get) and the folder
is on a local disk, the pieces are written past the page cache (_direct_write). Where the file
is synced before it is named (``fsync`` durability, or ``batch``'s sync point) and it went
through the page cache, the writeback of each 32 MiB span is started once all of it has landed;
under ``batch`` the file waits under its partial name for the engine's next sync point (see
_durable).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Collection
from typing import TYPE_CHECKING

from .._many_md5 import new_md5
from ..errors import ChecksumError
from ._base import Store
from ._direct_write import PIECE as DIRECT_PIECE
from ._direct_write import DirectWriter
from ._download import fetch_ranges
from ._file_hasher import FileHasher
from ._posix import PosixStore, disk_error, start_writeback, syncs_as_a_whole, write_all
from ._small import SMALL, Job, from_bytes
from ._unit_hasher import UnitHasher

if TYPE_CHECKING:
    from ._copy import CopyRun

# A large object is fetched in requests of up to REQUEST bytes (at least a block; a file gets at
# least REQUESTS_PER_FILE of them), at most WINDOW of them in flight for one file (or a quarter
# of the engine's requests, if more), started in file order. The file's MD5 goes in order, so
# requests that land in order let it hash while the rest arrive: many large requests side by
# side leave most of a file to hash after its last byte, and on a fast network that tail would
# be most of the copy (smaller requests cost the service more; fewer in flight fetch too
# little). Within a request, each UNIT is recorded (resume), hashed in order and written back
# as the stream passes its end: a kill -9 fetches again only the unit each request had under
# way (at most 4 MiB a request). Each unit costs a thread hop (its MD5 read-back), so units are
# not smaller. Writeback is started a WRITEBACK span at a time, once every unit of it has
# landed, rather than a hop and a small writeback per unit. (Figures: docs/stage-cpu-notes.md.)
REQUEST = 32 << 20
REQUESTS_PER_FILE = 16
WINDOW = 8
UNIT = 4 << 20
WRITEBACK = 32 << 20


class WritebackSpans:
    """Which WRITEBACK spans of a download have landed whole, whatever order their units land in
    (the units a resumed run skips count as landed)."""

    def __init__(self, size: int, unit: int, landed: Collection[int] = ()) -> None:
        self.size, self.unit, self.per = size, unit, max(1, WRITEBACK // unit)
        units = max(1, -(-size // unit))
        self.left = [min(self.per, units - s * self.per) for s in range(-(-units // self.per))]
        for i in landed:
            self.left[i // self.per] -= 1

    def landed(self, i: int) -> tuple[int, int] | None:
        """Unit ``i`` has landed: the span it completes, as (offset, length), if it does."""
        span = i // self.per
        self.left[span] -= 1
        if self.left[span]:
            return None
        first = span * self.per * self.unit
        return first, min(self.size, first + self.per * self.unit) - first


def local_disk(dst: PosixStore) -> bool:
    """Whether ``dst`` is on a local file system (where a direct write costs no round trip)."""
    root = dst.local_root
    return root is not None and syncs_as_a_whole(root)


def resume_unit(block_size: int) -> int:
    """The unit in which a download's progress is recorded (the manifest's block size)."""
    return min(block_size, UNIT)


async def fetch_small(
    src: Store, dst: Store, key: str, size: int, etag: str, md5: str | None, run: CopyRun
) -> str | None:
    """A small object is fetched whole (one call, no copy) and handed to the run's writer,
    which writes it with others in one thread call; returns its hash."""
    assert isinstance(dst, PosixStore) and run.writer and run.held
    final = dst.file(key)  # (checked before anything is fetched)
    # Checked against the listing's MD5, the bytes need no version check as well (a
    # changed object fails it): the read is then one call, ~0.13 ms less CPU a file.
    version = None if md5 and run.hash_files else etag
    async with run.held if size > SMALL else contextlib.nullcontext():
        async with run.requests:
            data = await src.read_range(key, 0, size, version)
        source = f"{src}/{key}"
        job = Job(key, final, from_bytes(data, md5, run.hash_files, source))
        digest = await run.writer.write(job)  # (its bytes are held until written)
    run.published(key)
    run.moved(size)
    run.progress(size)
    return digest


async def download(
    src: Store, dst: Store, key: str, size: int, etag: str, md5: str | None, run: CopyRun
) -> str | None:
    """``key`` of ``src`` into its partial file in ``dst``, then published under its name
    (under ``batch`` durability, left for the engine's next sync point: see _durable); returns
    the file's hash (MD5 when the source has one to check against, else a hash list)."""
    assert isinstance(dst, PosixStore)
    unit = resume_unit(run.block_size)
    fd, had_partial = await asyncio.to_thread(dst.open_partial, key, size)
    hasher: FileHasher | None = None
    writer: DirectWriter | None = None
    try:
        units = max(1, -(-size // unit))
        resumable = units > 1 and run.record_blocks
        # Finished units count only if their partial file is still there: after a crash
        # between publishing and the done mark, the units live in the final file instead.
        done = run.journal.blocks_done(key, etag) if resumable and had_partial else set()
        run.progress(sum(min(size, (i + 1) * unit) - i * unit for i in done))
        # With a Content-MD5 to check, the MD5 in file order (read back, see _file_hasher);
        # without one, each unit hashed as it streams past, nothing read back (_unit_hasher).
        hasher = (
            FileHasher(new_md5(), fd, size, unit, run.read_backs)
            if run.hash_files and md5
            else None
        )
        listed = UnitHasher(fd, size, unit) if run.hash_files and not md5 else None
        for i in sorted(done):
            if hasher:
                await hasher.block_done(i)
            if listed:
                await listed.unit_done(i)
        # Writeback is started as spans land wherever the file is synced before it is named
        # (fsync, or batch's sync point): the disk writes while the network reads, and the sync
        # finds little left (batch without it: the whole file waited for the sync point, ~30 %
        # slower end to end for ~5 % more CPU). Under ``none`` the kernel's flusher writes it.
        # Past the page cache where the store's threads read it and nothing reads it back
        # while it is written, into a local file system (see _direct_write).
        writer = (
            DirectWriter(dst.partial(key), fd)
            if hasher is None and src.direct_gets() is not None and local_disk(dst)
            else None
        )
        bypassing = writer is not None and writer.bypassing
        spans = WritebackSpans(size, unit, done) if run.durability != "none" else None
        spans = None if bypassing else spans  # (nothing dirty to start writing back)

        def write(pos: int, chunk: bytes | memoryview) -> None:
            # Each piece is written (and hashed, where it is hashed as it comes) as it arrives,
            # while it is in the CPU cache: on the loop, or on the store's reading thread.
            try:
                if writer is not None:
                    writer.write(pos, chunk)
                else:
                    write_all(fd, chunk, pos)
            except OSError as exc:
                raise disk_error(exc, dst.partial(key)) from exc
            if listed and not bypassing:  # (bypassing: hashed as it landed, the tap below)
                listed.chunk(pos, chunk)

        async def finished(i: int, start: int, end: int) -> None:
            nbytes = end - start
            if resumable:
                run.journal.block_done(key, etag, i)
            if hasher:
                await hasher.block_done(i)
            if listed:
                await listed.unit_done(i)
            if units > 1 and spans and (span := spans.landed(i)):  # (one unit: fsynced at once)
                # After the record: starting writeback can wait on a busy disk.
                await asyncio.to_thread(start_writeback, fd, *span)
            run.moved(nbytes)
            run.progress(nbytes)

        # The one ranged-read component (stream's and checkpoint's too): a failed request stops
        # the others, and every request finishes (or gives up) before it returns, so no late
        # write lands in whichever file reuses the descriptor number.
        await fetch_ranges(
            src,
            key,
            size,
            write,
            range_size=unit,
            per_request=max(run.block_size, min(REQUEST, size // REQUESTS_PER_FILE)) // unit,
            window=max(WINDOW, run.concurrency // 4),
            gate=run.requests,
            etag=etag,
            skip=done,
            range_done=finished,
            piece=DIRECT_PIECE if bypassing else None,
            tap=listed.chunk if listed and bypassing else None,
        )
        digest = hasher.hexdigest() if hasher else listed.hexdigest() if listed else None
        if md5 and digest and digest != md5:
            run.journal.mark_pending(key)
            os.close(fd)
            fd = -1
            dst.partial(key).unlink(missing_ok=True)
            raise ChecksumError(
                f"{src}/{key}: MD5 {digest} of the copy does not match the "
                f"source's Content-MD5 {md5}; re-run to fetch it again"
            )
        whole, fd = fd, -1  # publish closes it, whatever happens
        if run.durability == "batch":  # named and recorded at the engine's next sync point
            os.close(whole)
            run.unpublished.add(key)
            return digest
        sync = run.durability == "fsync"
        await asyncio.to_thread(dst.publish, key, whole, sync=sync, sync_dir=False)
        run.published(key)
        return digest
    finally:
        if writer is not None:
            writer.close()
        if hasher:
            hasher.close()
        if fd >= 0:
            os.close(fd)
