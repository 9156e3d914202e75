"""The stage benchmark's ceilings: what the emulator serves (obstore reading the dataset to
memory, writing it from memory) and what the disk does (dd, O_DIRECT)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

import _peers
from _peers import ACCOUNT, BENCH, Azurite
from _stage_data import MiB, Shape
from _stage_tools import DST_CONTAINER, SRC_CONTAINER, drop_caches

CEILING_INFLIGHT, CEILING_RANGE = (32, 8), 16 * MiB  # the ceiling is the best of these


def _obstore(az: Azurite, container: str):
    from obstore.store import AzureStore

    return AzureStore(
        container,
        config={"account_name": ACCOUNT, "account_key": _peers.KEY, "endpoint": az.endpoint},
        client_options={"allow_http": True},
    )


def _ranges(shape: Shape) -> list[tuple[str, int, int]]:
    """Whole small objects; 16 MiB ranges of the large ones."""
    out = []
    for key, size in zip(shape.keys, shape.sizes, strict=True):
        out += [(key, s, min(size, s + CEILING_RANGE)) for s in range(0, size, CEILING_RANGE)]
    return out


async def _read_all(store, prefix: str, ranges: list[tuple[str, int, int]], inflight: int) -> None:
    import obstore

    gate = asyncio.Semaphore(inflight)

    async def one(key: str, start: int, end: int) -> None:
        async with gate:
            await obstore.get_range_async(store, prefix + key, start=start, end=end)

    await asyncio.gather(*(one(*r) for r in ranges))


def request_bound(shape: Shape) -> bool:
    """Objects under 1 MiB on average: the emulator's requests per second bound every tool."""
    return shape.nbytes / shape.files < MiB


def inflight_levels(shape: Shape) -> tuple[int, ...]:
    """Request-bound shapes try only the first level: more in flight never hurts them, and
    each try costs minutes on 20,000 objects."""
    return CEILING_INFLIGHT[:1] if request_bound(shape) else CEILING_INFLIGHT


def read_ceiling_s(shape: Shape, az: Azurite) -> float:
    """Seconds to read the whole dataset to memory, as fast as obstore goes here."""
    store = _obstore(az, SRC_CONTAINER)
    times = []
    for inflight in inflight_levels(shape):
        start = time.perf_counter()
        asyncio.run(_read_all(store, f"{shape.name}/", _ranges(shape), inflight))
        times.append(time.perf_counter() - start)
    return min(times)


async def _write_all(store, shape: Shape, pool: bytes, inflight: int) -> None:
    import obstore

    gate = asyncio.Semaphore(inflight)
    view = memoryview(pool)

    async def one(key: str, size: int) -> None:
        async with gate:
            if size <= CEILING_RANGE:
                await obstore.put_async(store, key, view[:size], use_multipart=False)
            else:
                chunks = [
                    view[: min(CEILING_RANGE, size - s)] for s in range(0, size, CEILING_RANGE)
                ]
                await obstore.put_async(
                    store, key, chunks, chunk_size=CEILING_RANGE, max_concurrency=inflight
                )

    await asyncio.gather(*(one(k, s) for k, s in zip(shape.keys, shape.sizes, strict=True)))


def write_ceiling_s(shape: Shape) -> float:
    """Seconds to write the dataset from memory into a fresh emulator, as fast as obstore goes."""
    pool = os.urandom(CEILING_RANGE)
    times = []
    for inflight in inflight_levels(shape):
        with Azurite() as az:
            az.create_container(DST_CONTAINER)
            store = _obstore(az, DST_CONTAINER)
            start = time.perf_counter()
            asyncio.run(_write_all(store, shape, pool, inflight))
            times.append(time.perf_counter() - start)
    return min(times)


def disk_ceilings(nbytes: int) -> dict[str, float]:
    """O_DIRECT sequential write and read with dd, MB/s: what the local disk allows."""
    path = BENCH / "dd.bin"
    count = max(1, nbytes // (16 * MiB))
    out = {}
    for name, argv in (
        (
            "write",
            [
                "dd",
                "if=/dev/zero",
                f"of={path}",
                "bs=16M",
                f"count={count}",
                "oflag=direct",
                "conv=fsync",
            ],
        ),
        ("read", ["dd", f"if={path}", "of=/dev/null", "bs=16M", "iflag=direct"]),
    ):
        drop_caches()
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        out[name] = count * 16 * MiB / (time.perf_counter() - start) / 1e6
    path.unlink()
    return out
