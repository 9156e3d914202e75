"""How one object is copied from one store to another: the table of strategies.

Which way an object goes depends on what the two stores can do (asked through ``Store``, never
their class) and, into a folder, on its size:

==================  ===================  =================================================
source              destination          strategy (file)
==================  ===================  =================================================
a folder            a folder             ``copy_local`` / ``copy_small_local`` (_copy_local)
anywhere else       a folder             ``download`` / ``fetch_small`` (_copy_down)
a folder            an object store      ``upload`` (_copy_up)
an object store     one that copies it   ``service_copy`` (_copy_service)
an object store     any other            ``relay`` (_copy_up): down to a spool file, then up
==================  ===================  =================================================

Each strategy takes the stores, the object, and a ``CopyRun``: what it needs of the run that
calls it (its request slots, block size, progress callbacks, resume journal), not the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ._base import Store
from ._copy_down import download, fetch_small
from ._copy_local import copy_local, copy_small_local
from ._copy_service import service_copy
from ._copy_up import relay, upload
from ._durable import Durability
from ._read_backs import ReadBacks
from ._small import SmallWriter


class Journal(Protocol):
    """Where a download records its finished units, to resume after a crash (a stage run's
    manifest)."""

    def blocks_done(self, key: str, etag: str) -> set[int]: ...

    def block_done(self, key: str, etag: str, i: int) -> None: ...

    def mark_pending(self, key: str) -> None: ...


@dataclass
class CopyRun:
    """What a copy strategy takes from the run that calls it."""

    requests: asyncio.Semaphore  # the run's requests in flight: one slot a request
    block_size: int
    concurrency: int
    hash_files: bool
    progress: Callable[[int], None]  # bytes now done, for the bar (a resume's too)
    moved: Callable[[int], None]  # bytes this run moved (a resume's blocks excluded)
    journal: Journal
    record_blocks: bool = True  # False for a throw-away spool file
    read_backs: ReadBacks = field(default_factory=ReadBacks)  # large files' MD5s side by side
    writer: SmallWriter | None = None  # small files into a folder, written in groups
    small: int = 0  # files up to this many bytes go to the writer
    held: asyncio.Semaphore | None = None  # fetched small files above SMALL held at once
    spool: Path | None = None  # where an object relayed between object stores waits
    folders: set[str] = field(default_factory=set)  # of keys published; fsynced at the end
    durability: Durability = "fsync"  # a large download's, before it is named (see _durable)
    unpublished: set[str] = field(default_factory=set)  # written, waiting for a sync point

    def published(self, key: str) -> None:
        """``key`` was renamed into place; its folder is made durable once, at the end."""
        self.folders.add(key.rpartition("/")[0])


async def copy_object(
    src: Store, dst: Store, key: str, size: int, etag: str, md5: str | None, run: CopyRun
) -> str | None:
    """Copy ``key`` (``size`` bytes, version ``etag``, ``md5`` if the source has one) from
    ``src`` to ``dst``; returns the copy's hash (MD5, or ``xxh128:...``) or None."""
    from_local = src.local_root is not None
    if dst.local_root is not None:
        if size <= run.small and run.writer:
            if from_local:
                return await copy_small_local(src, dst, key, size, run)
            return await fetch_small(src, dst, key, size, etag, md5, run)
        if from_local:
            return await copy_local(src, dst, key, size, run)
        return await download(src, dst, key, size, etag, md5, run)
    if from_local:
        return await upload(src, dst, key, size, etag, run)
    if dst.copies_from(src):  # the service copies it: no byte comes here
        try:
            return await service_copy(src, dst, key, size, etag, md5, run)
        except NotImplementedError:  # it cannot after all (see _blob_copy): relayed
            pass
    return await relay(src, dst, key, size, etag, md5, run)
