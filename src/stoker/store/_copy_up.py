"""Any to remote: a local file up to an object store, or an object relayed from another object
store that cannot copy it itself, through a spool file (see _spool).

A file up to ``block_size`` is read once and sent in one request; a larger one goes in blocks
that the store hashes as it reads them (see _blocks). A file written to while it was read is
failed, not sent torn: the re-run, which sees its new size or mtime, sends it again.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING

import xxhash

from ..errors import SourceChangedError, StoreError
from ._base import Store
from ._blocks import take_resumed
from ._copy_down import download
from ._posix import PosixStore
from ._read_backs import ReadBacks
from ._small import named
from ._spool import spool_folder

if TYPE_CHECKING:
    from ._copy import CopyRun

RELAY_REQUESTS = 4  # a relayed object's ranged reads in flight (its own, not the run's)


async def upload(
    src: Store, dst: Store, key: str, size: int, etag: str, run: CopyRun
) -> str | None:
    """A local file up as ``key``; returns its hash when hashing (XXH3, or the MD5 the store
    computed as it sent the blocks)."""
    assert isinstance(src, PosixStore)
    path = src.path(key)
    try:
        if size <= run.block_size:
            # Read once, hash what was read, send it in one request (the service
            # records its Content-MD5).
            data = await asyncio.to_thread(path.read_bytes)
            digest = named(xxhash.xxh3_128(data)) if run.hash_files else None
            resumed = 0
            async with run.requests:
                await dst.write_bytes(key, data)
        else:  # in blocks: the store hashes the file as it sends it; each block
            # takes a slot of the run's requests (not the file: see upload_file)
            digest = await dst.write_file(key, path, size, gate=run.requests)
            digest = digest if run.hash_files else None
            resumed = take_resumed(dst, key)  # (blocks an earlier run sent)
    except FileNotFoundError:
        digest, changed, resumed = None, True, 0  # (this file's failure, not the run's)
    except OSError as exc:  # an unreadable source file fails alone
        raise StoreError(
            f"cannot read {path}: {exc.strerror or exc}; fix its permissions, or --exclude it"
        ) from exc
    else:
        changed = False
    # A file written to while it was read goes up torn: fail it, and the re-run (which
    # sees its new size or mtime) sends it again.
    now = await src.head(key)
    if changed or now is None or now.etag != etag:
        raise SourceChangedError(
            f"{src}/{key} changed while it was being copied; re-run to copy it again"
        )
    run.moved(size - resumed)
    run.progress(size)
    return digest


async def relay(
    src: Store, dst: Store, key: str, size: int, etag: str, md5: str | None, run: CopyRun
) -> str | None:
    """Object store to object store elsewhere: down into a temporary file, block by block (not
    recorded for resume: the file goes with the run), then up."""
    assert run.spool is not None
    moved = 0

    def count(nbytes: int) -> None:
        nonlocal moved
        moved += nbytes

    with spool_folder(run.spool) as folder:
        spool = PosixStore(folder)
        down = dataclasses.replace(
            run,
            requests=asyncio.Semaphore(RELAY_REQUESTS),
            concurrency=RELAY_REQUESTS,
            moved=count,  # (the run's own count grows only once the object is down)
            record_blocks=False,
            read_backs=ReadBacks(),
            writer=None,
            folders=set(),  # (the spool's folder goes with it: nothing to make durable)
            durability="none",  # (nor its file: it is read back at once, then deleted)
        )
        digest = await download(src, spool, key, size, etag, md5, down)
        run.moved(moved)
        carried = digest if digest and ":" not in digest else md5  # only an MD5 is carried
        async with run.requests:
            await dst.write_file(key, spool.path(key), size, carried)
    return digest
