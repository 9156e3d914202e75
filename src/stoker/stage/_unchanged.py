"""Sync: which of the files to copy the destination already has, whatever recorded them.

A file there counts as this one when its size is the source's and it is not older than the
source (as AzCopy's sync decides: the copy is newer than what it copied; where a side is Blob,
whose times are whole seconds, newer by a second), or, with ``checksum``, when its MD5 is the
source's (a local side is hashed, 8 files at a time).
"""

from __future__ import annotations

import asyncio
import hashlib

from ..store import ObjectInfo, Store

Found = tuple[int, float | None, str | None]  # at the destination: size, mtime, MD5


async def unchanged(
    src: Store,
    dst: Store,
    objects: dict[str, ObjectInfo],
    found: dict[str, Found],
    checksum: bool,
) -> set[str]:
    """The keys of the source's ``objects`` whose copy ``found`` at the destination is
    this one."""
    limit = asyncio.Semaphore(8)
    exact = src.exact_times and dst.exact_times

    async def same(key: str) -> bool:
        obj, (size, mtime, md5) = objects[key], found[key]
        if size != obj.size:
            return False
        if not checksum:
            then = src.modified(obj)
            if mtime is None or then is None:
                return False
            if exact:  # both to the nanosecond
                return mtime >= then
            # Blob's times are whole seconds: a source changed in the second its copy was
            # made could look older, so that second counts as changed (copied again).
            return int(mtime) > int(then)
        async with limit:
            mine = obj.md5 or await _local_md5(src, key)
            theirs = (md5 or await _local_md5(dst, key)) if mine else None
        return bool(mine) and mine == theirs

    keys = list(objects)
    verdicts = await asyncio.gather(*(same(key) for key in keys))
    return {key for key, ok in zip(keys, verdicts, strict=True) if ok}


async def _local_md5(store: Store, key: str) -> str | None:
    """A local file's MD5 (None for an object store's object without one)."""
    if store.local_root is None:
        return None

    def digest() -> str | None:
        try:
            path = store.local_path(key)
            if path is None:  # (a folder's store always has one)
                return None
            with open(path, "rb") as f:
                return hashlib.file_digest(f, "md5").hexdigest()
        except OSError:  # gone or unreadable: not the same, copy it
            return None

    return await asyncio.to_thread(digest)
