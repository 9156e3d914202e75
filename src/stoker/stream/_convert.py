"""``write_shards``: a folder of files, JSON lines, NumPy arrays or Parquet into a shard dataset,
by several processes on one node (``workers``) and by every rank of a torchrun job (each its
share of the parts, _parts.py), straight to any stoker URL.

Each part is written as its own shards (``shard-NNNNNN.stk``, numbered by part), then recorded
in ``.stoker-convert/FINGERPRINT/part-NNNNNN.json``. When every part is recorded, rank 0 merges
the records in part order into one ``index.json``, written once and atomically; readers never
see a dataset in the making. A kill of any process loses only the parts under way:
``resume=True`` redoes just the parts without a record, and since a part's bytes depend only on
the input, the dataset is the one an uninterrupted run writes. ``resume=True`` on a complete
dataset adds the inputs beyond the samples it holds (nothing, when the input has not grown).
"""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict
from pathlib import Path
from typing import Any

import xxhash

from ..errors import StreamError
from ..store import IOLoop, open_store
from ..units import parse_bytes
from ._array import ArrayLayout
from ._format import encode_shard
from ._index import INDEX, DatasetIndex, ShardInfo
from ._parts import Part, environment, plan_parts, read_part
from ._sources import KINDS, ShardKind

RECORDS = ".stoker-convert"
POLL_S = 0.5


def write_shards(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    kind: ShardKind = "files",
    keys: bool = False,
    shard_size: int | str = "64MiB",
    compression: str | None = None,
    resume: bool = False,
    workers: int = 1,
    rank: int = 0,
    world_size: int = 1,
    wait_s: float = 3600.0,
    progress: Callable[[int], None] | None = None,
) -> DatasetIndex:
    """Write ``src`` as shards to ``out`` (a folder or any stoker URL); returns the index.

    ``workers``: processes on this node. ``rank`` / ``world_size``: when every rank of a job
    calls this (``stoker shards write`` under torchrun passes RANK and WORLD_SIZE), this one
    converts the parts ``p`` with ``p % world_size == rank``; rank 0 publishes the index once
    every rank's parts are recorded, and fails after ``wait_s`` seconds without a new part from
    the others (run again with ``resume=True``). By default the caller converts it all alone."""
    if kind not in KINDS:
        raise StreamError(f"kind {kind!r}: use one of {', '.join(KINDS)}")
    if not isinstance(workers, int) or workers < 1:
        raise StreamError(f"workers={workers!r}: use a whole number >= 1")
    size = int(parse_bytes(shard_size)) if isinstance(shard_size, str) else shard_size
    if size <= 0:
        raise StreamError(f"shard_size={shard_size!r}: give a positive size, e.g. '64MiB'")
    _check_rank(rank, world_size)
    codec = "pickle" if kind == "files" and keys else KINDS[kind]
    compression = None if compression == "none" else compression  # the CLI's spelling of None
    DatasetIndex(codec, compression)  # (checks the compression)
    root = Path(src)
    out = str(out)
    with _Output(out) as dest:
        base = dest.base(codec, compression, resume)
        parts, fingerprint = plan_parts(root, kind, size, keys=keys, skip=base.samples)
        first = len(base.shards)  # parts are numbered after the shards the dataset holds
        job = dict(
            src=str(root), out=out, kind=kind, keys=keys, shard_size=size, codec=codec,
            compression=compression, fingerprint=fingerprint, first=first, env=environment(),
        )  # fmt: skip
        done = dest.recorded(fingerprint, first, parts) if resume else {}
        if progress:
            progress(sum(r["samples"] for r in done.values()))
        mine = [p for p in parts if p.number % world_size == rank and p.number not in done]
        for record in _convert(job, mine, workers):
            done[record["part"]] = record
            if progress:
                progress(record["samples"])
        if rank == 0:
            done |= dest.wait_for(fingerprint, first, parts, done, wait_s)
            index = _merge(base, [done[p.number] for p in parts], dest.where)
            dest.publish(index, fingerprint, first, parts)
        else:  # rank 0 publishes (and forgets the records, which may go before we see them)
            index = dest.published(base, fingerprint, first, parts, done, wait_s)
    if world_size > 1:
        _barrier()
    return index


def _check_rank(rank: int, world_size: int) -> None:
    if not 0 <= rank < world_size:
        raise StreamError(
            f"rank {rank} of world_size {world_size}: a rank is a whole number from 0 to "
            "world_size - 1 (torchrun sets RANK and WORLD_SIZE)"
        )


def _barrier() -> None:
    """Every rank returns once the index is published, where torch.distributed is started."""
    dist = sys.modules.get("torch.distributed")  # only if the caller uses torch already
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.barrier()


# ---------------------------------------------------------------------- the processes
def _convert(job: dict[str, Any], parts: list[Part], workers: int) -> Iterator[dict[str, Any]]:
    """Convert ``parts`` here (one worker) or in a pool; each part's record as it completes."""
    if workers == 1 or len(parts) <= 1:
        try:
            for part in parts:
                yield convert_part(job, part)
        finally:
            _close_stores()
        return
    context = _process_context()
    with concurrent.futures.ProcessPoolExecutor(
        min(workers, len(parts)), mp_context=context
    ) as pool:
        futures = [pool.submit(convert_part, job, part) for part in parts]
        try:
            for future in concurrent.futures.as_completed(futures):
                yield future.result()
        except BrokenProcessPool as exc:
            raise StreamError(
                f"a conversion process died ({exc}): what it finished is kept; run again with "
                "resume=True (--resume) to write the rest"
            ) from None
        finally:
            for future in futures:
                future.cancel()


def _process_context() -> Any:
    """Fork, where it is safe: a fork starts a worker at once, where a fork server first
    starts an interpreter and imports this module (a fifth of a 2-process conversion of 20,000
    small files). Not safe once this process has loaded the object store client, whose runtime
    (tokio) hangs in a forked child, nor off Linux: there, a fork server (or spawn)."""
    if sys.platform == "linux" and "obstore" not in sys.modules:
        return multiprocessing.get_context("fork")
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return context


_STORES: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[IOLoop, Any]] = {}


def _store(out: str, env: dict[str, str]) -> tuple[IOLoop, Any]:
    """This process's store for ``out`` (one per process: clients do not survive a fork). The
    caller's credentials are set first: a fork server keeps the environment it started with."""
    key = (out, tuple(sorted(env.items())))
    if key not in _STORES:
        for name in [n for n in os.environ if n.startswith(("AZURE_", "STOKER_"))]:
            if name not in env:
                del os.environ[name]
        os.environ.update(env)
        io = IOLoop("stoker-shard-parts")
        _STORES[key] = (io, open_store(out))
    return _STORES[key]


def _close_stores() -> None:
    while _STORES:
        io, store = _STORES.popitem()[1]
        try:
            io.run(store.close())
        finally:
            io.close()


def shard_name(part: int, k: int) -> str:
    """Part ``part``'s ``k``-th shard: a part of about one shard keeps the classic name."""
    return f"shard-{part:06d}.stk" if k == 0 else f"shard-{part:06d}-{k:03d}.stk"


def record_key(fingerprint: str, part: int) -> str:
    return f"{RECORDS}/{fingerprint}/part-{part:06d}.json"


def convert_part(job: dict[str, Any], part: Part) -> dict[str, Any]:
    """Write ``part``'s samples as shards, then its record; returns the record."""
    io, store = _store(job["out"], job["env"])
    number = job["first"] + part.number
    index = DatasetIndex(job["codec"], job["compression"])  # encodes; keeps the array layout
    pending: list[bytes] = []
    pending_bytes, shards = 0, []

    def flush() -> None:
        nonlocal pending, pending_bytes
        data = encode_shard(pending, job["compression"] == "zstd")
        name = shard_name(number, len(shards))
        io.run(store.write_bytes(name, data))
        digest = xxhash.xxh3_128_hexdigest(data)
        shards.append(ShardInfo(name, len(pending), len(data), digest, max(map(len, pending))))
        pending, pending_bytes = [], 0

    samples = 0
    for sample in read_part(Path(job["src"]), part, job["kind"], job["keys"]):
        data = index.encode(sample, samples)
        pending.append(data)
        pending_bytes += len(data)
        samples += 1
        if pending_bytes >= job["shard_size"]:
            flush()
    if pending:
        flush()
    record = {
        "part": part.number,
        "samples": samples,
        "shards": [asdict(s) for s in shards],
        "array": asdict(index.array) if index.array else None,
    }
    io.run(store.write_bytes(record_key(job["fingerprint"], number), json.dumps(record).encode()))
    return record


# ---------------------------------------------------------------------- the output
class _Output:
    """The dataset being written: its current index, the part records, the publication."""

    def __init__(self, out: str) -> None:
        self.io = IOLoop("stoker-shard-writer")
        try:
            self.store = open_store(out)
        except BaseException:
            self.io.close()
            raise
        self.where = f"{self.store}/{INDEX}"
        self.base_bytes: bytes | None = None  # index.json as the run found it

    def __enter__(self) -> _Output:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.io.run(self.store.close())
        finally:
            self.io.close()

    def base(self, codec: str, compression: str | None, resume: bool) -> DatasetIndex:
        """The dataset there already (resumed: added to), or an empty one."""
        try:
            existing = self.base_bytes = self.io.run(self.store.read_all(INDEX))
        except OSError as exc:  # a file where the folder should be, no permission
            raise StreamError(
                f"{self.store} cannot hold a dataset ({exc.strerror or exc}): give a new or "
                "empty folder, or a URL"
            ) from exc
        if existing is None:
            self.io.run(self.store.create_root())  # a missing container, as stage does
            return DatasetIndex(codec, compression)
        if not resume:
            raise StreamError(
                f"{self.where} exists: pass resume=True (--resume) to add to it, "
                "or write to an empty location"
            )
        index = DatasetIndex.from_json(existing, self.where)
        if (index.codec, index.compression) != (codec, compression):
            raise StreamError(
                f"{self.where} was written with codec={index.codec!r}, "
                f"compression={index.compression!r}; resume with the same settings"
            )
        return index

    def _record(self, fingerprint: str, first: int, part: Part) -> dict[str, Any] | None:
        data = self.io.run(self.store.read_all(record_key(fingerprint, first + part.number)))
        return None if data is None else json.loads(data)

    def recorded(self, fingerprint: str, first: int, parts: list[Part]) -> dict[int, Any]:
        """The parts an interrupted run of this same input and plan finished."""
        import asyncio

        async def all_records() -> list[bytes | None]:
            keys = [record_key(fingerprint, first + p.number) for p in parts]
            return await asyncio.gather(*(self.store.read_all(k) for k in keys))

        found = self.io.run(all_records())
        return {p.number: json.loads(d) for p, d in zip(parts, found, strict=True) if d is not None}

    def wait_for(
        self, fingerprint: str, first: int, parts: list[Part], done: dict[int, Any], wait_s: float
    ) -> dict[int, Any]:
        """The records of the other ranks' parts, as they appear."""
        found: dict[int, Any] = {}
        last_news = time.monotonic()
        for part in parts:
            while part.number not in done and part.number not in found:
                record = self._record(fingerprint, first, part)
                if record is not None:
                    found[part.number], last_news = record, time.monotonic()
                elif time.monotonic() - last_news > wait_s:
                    missing = [p.number for p in parts if p.number not in done | found]
                    raise StreamError(
                        f"{self.store}: no part recorded for {wait_s:.0f} s; parts "
                        f"{_some(missing)} are missing (their ranks may have died): run every "
                        "rank again with resume=True (--resume)"
                    )
                else:
                    time.sleep(POLL_S)
        return found

    def published(
        self,
        base: DatasetIndex,
        fingerprint: str,
        first: int,
        parts: list[Part],
        done: dict[int, Any],
        wait_s: float,
    ) -> DatasetIndex:
        """The index rank 0 publishes: index.json once it is not the one this run found, or
        the merge of every part's record if they are all there first."""
        found, last_news = dict(done), time.monotonic()
        while True:
            now = self.io.run(self.store.read_all(INDEX))
            if now is not None and now != self.base_bytes:
                return DatasetIndex.from_json(now, self.where)
            new = self.recorded(fingerprint, first, [p for p in parts if p.number not in found])
            found |= new
            if len(found) == len(parts):
                return _merge(base, [found[p.number] for p in parts], self.where)
            if new:
                last_news = time.monotonic()
            elif time.monotonic() - last_news > wait_s:
                missing = [p.number for p in parts if p.number not in found]
                raise StreamError(
                    f"{self.store}: no part recorded for {wait_s:.0f} s and no index published; "
                    f"parts {_some(missing)} are missing (their ranks may have died): run every "
                    "rank again with resume=True (--resume)"
                )
            time.sleep(POLL_S)

    def publish(self, index: DatasetIndex, fingerprint: str, first: int, parts: list[Part]) -> None:
        """index.json, in one atomic write; then the part records go (a kill before that
        leaves records that the next resume ignores: the plan after this index differs)."""
        import asyncio

        self.io.run(self.store.write_bytes(INDEX, index.to_json()))

        async def forget() -> None:
            keys = [record_key(fingerprint, first + p.number) for p in parts]
            await asyncio.gather(*(self.store.delete(k) for k in keys))

        self.io.run(forget())


def _merge(base: DatasetIndex, records: list[dict[str, Any]], where: str) -> DatasetIndex:
    """One index: the dataset's shards, then every part's, in part order."""
    index = DatasetIndex(base.codec, base.compression, list(base.shards), array=base.array)
    for record in records:
        if record["array"] is not None:
            layout = ArrayLayout(**record["array"])
            if index.array is not None and layout != index.array:
                raise StreamError(
                    f"{where}: part {record['part']} holds {layout} arrays, the dataset "
                    f"{index.array}: one dataset holds arrays of one dtype and shape"
                )
            index.array = layout
        for shard in record["shards"]:
            index.add(ShardInfo(**shard))
    return index


def _some(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[:8]))
    return shown + (f" and {len(numbers) - 8} more" if len(numbers) > 8 else "")
