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
            data = await store.read_range(key, start, min(start + range_size, size))
            await asyncio.to_thread(write_all, fd, data, start)  # (a pwrite may write less)

    try:
        await asyncio.gather(*(one(s) for s in range(0, size, range_size)))
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
