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

from ._format import CorruptSample, ShardReader, page_cached
from ._remote import RemoteShard, fetch_samples
from ._worker_memory import freeze_inherited_objects, keep_freed_memory

if TYPE_CHECKING:
    from ._sample_reader import SampleReader

GROUP_SAMPLES = 64  # samples read ahead at once: a DataLoader batch's worth
GROUP_BYTES = 16 << 20  # ...and at most this many bytes of them (two groups are in memory)
WARM_PROBES = 4  # samples of a group asked whether they are in the page cache
Read = bytes | CorruptSample


def group_size(largest_sample: int) -> int:
    """Samples per group for a dataset whose largest sample is ``largest_sample`` bytes."""
    return max(1, min(GROUP_SAMPLES, GROUP_BYTES // max(1, largest_sample)))


def one_by_one(reader: SampleReader, ids: np.ndarray) -> Iterator[Any]:
    """The samples of the global ``ids``, in order, decoded (corrupt ones raised or skipped,
    as ``on_corrupt`` says). Group ``k + 1`` is read while group ``k`` is handed over."""
    size = group_size(reader.index.largest_sample)
    groups = [ids[k : k + size] for k in range(0, len(ids), size)]
    if not groups:
        return
    if torch.utils.data.get_worker_info() is not None:
        keep_freed_memory()  # the samples' memory is reused, not faulted in afresh
        freeze_inherited_objects()
    access = reader.access()
    access.plan_prefetch(ids)
    pending = _Group(reader, groups[0])
    for k in range(len(groups)):
        samples = pending.result()
        # Whole-shard downloads start once the first group is read by range: started
        # earlier, they take the store's bandwidth from the samples the loop waits for.
        access.start_downloads()
        if k + 1 < len(groups):
            pending = _Group(reader, groups[k + 1])
            if k + 2 < len(groups) and not pending.warm:  # the group after: queued on the disk
                access.advise(groups[k + 2])
        yield from samples


class _Group:
    """One group's reads, under way on the reader threads."""

    def __init__(self, reader: SampleReader, ids: np.ndarray) -> None:
        self.reader, self.access = reader, reader.access()
        shards, within = reader.index.locate_all(ids)
        self.places = list(zip(shards.tolist(), within.tolist(), strict=True))
        self.readers = self.access.batch_readers(self.places)
        remote = [(r, i) for s, i in self.places if isinstance(r := self.readers[s], RemoteShard)]
        if remote:  # the first group of a remote dataset: every sample's GET at once
            fetch_samples(remote)
        self.futures: list[Future[list[Read]]] = []
        self.warm = not remote and _in_page_cache(self.readers, self.places)
        if self.warm:  # read on this thread as they are handed over: nothing to wait for
            return
        threads = min(reader.read_threads, len(self.places))
        runs = [self.places[t::threads] for t in range(threads)]
        pool = self.access.read_pool()
        self.futures = [pool.submit(_read_run, self.readers, run) for run in runs]

    def result(self) -> list[Any]:
        if self.warm:
            got = _read_run(self.readers, self.places)
        else:
            threads = len(self.futures)
            got = [b""] * len(self.places)
            for t, future in enumerate(self.futures):
                got[t::threads] = future.result()
        reader, kept, skipped = self.reader, [], 0
        for (shard, i), data in zip(self.places, got, strict=True):
            if isinstance(data, CorruptSample):  # fetched again, raised or skipped as asked
                data = reader.read_at(self.access, self.readers, shard, i)  # type: ignore[assignment]
                if data is None:
                    skipped += 1
                    continue
            kept.append(data)
        # one update of the counters shared by every process per group, not per sample
        reader.counters.add(bytes_read=sum(map(len, kept)), samples=len(kept), skipped=skipped)
        return [reader.decode(data) for data in kept]


def _in_page_cache(readers: dict[int, ShardReader], places: list[tuple[int, int]]) -> bool:
    """Whether a group's samples are in the page cache, judged by the middle page of a few
    of them (``WARM_PROBES``, spread over the group): a warm group is read on the worker's own
    thread, as the reader threads' hand-offs cost more CPU than a copy from the page cache
    (resnet50 records, warm: 68 against 22 us a sample in one process)."""
    step = max(1, len(places) // WARM_PROBES)
    for shard, i in places[::step]:
        start, length = readers[shard].span(i)
        if not page_cached(readers[shard].fd, start + length // 2):
            return False
    return True


def _read_run(readers: dict[int, ShardReader], places: list[tuple[int, int]]) -> list[Read]:
    out: list[Read] = []
    for shard, i in places:
        try:
            out.append(readers[shard].sample(i))
        except CorruptSample as exc:
            out.append(exc)
    return out
