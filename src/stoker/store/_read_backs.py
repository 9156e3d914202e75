"""``ReadBacks``: the MD5 read-backs of every file under way, side by side in one thread.

A large file's MD5 is taken by reading its finished blocks back from the page cache in file
order (see _file_hasher). One MD5 is a chain of dependent steps that leaves most of a core idle;
side by side in SIMD lanes (stoker._many_md5) several files hash for a fraction of the CPU they
take apart. So the read-backs of all files share one runner: each round it reads the next piece
of every read-back waiting (up to LANES) and hashes them in one call, and a read-back that
comes while others run joins them at the next round instead of waiting for them to end. A
read-back that would run alone while other files are under way waits up to LINGER for one to
join: downloads finish their blocks at different moments, and without the wait much of a pair of
files is hashed one lane at a time, which costs more a byte. (Figures: docs/stage-cpu-notes.md.)
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING

from .._many_md5 import update_together
from ..errors import StoreError

if TYPE_CHECKING:
    from ._file_hasher import FileHasher

LANES = 16  # the most read-backs hashed in one call (the extension's widest vector)
READ_BACK = 1 << 20  # a round's piece of each: 16 of them stay in the L3 cache (32 MiB)
# The longest a read-back waits for a partner: on 2 x 1 GiB each file finishes a 4 MiB unit
# every ~0.3 s early on, so the other's next one comes within it; the hash falls that far behind
# at most, and the network and the disk go on meanwhile.
LINGER = 0.25
# Only a read-back with this much left waits: on many files of ~1 MiB a small file's wait cost
# more (its slot, its memory) than the lane saves.
LINGER_ABOVE = 4 << 20


# A read-back: its hasher, its waiter, where the blocks finished when it asked end, and when.
Lane = tuple["FileHasher", asyncio.Future[None], int, float]


class ReadBacks:
    """Hash read-backs (``FileHasher``s each through its finished blocks) side by side. Each
    file that will read back is ``opened`` and ``closed`` (its FileHasher does both)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.joined = threading.Condition(self.lock)  # a read-back came, or a file closed
        self.waiting: list[Lane] = []  # under lock
        self.running = False  # a runner is on a thread (under lock)
        self.files = 0  # files under way that will read back (under lock)
        self.buffers: list[memoryview] = []  # one per lane, used by the one runner

    def opened(self) -> None:
        """A file that will read back is under way: a lone read-back may wait for it."""
        with self.lock:
            self.files += 1

    def closed(self) -> None:
        """That file is done (or failed): nobody waits for it any more."""
        with self.lock:
            self.files -= 1
            self.joined.notify()

    async def read_back(self, hasher: FileHasher) -> None:
        """Hash ``hasher``'s file from its position through the blocks finished from there."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        with self.lock:
            self.waiting.append((hasher, done, hasher.ready_end(), time.monotonic()))
            start, self.running = not self.running, True
            self.joined.notify()
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
        active: list[Lane] = []
        try:
            self._rounds(loop, active)
        except BaseException as exc:
            with self.lock:
                stranded = [lane[1] for lane in self.waiting + active]
                self.waiting.clear()
                self.running = False
            for done in stranded:
                _settle(loop, done, exc)  # (they have it: the runner's own future need not)

    def _rounds(
        self,
        loop: asyncio.AbstractEventLoop,
        active: list[Lane],
    ) -> None:
        """Each round takes the next piece of every read-back under way (``active``, kept up to
        date for ``_run``), until none is left."""
        while True:
            with self.lock:
                while True:
                    while self.waiting and len(active) < LANES:
                        active.append(self.waiting.pop(0))
                    if not active:
                        self.running = False
                        return
                    hasher, _, end, since = active[0]
                    wait = since + LINGER - time.monotonic()
                    alone = len(active) == 1 and self.files > 1  # (others under way)
                    if not alone or end - hasher.pos < LINGER_ABOVE or wait <= 0:
                        break
                    self.joined.wait(wait)  # for a partner
            while len(self.buffers) < len(active):
                self.buffers.append(memoryview(bytearray(READ_BACK)))
            hashers, pieces, going = [], [], []
            for (hasher, done, end, since), buffer in zip(active, self.buffers, strict=False):
                try:
                    pieces.append(hasher.read_piece(buffer, end))
                except (OSError, StoreError) as exc:
                    _settle(loop, done, exc)
                    continue
                hashers.append(hasher)
                going.append((hasher, done, end, since))
            update_together([h.hasher for h in hashers], pieces)
            for hasher, piece in zip(hashers, pieces, strict=True):
                hasher.pos += len(piece)
            if len(going) > 1:  # paired: a lane left alone waits anew for a partner
                now = time.monotonic()
                going = [(hasher, done, end, now) for hasher, done, end, _ in going]
            active[:] = [lane for lane in going if lane[0].pos < lane[2]]
            for hasher, done, end, _ in going:
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
