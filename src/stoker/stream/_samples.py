"""Samples one at a time, for torch's DataLoader to batch (the drop-in path).

``DataLoader(StreamingDataset(...), batch_size=64, num_workers=2)`` asks each worker for one
sample at a time and collates them itself. Reading each sample as it is asked (a shard lookup,
a pread, a checksum, a counter update under a lock shared by every process, advice to the
kernel about the next sample) left the disk with one request per worker and put all of it on
the worker's one thread. Here a worker's samples are read a group at a time: the group's shard
lookups are one vectorised search; a group in the page cache is read on the worker's own
thread as it is handed over (a copy from memory: a hand-off to another thread cost more), and
any other group's reads and checksums run on the reader threads (pread and XXH3 release the
GIL) while the worker hands over the previous group's samples; the shared counters are
updated once per group, and the memory of samples the worker has handed over is reused for
the next (_worker_memory.py). Large samples (``PIECE`` or more) keep the reader
of whole batches, which reads each in pieces on every thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import numpy as np
import torch.utils.data

from ._batcher import located_runs
from ._counters import add_together
from ._format import WARM_PROBES, CorruptSample, ShardReader, in_page_cache, spread
from ._mixture_reader import Located, MixtureReader  # (here, not at first use: see _order.py)
from ._remote import RemoteShard, fetch_samples
from ._worker_memory import keep_freed_memory

if TYPE_CHECKING:
    from ._sample_reader import SampleReader

GROUP_SAMPLES = 64  # samples read ahead at once: a DataLoader batch's worth
GROUP_BYTES = 16 << 20  # ...and at most this many bytes of them (two groups are in memory)
Read = bytes | CorruptSample
SKIPPED = object()  # a corrupt sample's place in a group, skipped (on_corrupt="skip")


def group_size(largest_sample: int) -> int:
    """Samples per group for a dataset (or mixture) whose largest sample is
    ``largest_sample`` bytes. A mixture's group is the same size, across its sources: 2 KiB
    records in a simulated DataLoader worker with torch's collate, 8 alternating rounds, cost
    1.07x one dataset's CPU a sample in groups of 64 across 3 sources, 1.09x in 128, 1.21x in
    groups of 64 per source (192); every per-sample call ran slower in the larger group (why,
    the CPU's caches perhaps, is not pinned down)."""
    return max(1, min(GROUP_SAMPLES, GROUP_BYTES // max(1, largest_sample)))


def one_by_one(reader: SampleReader | MixtureReader, ids: np.ndarray) -> Iterator[Any]:
    """The samples of the global ``ids``, in order, decoded (corrupt ones raised or skipped,
    as ``on_corrupt`` says). Group ``k + 1`` is read while group ``k`` is handed over. A
    mixture's group is the next samples of its order, each source's read by that source."""
    if isinstance(reader, MixtureReader):
        largest = max(r.index.largest_sample for r in reader.readers)
        size, make = group_size(largest), _MixedGroup
    else:
        size, make = group_size(reader.index.largest_sample), _Group
    groups = [ids[k : k + size] for k in range(0, len(ids), size)]
    if not groups:
        return
    if torch.utils.data.get_worker_info() is not None:
        keep_freed_memory()  # the samples' memory is reused, not faulted in afresh
    access = reader.access()
    access.plan_prefetch(ids)
    where = located_runs(reader, ids, size)
    pending = make(reader, next(where))
    for k in range(len(groups)):
        samples = [s for s in pending.result() if s is not SKIPPED]
        # Whole-shard downloads start once the first group is read by range: started
        # earlier, they take the store's bandwidth from the samples the loop waits for.
        access.start_downloads()
        if k + 1 < len(groups):
            pending = make(reader, next(where))
            if k + 2 < len(groups) and not pending.warm:  # the group after: queued on the disk
                access.advise(groups[k + 2])
        yield from samples


class _Group:
    """One group's reads: on the reader threads once started cold, on the caller's thread as
    it is handed over when warm."""

    def __init__(
        self, reader: SampleReader, places: list[tuple[int, int]], *, start: bool = True
    ) -> None:
        self.reader, self.access, self.places = reader, reader.access(), places
        self.readers = self.access.batch_readers(places)
        self.remote = [
            (r, i) for s, i in self.places if isinstance(r := self.readers[s], RemoteShard)
        ]
        if self.remote:  # the first group of a remote dataset: every sample's GET at once
            fetch_samples(self.remote)
        self.futures: list[Future[list[Read]]] = []
        self.warm = False
        if start:
            self.start(not self.remote and in_page_cache(self.probes(WARM_PROBES)))

    def probes(self, count: int) -> list[tuple[int, int, int]]:
        """(fd, offset, length) of ``count`` samples spread over the group (see
        in_page_cache); none of a group read by range."""
        if self.remote:
            return [(-1, 0, 0)]  # (never cached: a descriptor no file has)
        return [
            (self.readers[s].fd, *self.readers[s].span(i)) for s, i in spread(self.places, count)
        ]

    def start(self, warm: bool) -> None:
        """Warm: read on this thread as they are handed over (nothing to wait for); else the
        reads start on the reader threads now."""
        self.warm = warm
        if warm:
            return
        threads = min(self.reader.read_threads, len(self.places))
        runs = [self.places[t::threads] for t in range(threads)]
        pool = self.access.read_pool()
        self.futures = [pool.submit(_read_run, self.readers, run) for run in runs]

    def result(self) -> list[Any]:
        kept = self.read()
        self.reader.counters.add(**_counts(kept))
        return self.decoded(kept)

    def read(self) -> list[bytes | None]:
        """The group's samples as read; None for a corrupt one skipped."""
        if self.warm:
            got = _read_run(self.readers, self.places)
        else:
            threads = len(self.futures)
            got = [b""] * len(self.places)
            for t, future in enumerate(self.futures):
                got[t::threads] = future.result()
        reader, kept = self.reader, []
        for (shard, i), data in zip(self.places, got, strict=True):
            if isinstance(data, CorruptSample):  # fetched again, raised or skipped as asked
                data = reader.read_at(self.access, self.readers, shard, i)  # type: ignore[assignment]
            kept.append(data)
        return kept

    def decoded(self, kept: list[bytes | None]) -> list[Any]:
        if self.reader.as_stored:  # (a call per sample saved: the drop-in path's usual case)
            return [SKIPPED if data is None else data for data in kept]
        return [SKIPPED if data is None else self.reader.decode(data) for data in kept]


class _MixedGroup:
    """A mixture's group: the next samples of its order, each source's part a ``_Group`` of
    that source (its tier, threads, checks, counters), handed over in the mixture's order. One
    group across the sources, not a group ahead in each: three sources' groups of large
    records in memory at once, and each read out of turn, cost the drop-in path ~12 %."""

    def __init__(self, reader: MixtureReader, located: Located) -> None:
        self.size = sum(len(positions) for _, _, positions in located)
        self.parts = [  # (each source's samples, found by one search of every source's shards)
            (positions, _Group(reader.readers[s], places, start=False))
            for s, places, positions in located
        ]
        # One judgement for the group, from a few samples over all of it (not a few per source)
        probes = [
            p for _, g in self.parts for p in g.probes(WARM_PROBES * len(g.places) // self.size)
        ]
        self.warm = in_page_cache(probes)
        for _, group in self.parts:
            group.start(self.warm)

    def result(self) -> list[Any]:
        read = [(positions, group, group.read()) for positions, group in self.parts]
        add_together([(group.reader.counters, _counts(kept)) for _, group, kept in read])
        out: list[Any] = [SKIPPED] * self.size
        for positions, group, kept in read:
            for at, sample in zip(positions, group.decoded(kept), strict=True):
                out[at] = sample
        return out


def _counts(kept: list[bytes | None]) -> dict[str, int]:
    """What a group read, for the counters shared by every process: added once a group, not
    once a sample."""
    read = [data for data in kept if data is not None]
    return {
        "bytes_read": sum(map(len, read)),
        "samples": len(read),
        "skipped": len(kept) - len(read),
    }


def _read_run(readers: dict[int, ShardReader], places: list[tuple[int, int]]) -> list[Read]:
    out: list[Read] = []
    for shard, i in places:
        try:
            out.append(readers[shard].sample(i))
        except CorruptSample as exc:
            out.append(exc)
    return out
