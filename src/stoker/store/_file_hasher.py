"""``FileHasher``: a file's hash in file order while its blocks land out of order.

The engine writes a download's blocks as their pieces arrive, in any order; the MD5 it checks
against Content-MD5 must still be of the file from its first byte.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from ..errors import StoreError
from ._read_backs import READ_BACK, ReadBacks
from ._small import named


class FileHasher:
    """Hash a file in order while its blocks land out of order, holding nothing in memory.

    XXH3: a piece that lands exactly where the hash stands is hashed at once on the loop's
    thread, still in the CPU cache (a hop per piece cost more than it saved). MD5 is too slow for
    the loop's thread: there every file's MD5 was one queue on one core. A block that finished
    ahead of the hash, and every MD5 block, is read back from the file (the page cache) when the
    hash reaches it; MD5's by ``read_backs``, which hashes every file's side by side in a thread
    (the loop goes on writing).
    Only one of the two ever moves ``pos``: a read-back stops at the first unfinished block, and
    while it runs pieces are not hashed at once (that block is read back when it finishes)."""

    def __init__(
        self,
        hasher: Any,  # hashlib's, xxhash's or a LaneMd5: they share no base class
        fd: int,
        size: int,
        block_size: int,
        read_backs: ReadBacks | None = None,
    ) -> None:
        self.hasher, self.fd, self.size, self.block_size = hasher, fd, size, block_size
        self.read_backs = read_backs or ReadBacks()
        self.pos = 0
        self.finished: set[int] = set()
        self.reading_back = False
        self.slow = hasher.name == "md5"
        self.open = self.slow  # counted among read_backs' files under way
        if self.open:
            self.read_backs.opened()

    def chunk(self, offset: int, data: bytes | memoryview) -> None:
        # MD5 is read back on a thread instead: on the loop's thread every file's MD5 would
        # queue on one core.
        if offset == self.pos and not self.reading_back and not self.slow:
            self.hasher.update(data)
            self.pos += len(data)

    async def block_done(self, idx: int) -> None:
        self.finished.add(idx)
        if self.reading_back:  # the read-back under way will reach it
            return
        self.reading_back = True
        try:
            while self.pos < self.size and self.pos // self.block_size in self.finished:
                if self.slow:
                    await self.read_backs.read_back(self)
                else:
                    self._read_back_block()
        finally:
            self.reading_back = False

    def block_end(self) -> int:
        """Where the block that ``pos`` is in ends."""
        return min(self.size, (self.pos // self.block_size + 1) * self.block_size)

    def ready_end(self) -> int:
        """Where the run of finished blocks from ``pos`` ends."""
        idx = self.pos // self.block_size
        while idx in self.finished:
            idx += 1
        return min(self.size, idx * self.block_size)

    def read_piece(self, buffer: memoryview, end: int) -> memoryview:
        """Read the file from ``pos`` into ``buffer``, up to ``end``; what was read."""
        want = min(len(buffer), end - self.pos)
        got = _read_into(self.fd, buffer[:want], self.pos)
        if not got:
            raise StoreError(f"the partial file ended at byte {self.pos} of {self.size}")
        return buffer[:got]

    def _read_back_block(self) -> None:
        """Hash from ``pos`` to the end of its (finished) block, reading it from the file into
        this thread's buffer: a fresh 1 MiB buffer per read, or per file, was a fresh mapping
        whose pages the kernel faulted in and zeroed each time."""
        end = self.block_end()
        while self.pos < end:
            piece = self.read_piece(_thread_buffer(), end)
            self.hasher.update(piece)
            self.pos += len(piece)

    def close(self) -> None:
        """The file is done or failed: a read-back of another no longer waits for this one."""
        if self.open:
            self.open = False
            self.read_backs.closed()

    def hexdigest(self) -> str:
        return named(self.hasher)


_BUFFERS = threading.local()


def _thread_buffer() -> memoryview:
    """This thread's read-back buffer, made on its first read-back."""
    if not hasattr(_BUFFERS, "view"):
        _BUFFERS.view = memoryview(bytearray(READ_BACK))
    return _BUFFERS.view


def _read_into(fd: int, view: memoryview, pos: int) -> int:
    """``pread`` into ``view``; where there is no ``preadv`` (older macOS), through a copy."""
    if hasattr(os, "preadv"):
        return os.preadv(fd, [view], pos)
    piece = os.pread(fd, len(view), pos)
    view[: len(piece)] = piece
    return len(piece)
