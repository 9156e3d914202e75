"""Samples one at a time, for torch's DataLoader to batch (the drop-in path).

``DataLoader(StreamingDataset(...), batch_size=64, num_workers=2)`` asks each worker for one
sample at a time and collates them itself. Reading each sample as it is asked (a shard lookup, a
pread, a checksum, a counter update under a lock shared by every process, advice to the kernel
about the next sample) left the disk with one request per worker and put all of it on the
worker's one thread. Here a worker's samples are read a group at a time: the group's shard
lookups are one vectorised search; a group in the page cache is read on the worker's own thread
as it is handed over (a copy from memory: a hand-off to another thread cost more; in a
DataLoader worker, out of a map of its shard, with no system call a sample), and any other
group's reads and checksums run on the reader threads (pread and XXH3 release the GIL) while the
worker hands over the previous group's samples; the shared counters are updated once per group,
and the memory of samples the worker has handed over is reused for the next (_worker_memory.py).
A group is one pass over its samples: a corrupt one is noted where it falls as it is read, not
looked for afterwards. A mixture's group is read the same way, in the mixture's order: each
sample is located by a row of one table of every source's shards, read through that source's
open shards and decoded by it, rather than split by source and put back in order, which cost
more CPU a sample (docs/stream.md, "Mixtures"). A warm group of samples of ``MAP_BELOW`` or
more is read a sample at a time as each is taken (_read_as_handed), so that collate copies
bytes still in the CPU's cache. Large samples (``PIECE`` or more) keep the
reader of whole batches, which reads each in pieces on every thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np
import torch.utils.data

from ._batcher import located_runs
from ._format import WARM_PROBES, CorruptSample, ShardReader, in_page_cache, spread
from ._mixture_reader import MixtureReader  # (here, not at first use: see _order.py)
from ._remote import RemoteShard, fetch_samples
from ._worker_memory import keep_freed_memory

if TYPE_CHECKING:
    from ._sample_reader import SampleReader

GROUP_SAMPLES = 64  # samples read ahead at once: a DataLoader batch's worth
GROUP_BYTES = 16 << 20  # ...and at most this many bytes of them (two groups are in memory)
# Samples below this are copied out of maps in a worker. A worker reads each sample once an
# epoch, so every page it maps is a first touch (a fault for each 64 KiB the kernel maps
# around it): 2 KiB samples share one fault among ~32 and cost a worker 8 % less CPU than by
# pread; 112 KiB ones fault twice each and cost 8 % more.
MAP_BELOW = 16 << 10


def group_size(largest_sample: int) -> int:
    """Samples per group for a dataset (or mixture) whose largest sample is
    ``largest_sample`` bytes. A mixture's group is the same size, across its sources: every
    per-sample call ran slower in larger groups (64 per source, or 128 in all), the CPU's
    caches perhaps (docs/stream-notes.md)."""
    return max(1, min(GROUP_SAMPLES, GROUP_BYTES // max(1, largest_sample)))


def one_by_one(reader: SampleReader | MixtureReader, ids: np.ndarray) -> Iterator[Any]:
    """The samples of the global ``ids``, in order, decoded (corrupt ones raised or skipped,
    as ``on_corrupt`` says). Group ``k + 1`` is read while group ``k`` is handed over. A
    mixture's group is the next samples of its order, across its sources, each sample read
    through its own source (its tier, cache and checks). The samples are handed over by
    ``itertools.chain``: a generator's ``yield from`` resumed a Python frame for every sample
    (two, with the dataset's ``__iter__``); the chain enters Python once a group."""
    return chain.from_iterable(_groups(reader, ids))


def _groups(reader: SampleReader | MixtureReader, ids: np.ndarray) -> Iterator[Iterable[Any]]:
    """``one_by_one``'s samples, a group at a time."""
    if isinstance(reader, MixtureReader):
        largest = max(r.index.largest_sample for r in reader.readers)
    else:
        largest = reader.index.largest_sample
    size = group_size(largest)
    groups = [ids[k : k + size] for k in range(0, len(ids), size)]
    if not groups:
        return
    in_worker = torch.utils.data.get_worker_info() is not None
    if in_worker:
        keep_freed_memory()  # the samples' memory is reused, not faulted in afresh
    # How a warm group is read. In a DataLoader worker, small samples are copied out of maps
    # of their shards (_read_mapped); large ones are read as each is taken (_read_as_handed);
    # a mixture's group, and the training process's own small reads, keep one pass of preads.
    if largest >= MAP_BELOW and not isinstance(reader, MixtureReader):
        warm_way = "as_taken"
    else:
        warm_way = "mapped" if in_worker and largest < MAP_BELOW else "group"
    access = reader.access()
    access.plan_prefetch(ids)
    where = located_runs(reader.locate_in_order, ids, size)
    pending = _Group(reader, next(where), warm_way)
    for k in range(len(groups)):
        samples = pending.result()
        # Whole-shard downloads start once the first group is read by range: started
        # earlier, they take the store's bandwidth from the samples the loop waits for.
        access.start_downloads()
        if k + 1 < len(groups):
            pending = _Group(reader, next(where), warm_way)
            if k + 2 < len(groups) and not pending.warm:  # the group after: queued on the disk
                access.advise(groups[k + 2])
        yield samples


class _Group:
    """One group's reads: on the reader threads once started cold, on the caller's thread as
    it is handed over when warm. ``places`` are (shard, index in it); a mixture's name a
    row of its shard table instead of a shard (any source's: see MixtureReader)."""

    def __init__(
        self,
        reader: SampleReader | MixtureReader,
        places: list[tuple[int, int]],
        warm_way: str = "group",
    ) -> None:
        self.reader, self.access, self.places = reader, reader.access(), places
        self.warm_way = warm_way  # "group", "mapped" or "as_taken": how it is read when warm
        self.readers = reader.group_readers(places)
        self.remote = []
        if any(isinstance(r, RemoteShard) for r in self.readers.values()):
            # the first group of a remote dataset: every sample's GET at once
            self.remote = [
                (r, i) for s, i in places if isinstance(r := self.readers[s], RemoteShard)
            ]
            fetch_samples(self.remote)
        self.futures: list[Future[tuple[list[bytes | None], list[int]]]] = []
        self.warm = not self.remote and in_page_cache(self.probes())
        if not self.warm:  # read on the reader threads, from now
            threads = min(reader.read_threads, len(places))
            runs = [places[t::threads] for t in range(threads)]
            pool = self.access.read_pool()
            self.futures = [pool.submit(_read_run, self.readers, run) for run in runs]

    def probes(self) -> list[tuple[int, int, int]]:
        """(fd, offset, length) of a few samples spread over the group (see in_page_cache)."""
        readers = self.readers
        return [(readers[s].fd, *readers[s].span(i)) for s, i in spread(self.places, WARM_PROBES)]

    def result(self) -> Iterable[Any]:
        if self.warm and self.warm_way == "as_taken":
            return _read_as_handed(self)
        places, data = self.read()
        reader = self.reader
        skipped = len(self.places) - len(data)  # (the shared counters: once a group)
        reader.counters.add(bytes_read=sum(map(len, data)), samples=len(data), skipped=skipped)
        # (a call per sample saved: the drop-in path's usual case)
        return data if reader.as_stored else reader.decode_run(places, data)

    def read(self) -> tuple[list[tuple[int, int]], list[bytes]]:
        """The group's places and samples as read, less corrupt ones skipped."""
        if self.warm:
            read = _read_mapped if self.warm_way == "mapped" else _read_run
            got, bad = read(self.readers, self.places)
        else:
            threads, bad = len(self.futures), []
            got = [None] * len(self.places)
            for t, future in enumerate(self.futures):
                got[t::threads], theirs = future.result()
                bad += [t + threads * k for k in theirs]
        if not bad:
            return self.places, got  # type: ignore[return-value]
        for k in sorted(bad):  # fetched again, then raised or skipped as ``on_corrupt`` says
            s, i = self.places[k]
            got[k] = self.reader.read_at(self.access, self.readers, s, i)  # type: ignore[arg-type]
        keep = [k for k, data in enumerate(got) if data is not None]
        return [self.places[k] for k in keep], [got[k] for k in keep]  # type: ignore[misc]


def _read_as_handed(group: _Group) -> Iterator[Any]:
    """A warm group of large samples, each read (a pread, its check) as it is handed over.
    Read a whole group first, the first samples had left the core's cache by the time collate
    copied them into the batch (docs/stream.md has the figures); read last, a sample is copied
    while its bytes are still there. The counters are told once, when the group ends or is
    left."""
    reader, readers, access = group.reader, group.readers, group.access
    decode = None if reader.as_stored else reader.decode
    handed = nbytes = skipped = 0
    try:
        for shard, i in group.places:
            try:
                data = readers[shard].sample(i)
            except CorruptSample:  # fetched again, then raised or skipped as ``on_corrupt`` says
                data = reader.read_at(access, readers, shard, i)
                if data is None:
                    skipped += 1
                    continue
            handed, nbytes = handed + 1, nbytes + len(data)
            yield data if decode is None else decode(data)
    finally:
        reader.counters.add(bytes_read=nbytes, samples=handed, skipped=skipped)


def _read_mapped(
    readers: dict[int, ShardReader], places: list[tuple[int, int]]
) -> tuple[list[bytes | None], list[int]]:
    """``_read_run`` of a group in the page cache, each sample copied out of its shard's map: a
    pread a sample was half of a warm sample's CPU in ``one_by_one`` (3.0 us a sample, 2.3
    mapped, 2 KiB records; a DataLoader worker's CPU 8 % less). A shard that cannot be mapped
    (or is shorter than its table) is read by pread. Samples below ``MAP_BELOW``
    in DataLoader workers only: the pages a map
    touched stay mapped while its shard is open (the kernel then keeps them against
    ``POSIX_FADV_DONTNEED``, and they count in the process's RSS), and a worker lives for an
    epoch; the training process's own reads keep pread."""
    views = {s: r.mapped() for s, r in readers.items()}
    if not all(views.values()):
        return _read_run(readers, places)
    out: list[bytes | None] = []
    bad: list[int] = []
    for shard, i in places:
        try:
            out.append(readers[shard].sample_mapped(views[shard], i))  # type: ignore[arg-type]
        except CorruptSample:
            bad.append(len(out))
            out.append(None)
    return out, bad


def _read_run(
    readers: dict[int, ShardReader], places: list[tuple[int, int]]
) -> tuple[list[bytes | None], list[int]]:
    """The samples at ``places``, and where among them a corrupt one is (None in its place)."""
    out: list[bytes | None] = []
    bad: list[int] = []
    for shard, i in places:
        try:
            out.append(readers[shard].sample(i))
        except CorruptSample:
            bad.append(len(out))
            out.append(None)
    return out, bad
