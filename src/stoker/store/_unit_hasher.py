"""``UnitHasher``: a download's hash taken from its bytes as they arrive, never read back.

A blob uploaded in blocks usually has no Content-MD5: there is nothing to check the copy
against, and the hash stoker records is for later checks of the copy (a resumed or audited
file). One hash of the file in order would have to wait for the ranges that land out of order
and read them back from the page cache (what ``FileHasher`` does for MD5, which must be in file
order to compare with Content-MD5): for 2 x 1 GiB that read-back was most of the file again.
Here each resume unit (4 MiB) is hashed with XXH3-128 as its pieces stream past (within one
request they come in order, still in the CPU cache), and the file's hash is XXH3-128 of the
units' 16-byte digests in file order: a hash list, written ``xxh128/<unit bytes>:<hex>``
(``list_digest`` recomputes it from a file). Only the units a resumed run kept from an earlier
one are read back (they did not come through this run).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import xxhash

from ..errors import StoreError


def hash_list_name(unit: int, digests: list[bytes]) -> str:
    """The recorded form of a hash list of ``unit``-byte units."""
    return f"xxh128/{unit}:{xxhash.xxh3_128(b''.join(digests)).hexdigest()}"


def list_digest(path: Path, unit: int) -> str:
    """The hash list of the file at ``path`` (what ``UnitHasher`` records for it)."""
    digests: list[bytes] = []
    with open(path, "rb") as f:
        while True:
            piece = f.read(unit)
            if not piece and digests:
                break
            digests.append(xxhash.xxh3_128(piece).digest())
            if len(piece) < unit:
                break
    return hash_list_name(unit, digests)


class UnitHasher:
    """Hash each ``unit`` of a ``size``-byte file from the pieces written at their offsets
    (``chunk``), each unit's digest taken when it is finished (``unit_done``)."""

    def __init__(self, fd: int, size: int, unit: int) -> None:
        self.fd, self.size, self.unit = fd, size, unit
        self.digests: list[bytes | None] = [None] * max(1, -(-size // unit))
        self.open: dict[int, tuple[xxhash.xxh3_128, int]] = {}  # unit -> (hash, next offset)
        self.stray: set[int] = set()  # units whose pieces did not come in order: read back

    def _span(self, i: int) -> tuple[int, int]:
        return i * self.unit, min(self.size, (i + 1) * self.unit)

    def chunk(self, pos: int, data: bytes | memoryview) -> None:
        """``data`` was written at ``pos``; it may run across units."""
        view = memoryview(data).cast("B")
        while view:
            i = pos // self.unit
            start, end = self._span(i)
            hasher, expected = self.open.get(i) or (None, start)
            n = min(len(view), end - pos)
            if pos != expected or i in self.stray:  # (a retried piece, say): read it back
                self.stray.add(i)
                self.open.pop(i, None)
            else:
                hasher = hasher or xxhash.xxh3_128()
                hasher.update(view[:n])
                self.open[i] = (hasher, pos + n)
            view, pos = view[n:], pos + n

    async def unit_done(self, i: int) -> None:
        """Unit ``i`` is written whole: its digest, from the pieces hashed as they came, else
        (a unit an earlier run wrote, or one whose pieces came out of order) read back."""
        start, end = self._span(i)
        hasher, reached = self.open.pop(i, (None, start))
        if hasher is not None and reached == end and i not in self.stray:
            self.digests[i] = hasher.digest()
        elif start == end:  # (an empty file's one unit)
            self.digests[i] = xxhash.xxh3_128().digest()
        else:
            self.digests[i] = await asyncio.to_thread(self._read_back, start, end)

    def _read_back(self, start: int, end: int) -> bytes:
        hasher, pos = xxhash.xxh3_128(), start
        while pos < end:
            piece = os.pread(self.fd, min(1 << 20, end - pos), pos)
            if not piece:
                raise StoreError(f"the partial file ended at byte {pos} of {self.size}")
            hasher.update(piece)
            pos += len(piece)
        return hasher.digest()

    def hexdigest(self) -> str:
        missing = [i for i, d in enumerate(self.digests) if d is None]
        if missing:  # (fetch_ranges finishes every unit before it returns)
            raise StoreError(f"units {missing[:5]} of the file were never finished")
        return hash_list_name(self.unit, [d for d in self.digests if d is not None])
