"""Local to local: a file from one folder into another, copied by the kernel.

A small file (up to the run's ``small``) is read in a writer's thread and written with others
in one thread call (see _small); a larger one is copied by ``copy_file_range`` (see
``PosixStore.write_file``), its writeback started as it goes. Either way the folder's fsync is
left to the run's end, once per folder.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import xxhash

from ._base import Store
from ._bwlimit import take
from ._posix import PosixStore
from ._small import Job, from_file, named, read_ahead

if TYPE_CHECKING:
    from ._copy import CopyRun


async def copy_small_local(src: Store, dst: Store, key: str, size: int, run: CopyRun) -> str | None:
    """A small file, read (and hashed, if hashing) in the writer's thread; returns its hash."""
    assert isinstance(src, PosixStore) and isinstance(dst, PosixStore) and run.writer
    final = dst.file(key)  # (checked before anything is read)
    path = src.file(key)
    await take(dst.limiter, size)  # (--bwlimit; a remote source's reads take)
    job = Job(key, final, from_file(path, size, run.hash_files), read_ahead(path))
    digest = await run.writer.write(job)
    run.published(key)
    run.moved(size)
    run.progress(size)
    return digest


async def copy_local(src: Store, dst: Store, key: str, size: int, run: CopyRun) -> str | None:
    """A large file, copied in the kernel; its XXH3 read back from the copy when hashing."""
    assert isinstance(src, PosixStore) and isinstance(dst, PosixStore)
    async with run.requests:
        await dst.write_file(key, src.path(key), size, sync_dir=False)
    run.published(key)
    run.moved(size)
    run.progress(size)
    if run.hash_files:
        return await asyncio.to_thread(path_digest, dst.path(key))
    return None


def path_digest(path: Path) -> str:
    hasher = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            hasher.update(chunk)
    return named(hasher)
