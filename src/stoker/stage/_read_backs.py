"""``ReadBacks``: the MD5 read-backs of every file under way, side by side in one thread.

A large file's MD5 is taken by reading its finished blocks back from the page cache in file
order (see _file_hasher). One MD5 is a chain of dependent steps that leaves most of a core idle;
side by side in SIMD lanes (stoker._many_md5) two files hash for ~0.65 of the CPU they take
apart, sixteen for ~0.1. So the read-backs of all files share one runner: each round it reads
the next piece of every read-back waiting (up to LANES) and hashes them in one call, and a read-
back that comes while others run joins them at the next round instead of waiting for them to
end.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING

from .._many_md5 import update_together
from ..errors import StoreError

if TYPE_CHECKING:
    from ._file_hasher import FileHasher

LANES = 16  # the most read-backs hashed in one call (the extension's widest vector)
READ_BACK = 1 << 20  # a round's piece of each: 16 of them stay in the L3 cache (32 MiB)


class ReadBacks:
    """Hash read-backs (``FileHasher``s each to the end of its current block) side by side."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiting: list[tuple[FileHasher, asyncio.Future[None]]] = []  # under lock
        self.running = False  # a runner is on a thread (under lock)
        self.buffers: list[memoryview] = []  # one per lane, used by the one runner

    async def read_back(self, hasher: FileHasher) -> None:
        """Hash ``hasher``'s file from its position to the end of that block."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        with self.lock:
            self.waiting.append((hasher, done))
            start, self.running = not self.running, True
        if start:
            try:
                runner = loop.run_in_executor(None, self._run, loop)
            except BaseException:  # (no thread to run on: the loop is closing)
                with self.lock:
                    self.waiting.clear()
                    self.running = False
                raise
            done.add_done_callback(lambda _: runner)  # (keeps the runner's future referenced)
        await done

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        """Rounds until no read-back is left. Whatever stops them (a bug, no memory for a
        buffer) reaches every waiter, and the next read-back starts a runner again: a waiter
        left unsettled would wait for ever."""
        active: list[tuple[FileHasher, asyncio.Future[None], int]] = []  # (.., its block's end)
        try:
            self._rounds(loop, active)
        except BaseException as exc:
            with self.lock:
                stranded = [done for _, done in self.waiting] + [done for _, done, _ in active]
                self.waiting.clear()
                self.running = False
            for done in stranded:
                _settle(loop, done, exc)  # (they have it: the runner's own future need not)

    def _rounds(
        self,
        loop: asyncio.AbstractEventLoop,
        active: list[tuple[FileHasher, asyncio.Future[None], int]],
    ) -> None:
        """Each round takes the next piece of every read-back under way (``active``, kept up to
        date for ``_run``), until none is left."""
        while True:
            with self.lock:
                while self.waiting and len(active) < LANES:
                    hasher, done = self.waiting.pop(0)
                    active.append((hasher, done, hasher.block_end()))
                if not active:
                    self.running = False
                    return
            while len(self.buffers) < len(active):
                self.buffers.append(memoryview(bytearray(READ_BACK)))
            hashers, pieces, going = [], [], []
            for (hasher, done, end), buffer in zip(active, self.buffers, strict=False):
                try:
                    pieces.append(hasher.read_piece(buffer, end))
                except (OSError, StoreError) as exc:
                    _settle(loop, done, exc)
                    continue
                hashers.append(hasher)
                going.append((hasher, done, end))
            update_together([h.hasher for h in hashers], pieces)
            for hasher, piece in zip(hashers, pieces, strict=True):
                hasher.pos += len(piece)
            active[:] = [(h, done, end) for h, done, end in going if h.pos < end]
            for hasher, done, end in going:
                if hasher.pos >= end:
                    _settle(loop, done, None)


def _settle(
    loop: asyncio.AbstractEventLoop, done: asyncio.Future[None], exc: BaseException | None
) -> None:
    def settle() -> None:
        if done.done():  # its waiter was cancelled
            return
        if exc is None:
            done.set_result(None)
        else:
            done.set_exception(exc)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop is closed: nobody waits for it any more
        pass
