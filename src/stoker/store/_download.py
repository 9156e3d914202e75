"""Ranged reads of one object, in parallel: the one component that fetches an object by ranges.

``fetch_ranges`` reads ``[start, end)`` as ranges of ``range_size``, ``in_flight`` requests at a
time (or under a caller's semaphore shared with other work), hands each piece to
``sink(pos, piece)`` as it arrives (while it is in the CPU cache: a whole range handed over at
once was copied from memory, and took about twice the CPU), and calls ``range_done(i, start,
end)`` as each range completes, so that a caller can record it (resume), hash it in order, or
start its writeback. One request may span up to ``per_request`` consecutive ranges: the range
stays the unit of resume, reported as the stream passes its end, while the store serves fewer,
larger requests. With ``window``, at most that many of the call's requests are in flight,
started in range order, so that the ranges land roughly in order (a caller that hashes them in
order then hashes while the rest arrive). Ranges in ``skip`` are not fetched (finished before a
crash). A failure stops the other requests at their next piece, and every request, and every
``range_done`` it started, has finished or given up before the first error is raised: nothing
of this call writes after it returns.

``download`` is it into one local file, written in place and fsynced (a checkpoint's file, a
stream's shard).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import Any

from ._base import Store
from ._posix import write_all

RANGE = 16 << 20
IN_FLIGHT = 8


def requests_for(count: int, skip: Collection[int], per_request: int) -> list[list[int]]:
    """Ranges ``0..count-1`` less ``skip``, grouped into runs of at most ``per_request``
    consecutive ranges: one request each."""
    requests: list[list[int]] = []
    for i in range(count):
        if i in skip:
            continue
        if requests and requests[-1][-1] == i - 1 and len(requests[-1]) < per_request:
            requests[-1].append(i)
        else:
            requests.append([i])
    return requests


async def fetch_ranges(
    store: Store,
    key: str,
    end: int,
    sink: Callable[[int, bytes | memoryview], None],
    *,
    start: int = 0,
    range_size: int = RANGE,
    in_flight: int = IN_FLIGHT,
    gate: asyncio.Semaphore | None = None,
    etag: str | None = None,
    skip: Collection[int] = (),
    range_done: Callable[[int, int, int], Awaitable[None] | None] | None = None,
    per_request: int = 1,
    window: int | None = None,
    piece: int | None = None,
    tap: Callable[[int, memoryview], None] | None = None,
) -> None:
    """Fetch ``key``'s bytes ``[start, end)`` by ranges into ``sink(pos, piece)``, ``pos`` the
    piece's offset in the object; range ``i`` is ``[start + i * range_size, ...)`` (see the
    module doc). ``piece``: the size of the pieces a store's threads hand over (see
    _direct_get; whole pieces but each request's last). ``tap(pos, part)`` sees the bytes as
    they land, before the sink has their piece (a hash taken while they are in the cache)."""
    gate = gate or asyncio.Semaphore(in_flight)
    # (asyncio's semaphores wake their waiters first come, first served: the requests are
    # created in range order, so they start in it)
    ordered = asyncio.Semaphore(window) if window else contextlib.nullcontext()
    failed = False

    def span(i: int) -> tuple[int, int]:
        first = start + i * range_size
        return first, min(first + range_size, end)

    def finish(i: int, started: list[asyncio.Future]) -> None:
        outcome = range_done(i, *span(i)) if range_done is not None else None
        if outcome is not None:  # (it goes on while the request reads its next range)
            started.append(asyncio.ensure_future(outcome))

    async def one(ids: list[int]) -> None:
        nonlocal failed
        first, last = span(ids[0])[0], span(ids[-1])[1]
        started: list[asyncio.Future] = []
        try:
            async with ordered, gate:
                if failed:  # a sibling failed: the caller will fetch again
                    return
                if direct is not None and first < last:
                    n = await _on_thread(
                        direct,
                        f"{store}/{key}",
                        key,
                        first,
                        last,
                        etag,
                        sink_locked,
                        [span(i)[1] for i in ids],
                        lambda n: finish(ids[n], started),
                        lambda: failed,
                        piece,
                        tap,
                    )
                    if failed:
                        return
                else:
                    pos, n = first, 0
                    async for chunk in store.read_chunks(key, first, last, etag):
                        if failed:
                            return
                        if tap is not None:
                            tap(pos, chunk)
                        sink(pos, chunk)
                        pos += len(chunk)
                        while n < len(ids) and pos >= span(ids[n])[1]:
                            finish(ids[n], started)
                            n += 1
            for i in ids[n:]:  # (an empty object's one empty range)
                finish(i, started)
        except BaseException:
            failed = True
            raise
        finally:
            # A finished range's record, hash or writeback completes before this returns: the
            # caller closes the file after it.
            outcomes = await asyncio.gather(*started, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                failed = True
                raise outcome

    direct = store.direct_gets()  # (each request on its threads, where the store has them)
    # One thread at a time in the sink: buffered writes to one file take its inode lock, and
    # threads that wait for it spun on the CPU (2-4x the system time of an import); the sink's
    # own state (a unit's hash) is then one thread's at a time too.
    one_at_a_time = threading.Lock()

    def sink_locked(pos: int, piece: bytes | memoryview) -> None:
        with one_at_a_time:
            sink(pos, piece)

    ranges = max(1, -(-(end - start) // range_size))  # (nothing to read is one empty range)
    outcomes = await asyncio.gather(
        *(one(ids) for ids in requests_for(ranges, skip, per_request)), return_exceptions=True
    )
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


async def _on_thread(
    direct: Any,
    what: str,
    key: str,
    first: int,
    last: int,
    etag: str | None,
    sink: Callable[[int, bytes | memoryview], None],
    ends: list[int],
    finish: Callable[[int], None],
    failed: Callable[[], bool],
    piece: int | None = None,
    tap: Callable[[int, memoryview], None] | None = None,
) -> int:
    """One request read on ``direct``'s threads (_direct_get): the sink takes each piece there,
    and ``finish(n)`` runs on the loop as the read passes ``ends[n]``; returns how many ranges
    it finished. Cancelled, it stops the thread at its next piece and waits for it: nothing of
    the request writes after this returns."""
    from ._direct_get import Ticket

    loop = asyncio.get_running_loop()
    ticket = Ticket(failed)
    passed = 0

    def on_pos(pos: int) -> None:  # (on the thread)
        nonlocal passed
        while passed < len(ends) and pos >= ends[passed]:
            loop.call_soon_threadsafe(finish, passed)
            passed += 1

    read = functools.partial(direct.read, piece=piece, tap=tap) if piece else direct.read
    args = (what, key, first, last, etag, sink, on_pos, ticket)
    work = loop.run_in_executor(direct.pool, read, *args)
    try:
        await asyncio.shield(work)
    except asyncio.CancelledError:
        ticket.stop()
        await asyncio.wait([work])
        raise
    await asyncio.sleep(0)  # (the finishes it scheduled run before the caller goes on)
    return passed


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
    """``key`` into the file ``dest`` (created or truncated), ranges in parallel, fsynced."""
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        # Every range finishes before the fd is closed (fetch_ranges waits for them all): a
        # late write must never land in whichever file reuses the descriptor number.
        await fetch_ranges(
            store,
            key,
            size,
            lambda pos, piece: write_all(fd, piece, pos),  # (a pwrite may write less)
            range_size=range_size,
            in_flight=in_flight,
        )
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
