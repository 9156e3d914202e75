"""What every store offers the transfer engine: batched listing, ranged reads, whole writes.

Keys are relative to the URL's prefix and always use ``/``. Listing yields batches so that a
listing of ten million objects never sits in memory at once.
"""

from __future__ import annotations

import abc
import asyncio
import hashlib
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import StoreError

LIST_BATCH = 5000

AccessTier = Literal["Hot", "Cool", "Cold", "Archive"]
"""A Blob access tier, in the service's spelling (what Put Blob and Put Block List take)."""


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str  # an opaque version tag: Blob ETag, or "mtime_ns:size" on POSIX
    md5: str | None = None  # hex; Blob Content-MD5, or the MD5 stoker recorded at upload
    mtime: float | None = None  # last modified, seconds since the epoch (Blob: to the second)


class Store(abc.ABC):
    """One place objects live. ``str(store)`` is safe to print: it never shows a secret."""

    # Set by a stage run (stage/_flags.py): the run's shared bandwidth budget (a Bandwidth,
    # store/_bwlimit.py, taken for each piece of data moved), and for an object store, the
    # access tier and content type of what it writes (None: the service's default tier, a type
    # guessed from the key's extension).
    limiter: Any = None
    tier: AccessTier | None = None
    content_type: str | None = None
    # A listing's --follow-symlinks: only a file system has symbolic links to follow.
    follow_symlinks: bool = False
    # Whether ``modified`` is to the nanosecond on both sides of a comparison (a file
    # system's); Blob's times are whole seconds.
    exact_times: bool = False
    # Which service bills what this store keeps ("azure-blob", "s3", "gcs"), for pricing it;
    # None: a file system, billed with its VM or volume.
    service: str | None = None

    # ---- what the store can do, asked by stage instead of its class (each store answers)
    @property
    def local_root(self) -> Path | None:
        """The folder on this machine this store is (a POSIX store's root), else None."""
        return None

    def direct_gets(self) -> Any:
        """A reader of ranges into a sink on its own threads (``_direct_get.DirectGets``), where
        this store has one for its credentials; else None (``read_chunks`` serves)."""
        return None

    def local_path(self, key: str) -> Path | None:
        """The file on this machine holding ``key`` (checked: never outside the root), or
        None for a store whose objects are not files here."""
        return None

    def modified(self, obj: ObjectInfo) -> float | None:
        """When ``obj`` (as this store listed it) was last modified, if the store says."""
        return obj.mtime

    def link_notes(self) -> list[str]:
        """What the last listing said of symbolic links it skipped, for the summary's notes."""
        return []

    def sync_folders(self, folders: set[str]) -> None:  # noqa: B027 - optional hook
        """Make the renames into these folders (keys' parents, "" the root) durable, once per
        folder for many files written with ``sync_dir=False``. Only a file system has any."""

    @abc.abstractmethod
    def list(self) -> AsyncIterator[list[ObjectInfo]]:
        """Every object under the prefix, in batches of up to LIST_BATCH."""

    @abc.abstractmethod
    async def head(self, key: str) -> ObjectInfo | None:
        """The object's info, or None when it does not exist."""

    @abc.abstractmethod
    async def read_range(
        self, key: str, start: int, end: int, etag: str | None = None
    ) -> bytes | memoryview:
        """Bytes ``[start, end)`` of the object; with ``etag``, only of that version
        (SourceChangedError otherwise)."""

    async def read_chunks(
        self, key: str, start: int, end: int, etag: str | None = None
    ) -> AsyncIterator[bytes | memoryview]:
        """Bytes ``[start, end)`` in pieces, as they arrive; a store that can stream
        overrides this (the default reads the range whole). An empty range gives nothing."""
        if start < end:
            yield await self.read_range(key, start, end, etag)

    @abc.abstractmethod
    async def write_file(
        self,
        key: str,
        source: Path,
        size: int,
        md5: str | None = None,
        *,
        gate: asyncio.Semaphore | None = None,
    ) -> str | None:
        """Upload a local file as the object ``key`` (atomic: readers see old or new). ``md5``:
        the file's MD5 if the caller knows it. Returns the MD5 the object now carries, when the
        store computed or set one (None when the service computed its own, or keeps none).
        Each request holds a slot of ``gate`` (a run's requests, shared by its files)."""

    async def write_bytes(self, key: str, data: bytes) -> None:
        """Store a small object (a manifest, a pointer) as ``key``, atomically."""
        with tempfile.NamedTemporaryFile(prefix="stoker-") as f:
            f.write(data)
            f.flush()
            await self.write_file(key, Path(f.name), len(data), hashlib.md5(data).hexdigest())

    async def create_bytes(self, key: str, data: bytes) -> bool:
        """Store a small object as ``key`` only if none is there: create-only and atomic (a
        reader sees all of it or nothing). True if this call created it, False if an object
        was there already; of two writers racing, exactly one gets True. For a claim that
        must never overwrite another's (a checkpoint prefix's owner)."""
        raise NotImplementedError(f"{self} cannot create an object only where none is")

    async def read_all(self, key: str) -> bytes | None:
        """A small object's bytes, or None when it does not exist, including when another
        process deletes it between the two requests (a record a peer rank removes once done)."""
        info = await self.head(key)
        if info is None:
            return None
        try:
            return bytes(await self.read_range(key, 0, info.size))
        except (FileNotFoundError, StoreError):
            if await self.head(key) is None:
                return None
            raise

    def copies_from(self, src: Store) -> bool:
        """Whether this store's service can copy ``src``'s objects here itself (server-side),
        with no byte passing through this machine."""
        return False

    async def copy_from(
        self,
        src: Store,
        key: str,
        etag: str,
        md5: str | None,
        size: int | None = None,
        gate: asyncio.Semaphore | None = None,
    ) -> str | None:
        """Have the service copy ``src``'s ``key`` (version ``etag``, ``size`` bytes when known)
        to ``key`` here; returns the MD5 the copy carries. Only where ``copies_from(src)``.
        Each request the copy makes holds a slot of ``gate`` (shared by every file of a run)."""
        raise NotImplementedError(f"{self} cannot copy from {src} itself")

    @abc.abstractmethod
    async def delete(self, key: str) -> None:
        """Remove the object; a missing object is not an error."""

    async def create_root(self) -> bool:
        """Make the place writes go (a container), as AzCopy does; True if it was created."""
        return False

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
