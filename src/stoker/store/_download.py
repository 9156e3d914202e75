"""One object into one local file: ranges in parallel, written in place, fsynced."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from ._base import Store
from ._posix import write_all

RANGE = 16 << 20
IN_FLIGHT = 8


async def download(
    store: Store,
    key: str,
    size: int,
    dest: Path,
    *,
    range_size: int = RANGE,
    in_flight: int = IN_FLIGHT,
    sync: bool = True,
) -> None:
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    gate = asyncio.Semaphore(in_flight)

    async def one(start: int) -> None:
        async with gate:
            # Each piece is written as it arrives, on the loop's thread, while it is still in
            # the CPU cache (as stage's engine does): a whole range written at once is copied
            # from memory, and took about twice the CPU.
            pos = start
            async for piece in store.read_chunks(key, start, min(start + range_size, size)):
                write_all(fd, piece, pos)  # (a pwrite may write less)
                pos += len(piece)

    try:
        # Every range finishes before the fd is closed: a late write must never land in
        # whichever file reuses the descriptor number.
        outcomes = await asyncio.gather(
            *(one(s) for s in range(0, size, range_size)), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
