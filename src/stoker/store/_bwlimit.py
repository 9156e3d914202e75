"""``--bwlimit``: one token bucket for every transfer of a run, whatever its direction.

Each piece of data moved (a downloaded chunk, an uploaded block) takes its size from the
bucket before it goes on; a piece that finds the bucket empty waits until the rate has paid
for it. The bucket is a GCRA (virtual scheduling): one number, the time at which all pieces
taken so far are paid for, moved forward by ``n / rate`` per piece, so concurrent transfers
share the rate in the order they asked. The first piece finds the bucket empty; later, up to
``burst`` bytes the transfers fell behind by (an idle spell, a piece whose copy took long) may
pass at once, so the rate over a copy stays the cap rather than under it.
"""

from __future__ import annotations

import asyncio
import threading
import time

from ..errors import UnitError
from ..units import parse_bytes, parse_rate

PIECE = 16 << 20  # the largest piece a taker asks for at once (a local copy's, _posix.COPY_PIECE)


def parse_bwlimit(value: float | str) -> float:
    """Bytes per second from ``100MB/s``, ``800Mb/s`` (bits), ``100MiB/s``, or a bare size
    taken per second, as rclone writes it: ``100M`` is 100 MB/s (decimal, bytes; ``100Mi`` for
    MiB/s). Must be at least 1 KB/s."""
    try:
        rate = parse_rate(value)
    except UnitError:
        try:
            rate = parse_bytes(value)
        except UnitError:
            raise UnitError(
                f"cannot read {value!r} as a rate; write it like '100M' or '100MB/s' (bytes per "
                "second), '800Mb/s' (bits), '100MiB/s'"
            ) from None
    if not rate >= 1000:
        raise UnitError(f"{value!r} is under 1 KB/s: a rate that low would never finish")
    return rate


class Bandwidth:
    """A rate in bytes per second shared by everything that calls ``take``; safe to call
    from several threads and event loops (each waits on its own)."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        self.rate = float(rate)
        # Up to 50 ms of the rate passes unpaced, and at least one piece (16 MiB, a local
        # copy's; unless that is more than a second of the rate): a piece paid for in advance
        # never makes the next wait for the time the copy of the last took.
        if burst is None:
            burst = max(self.rate * 0.05, min(float(PIECE), self.rate))
        self.slack = burst / self.rate
        self._paid_until: float | None = None  # (the first piece finds the bucket empty)
        self._lock = threading.Lock()
        self.taken = 0  # bytes taken in all (for tests and benchmarks)

    def reserve(self, nbytes: int) -> float:
        """Take ``nbytes``; returns how long to wait before they may go (0: at once)."""
        with self._lock:
            now = time.monotonic()
            if self._paid_until is None:  # no burst at the start: the run's first bytes are paced
                self._paid_until = now + self.slack
            self._paid_until = max(self._paid_until, now - self.slack) + nbytes / self.rate
            self.taken += nbytes
            return max(0.0, self._paid_until - now - self.slack)

    async def take(self, nbytes: int) -> None:
        if nbytes > 0 and (wait := self.reserve(nbytes)) > 0:
            await asyncio.sleep(wait)

    def take_blocking(self, nbytes: int) -> None:
        """``take`` for a worker thread."""
        if nbytes > 0 and (wait := self.reserve(nbytes)) > 0:
            time.sleep(wait)


async def take(limiter: Bandwidth | None, nbytes: int) -> None:
    """``limiter.take(nbytes)`` when the run has a limit (``Store.limiter``), else nothing."""
    if limiter is not None:
        await limiter.take(nbytes)
