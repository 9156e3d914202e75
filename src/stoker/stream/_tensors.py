"""Samples as tensors, read straight into the batch (``StreamingDataset(dtype=...)``).

Each sample is its stored bytes seen as a 1-D tensor of ``dtype`` (of the arrays' shape, for
codec "array"); a batch of samples of one size is one ``(batch, ...)`` tensor, else a list. The
batch is allocated once and every sample is pread into its row: one copy from the page cache,
where bytes objects and a collate function make two. Where the batch lives (shared memory in a
DataLoader worker, recycled buffers in the training process) is _buffers.py's. A batch is read
by a few threads (pread and XXH3 release the GIL), which keeps several requests in flight on a
cold disk; a sample larger than ``PIECE`` is read in pieces by several threads. In the training
process, a sample of ``PIECE`` or more in a batch of several sizes is not copied at all: its
tensor is a private map of the shard's pages, which the reader threads bring into the page
cache piece by piece (see ``_mapped``).
"""

from __future__ import annotations

import errno
import mmap
import threading
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..errors import StreamError
from ._counters import add_together
from ._format import WARM_PROBES, CorruptSample, ShardReader, in_page_cache, spread
from ._remote import RemoteShard, fetch_into

if TYPE_CHECKING:
    from ._index import DatasetIndex
    from ._sample_reader import SampleReader
    from ._shard_access import ShardAccess

PIECE = 8 << 20
MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)  # (Linux 5.14; Python has no name)


def sample_shape(index: DatasetIndex, dtype: torch.dtype, where: str) -> tuple[int, ...]:
    """The shape of one sample under ``dtype=``; refuses a codec whose bytes are not the
    samples' values, and a dtype other than the arrays' own."""
    if index.codec == "bytes" or (index.codec == "array" and index.array is None):
        return (-1,)
    if index.codec != "array":
        raise StreamError(
            f"{where}: dtype={dtype} reads samples as raw tensors, but the dataset's codec is "
            f"{index.codec!r}: leave dtype unset, or write the samples as bytes or arrays"
        )
    assert index.array is not None
    try:
        stored = torch.from_numpy(np.empty(0, index.array.dtype)).dtype
    except TypeError as exc:
        raise StreamError(
            f"{where}: the samples are {index.array} arrays, which torch has no dtype for: "
            "leave dtype unset (samples come as NumPy arrays)"
        ) from exc
    if stored != dtype:
        raise StreamError(
            f"{where}: the samples are {index.array} arrays: pass dtype={stored}, or leave "
            "dtype unset (samples come as NumPy arrays)"
        )
    return index.array.shape


def check_items(nbytes: int, dtype: torch.dtype, where: str) -> None:
    """Raise unless ``nbytes`` is a whole number of ``dtype`` items."""
    if nbytes % dtype.itemsize:
        raise StreamError(
            f"{where}: {nbytes} bytes is not a whole number of {dtype} items ({dtype.itemsize} "
            "bytes each): pick a dtype the samples were written in, or leave dtype unset"
        )


def as_dtype(data: bytes | bytearray, dtype: torch.dtype, where: str) -> torch.Tensor:
    """One sample's bytes as a 1-D tensor of ``dtype`` (a copy: bytes are read-only)."""
    check_items(len(data), dtype, where)
    if not data:  # (frombuffer refuses an empty buffer)
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=dtype)


@dataclass
class BatchPart:
    """One reader's samples of a batch: where each lies (its shard's reader, the index in
    the shard, the offset and size in the file), checked to be whole ``dtype`` items."""

    ds: SampleReader
    proc: ShardAccess
    places: list[tuple[int, int]]
    samples: list[tuple[ShardReader, int, int, int]]

    @classmethod
    def of(cls, ds: SampleReader, proc: ShardAccess, ids: np.ndarray) -> BatchPart:
        # ids are the epoch order's: one search a batch
        shards, within = ds.index.locate_all(ids)
        return cls.at(ds, proc, list(zip(shards.tolist(), within.tolist(), strict=True)))

    @classmethod
    def at(cls, ds: SampleReader, proc: ShardAccess, places: list[tuple[int, int]]) -> BatchPart:
        """The part of the samples at ``places`` (shard, index in the shard), already located
        (a mixture locates every source's part of a batch in one search)."""
        assert ds.dtype is not None
        readers = proc.batch_readers(places)
        samples = [(readers[shard], i, *readers[shard].span(i)) for shard, i in places]
        itemsize = ds.dtype.itemsize
        for reader, i, _, size in samples:
            if size % itemsize:  # (the message is made only for a sample that fails)
                check_items(size, ds.dtype, f"shard {reader.name}: sample {i}")
        return cls(ds, proc, places, samples)

    def finish(self, batch: Any, views: list, maps: dict, bad: dict[int, CorruptSample]) -> Any:
        """``batch`` once read: bad samples fetched again, then raised or skipped as
        ``on_corrupt`` says; the counters told."""
        ds, samples = self.ds, self.samples
        if bad:  # read again into a buffer, never into a map of a bad file
            for j in set(bad) & set(maps):
                tensor = self.proc.alloc(samples[j][3])
                views[j], batch[j] = memoryview(tensor.numpy()), tensor.view(ds.dtype)
            _read_again_from_fresh_copies(self.proc, self.places, samples, views, bad)
        if bad:  # (what is still bad once read again)
            if ds.on_corrupt == "raise":
                raise bad[min(bad)]
            keep = [j for j in range(len(samples)) if j not in bad]
            batch = batch[keep] if isinstance(batch, torch.Tensor) else [batch[j] for j in keep]
        self.count(bad)
        return batch

    def count(self, bad: Collection[int] = ()) -> None:
        """The counters told what this part read, ``bad`` (positions) skipped."""
        self.ds.counters.add(**self.counts(bad))

    def counts(self, bad: Collection[int] = ()) -> dict[str, int]:
        samples = self.samples
        nbytes = sum([s[3] for s in samples]) - sum(samples[j][3] for j in bad)
        return {"bytes_read": nbytes, "samples": len(samples) - len(bad), "skipped": len(bad)}


def read_batch(
    ds: SampleReader, proc: ShardAccess, ids: np.ndarray, places: list[tuple[int, int]] | None
) -> torch.Tensor | list[torch.Tensor]:
    """The batch of the global sample ``ids`` (at ``places``, when already located); corrupt
    samples raise or are skipped."""
    part = BatchPart.of(ds, proc, ids) if places is None else BatchPart.at(ds, proc, places)
    samples = part.samples
    sizes = {size for *_, size in samples}
    alloc = proc.alloc
    if sizes == {0}:  # empty samples: nothing to read, and a 0-byte buffer has no dtype view
        ds.counters.add(samples=len(samples))
        shape = [0 if n == -1 else n for n in ds.sample_shape]
        return torch.empty((len(samples), *shape), dtype=ds.dtype)
    maps: dict[int, Mapped] = {}  # positions of samples mapped from their shards
    if len(sizes) == 1:
        size = sizes.pop()
        flat = alloc(size * len(samples))
        views = _row_views(flat, size, len(samples))
        batch: Any = flat.view(ds.dtype).view(len(samples), *ds.sample_shape)
    else:
        if proc.may_map:
            maps = {j: m for j, s in enumerate(samples) if (m := _mapped(*s)) is not None}
        tensors = [
            torch.from_numpy(maps[j].array) if j in maps else alloc(size)
            for j, (*_, size) in enumerate(samples)
        ]
        views = [memoryview(t.numpy()) for t in tensors]
        batch = [t.view(ds.dtype) for t in tensors]
    bad, proc.reads_warm = _read_and_check(proc.read_pool(), ds.read_threads, samples, views, maps)
    return part.finish(batch, views, maps, bad)


def read_rows(parts: list[BatchPart], flat: torch.Tensor, row: int) -> list[Any] | None:
    """Several readers' samples, every one ``row`` bytes, into consecutive rows of ``flat`` in
    one read (a mixture's batch: one judgement of the page cache, one hand-out to the threads,
    where a read per source would pay each once per source); each part then finished by its own
    reader. None when every sample was read whole (``flat`` is the batch); else each part's
    rows, fewer where a corrupt sample was skipped."""
    samples = [s for part in parts for s in part.samples]
    views = _row_views(flat, row, len(samples))
    threads = max(part.ds.read_threads for part in parts)
    bad, warm = _read_and_check(parts[0].proc.read_pool(), threads, samples, views, {})
    for part in parts:
        part.proc.reads_warm = warm
    if not bad:  # (the usual batch: counted together, no tensor made per part)
        add_together([(part.ds.counters, part.counts()) for part in parts])
        return None
    out, at = [], 0
    for part in parts:
        n, ds = len(part.samples), part.ds
        rows = flat[at * row : (at + n) * row].view(ds.dtype).view(n, *ds.sample_shape)  # type: ignore[arg-type]
        mine = {j - at: err for j, err in bad.items() if at <= j < at + n}
        out.append(part.finish(rows, views[at : at + n], {}, mine))
        at += n
    return out


def _row_views(flat: torch.Tensor, row: int, n: int) -> list[memoryview]:
    rows = flat.numpy().reshape(n, row)
    return [memoryview(rows[j]) for j in range(n)]


def _read_again_from_fresh_copies(
    proc: ShardAccess,
    places: list[tuple[int, int]],
    samples: list[tuple[ShardReader, int, int, int]],
    views: list,
    bad: dict[int, CorruptSample],
) -> None:
    """The bad samples of damaged cached copies read again from copies fetched anew (see
    ``ShardAccess.refetch_damaged``); those that now check out leave ``bad``."""
    fresh: dict[int, ShardReader | None] = {}
    for j in sorted(bad):
        shard = places[j][0]
        if shard not in fresh:
            fresh[shard] = proc.refetch_damaged(shard, samples[j][0])
        reader = fresh[shard]
        if reader is None:
            continue
        _, i, offset, _ = samples[j]
        try:
            reader.read_into(i, offset, views[j])
            reader.check(i, views[j])
        except CorruptSample as exc:
            bad[j] = exc
        else:
            del bad[j]


def _read_and_check(
    pool: ThreadPoolExecutor,
    threads: int,
    samples: list[tuple[ShardReader, int, int, int]],
    views: list,
    maps: dict[int, Mapped],
) -> tuple[dict[int, CorruptSample], bool]:
    """Fill every view from its sample's span and check it: ({position: error} of the bad,
    whether the samples were judged in the page cache and read on this thread). The
    thread that lands a sample's last piece checks it while the others go on reading, so the
    disk is not left idle while big samples are hashed. Samples of shards read by range (the
    first batch of a remote job) are fetched all at once first, then checked. The pieces of a
    sample in ``maps`` are not copied but brought into the page cache under its map."""
    pieces = [
        (j, start, views[j][start - offset : start - offset + PIECE])
        for j, (_, _, offset, size) in enumerate(samples)
        for start in range(offset, offset + max(size, 1), PIECE)
    ]
    remote = [p for p in pieces if isinstance(samples[p[0]][0], RemoteShard)]
    pieces = [p for p in pieces if not isinstance(samples[p[0]][0], RemoteShard)]
    bad = _fetch_and_check(pool, samples, views, remote)
    left = [0] * len(samples)
    for j, _, _ in pieces:
        left[j] += 1
    lock = threading.Lock()

    def read(part: list[tuple[int, int, memoryview]]) -> None:
        for j, start, view in part:
            reader, i, offset = samples[j][:3]
            try:
                if j in maps:
                    try:
                        maps[j].populate(start - offset, len(view))
                    except OSError as exc:
                        raise CorruptSample(reader.name, i, start) from exc
                else:
                    reader.read_into(i, start, view)
            except CorruptSample as exc:
                bad[j] = exc
            with lock:
                left[j] -= 1
                last = left[j] == 0
            if last and j not in bad:
                try:
                    reader.check(i, views[j])
                except CorruptSample as exc:
                    bad[j] = exc

    warm = (
        not maps
        and not remote
        and in_page_cache(
            [(r.fd, offset, size) for r, _, offset, size in spread(samples, WARM_PROBES)]
        )
    )
    if warm:  # copies from the page cache, on this thread (see in_page_cache)
        read(pieces)
    else:
        list(pool.map(read, _split(pieces, threads, lambda p: len(p[2]))))
    return bad, warm


def _fetch_and_check(
    pool: ThreadPoolExecutor,
    samples: list[tuple[ShardReader, int, int, int]],
    views: list,
    remote: list[tuple[int, int, memoryview]],
) -> dict[int, CorruptSample]:
    """The remote samples' pieces fetched into their views at once, then the samples checked
    (XXH3 releases the GIL: on the pool's threads); {position: error} of the bad."""
    wanted = [(samples[j][0], samples[j][1], start, view) for j, start, view in remote]
    errors = fetch_into(wanted)  # type: ignore[arg-type]  # (their readers are RemoteShards)
    bad = {j: err for (j, _, _), err in zip(remote, errors, strict=True) if err is not None}

    def check(j: int) -> None:
        try:
            samples[j][0].check(samples[j][1], views[j])
        except CorruptSample as exc:
            bad[j] = exc

    list(pool.map(check, sorted({j for j, _, _ in remote} - set(bad))))
    return bad


@dataclass(frozen=True)
class Mapped:
    """A sample's tensor as a private map of its shard: ``array`` over ``view`` from ``at``."""

    view: mmap.mmap
    at: int
    array: np.ndarray

    def populate(self, start: int, length: int) -> None:
        """Bring the sample's bytes ``start`` to ``start + length`` under the map: read ahead
        at once (``WILLNEED``: the whole piece queued on the disk, where faults would read a
        128 KiB window at a time), then mapped (``MADV_POPULATE_READ``, which waits for them).
        A page that cannot be read (a shard cut short, a disk error) raises OSError here,
        before anything touches it: touched, it would kill the process with SIGBUS."""
        begin = self.at + start - (self.at + start) % mmap.PAGESIZE
        length += self.at + start - begin
        try:
            self.view.madvise(mmap.MADV_WILLNEED, begin, length)
            self.view.madvise(MADV_POPULATE_READ, begin, length)
        except OSError as exc:
            if exc.errno != errno.EINVAL:  # (Linux before 5.14: pages map as they are read)
                raise


def _mapped(reader: ShardReader, i: int, offset: int, size: int) -> Mapped | None:
    """A large sample as a private (copy-on-write) map of its place in the shard, or None. It
    costs no copy and no fresh memory: a copy into a batch buffer first faults the buffer in,
    and zeroing those pages cost a warm epoch of large samples about its whole wall time. Cold,
    the disk fills the page cache and the pages are mapped from there: as fast as pread into
    buffers, with less CPU and without the buffers' memory (on a VM that hands freed memory back
    to its host, fresh memory is slow to touch). Figures: docs/stream-notes.md. A consumer that
    writes to the tensor gets its own copy of the pages it writes; the file is never changed.
    Only for files nobody truncates while the tensors are in use (a shard is published by a
    rename and replaced the same way): a map of a file cut short under it faults
    (``Mapped.populate`` names one cut short before it is read)."""
    if size < PIECE or isinstance(reader, RemoteShard) or reader.compressed:
        return None
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    try:
        view = mmap.mmap(
            reader.fd,
            offset + size - start,
            flags=mmap.MAP_PRIVATE,
            prot=mmap.PROT_READ | mmap.PROT_WRITE,
            offset=start,
        )
    except (OSError, ValueError):  # (a file system that cannot map: read it instead)
        return None
    return Mapped(view, offset - start, np.frombuffer(view, np.uint8, size, offset - start))


def _split(items: list, parts: int, weight: Any) -> list[list]:
    """``items`` in at most ``parts`` consecutive runs of about equal total weight."""
    total = sum(weight(x) for x in items) or 1
    runs: list[list] = [[] for _ in range(parts)]
    done = 0
    for x in items:
        runs[min(parts - 1, done * parts // total)].append(x)
        done += weight(x)
    return [r for r in runs if r]
