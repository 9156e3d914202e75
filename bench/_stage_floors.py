"""The floors of an import in Python: the least CPU any Python program spends to move the same
blobs into files, with nothing stoker adds (no listing, no journal, no hash, no sync, no
progress). Run by bench/stage_cpu.py ``--floors`` as a script, one process a run, beside
stoker and rclone:

    python _stage_floors.py obstore|httpclient JOB.json DEST

JOB.json holds the endpoint, the account, the container, its key (obstore) or a read SAS
(httpclient: made by the parent, outside the clock) and every blob's name and size (the
listing is the parent's too). Each blob of more than REQUEST bytes is fetched in ranged
requests of REQUEST bytes, STREAMS at once across all blobs (rclone's streams in the bench),
and written at its offsets as the bytes arrive:

* ``obstore``: the library stoker fetches with, as its docs show a ranged stream
  (``get_async(range=...)``, ``stream(min_chunk_size=1 MiB)``), each piece ``os.pwrite`` n.
* ``httpclient``: the standard library alone, one ``http.client`` connection a thread,
  ``readinto`` one reused 256 KiB buffer, then ``os.pwrite`` through the page cache: the fewest
  copies and objects a Python loop can make (stoker's own path then skips the page cache).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, urlsplit

REQUEST = 32 << 20
STREAMS = 16
PIECE = 256 << 10  # (as stoker.store._direct_get: the copies stay in the cache)


def ranges(blobs: list[dict]) -> list[tuple[str, int, int, int]]:
    """(name, size, start, end) of every request, in blob order."""
    return [
        (b["name"], b["size"], start, min(b["size"], start + REQUEST))
        for b in blobs
        for start in range(0, max(1, b["size"]), REQUEST)
    ]


def open_files(blobs: list[dict], dest: Path) -> dict[str, int]:
    fds = {}
    for b in blobs:
        path = dest / b["name"]
        path.parent.mkdir(parents=True, exist_ok=True)
        fds[b["name"]] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    return fds


def with_obstore(job: dict, fds: dict[str, int]) -> None:
    import obstore
    from obstore.store import AzureStore

    store = AzureStore(
        container_name=job["container"],
        account_name=job["account"],
        access_key=job["key"],
        endpoint=job["endpoint"],
        client_options={"allow_http": True},
    )

    async def main() -> None:
        gate = asyncio.Semaphore(STREAMS)

        async def one(name: str, start: int, end: int) -> None:
            async with gate:
                got = await obstore.get_async(store, name, options={"range": (start, end)})
                pos = start
                async for piece in got.stream(min_chunk_size=PIECE):
                    pos += os.pwrite(fds[name], piece, pos)

        await asyncio.gather(*(one(name, a, b) for name, _, a, b in ranges(job["blobs"])))

    asyncio.run(main())


def with_http_client(job: dict, fds: dict[str, int]) -> None:
    import http.client
    import threading

    where = urlsplit(job["endpoint"])
    local = threading.local()
    locks = {name: threading.Lock() for name in fds}

    def one(request: tuple[str, int, int, int]) -> None:
        name, _, start, end = request
        if not hasattr(local, "conn"):
            local.conn = http.client.HTTPConnection(where.netloc)
            local.buf = memoryview(bytearray(PIECE))
        path = f"{where.path}/{job['container']}/{quote(name)}?{job['sas']}"
        local.conn.request("GET", path, headers={"x-ms-range": f"bytes={start}-{end - 1}"})
        response = local.conn.getresponse()
        if response.status not in (200, 206):
            raise RuntimeError(f"{name}: HTTP {response.status}")
        pos = start
        while pos < end:
            n = response.readinto(local.buf[: min(PIECE, end - pos)])
            if not n:
                raise RuntimeError(f"{name}: the body ended at {pos} of {end}")
            with locks[name]:
                os.pwrite(fds[name], local.buf[:n], pos)
            pos += n
        response.read()  # (the connection is reused)

    # As stoker's reader threads (store/_direct_get.pool_size): more than ~2 a core spend more
    # CPU handing the GIL over than on the bytes; one writer a file at a time (its inode lock).
    threads = max(1, min(STREAMS, max(4, 2 * (os.cpu_count() or 1))))
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, ranges(job["blobs"])))


if __name__ == "__main__":
    how, job_path, dest = sys.argv[1:4]
    job = json.loads(Path(job_path).read_text())
    fds = open_files(job["blobs"], Path(dest))
    {"obstore": with_obstore, "httpclient": with_http_client}[how](job, fds)
    for fd in fds.values():
        os.close(fd)
