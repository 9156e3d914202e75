"""The drop-in path: a StreamingDataset inside torch's own DataLoader, sample by sample, read a
group at a time on the reader threads (stream/_samples.py)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch.utils.data

from stoker.measure.storage import evict_fd
from stoker.stream import ShardWriter, StreamingDataset
from stoker.stream._format import CorruptSample, page_cached
from stoker.stream._order import epoch_order
from stoker.stream._samples import GROUP_SAMPLES, group_size, one_by_one
from stoker.stream._worker_memory import keep_freed_memory

N = 300  # more than four groups, the last one short


def _payload(i: int) -> bytes:
    return i.to_bytes(4, "little") + bytes([i % 251]) * (50 + (i * 37) % 400)


def _write(root: Path, n: int = N) -> Path:
    with ShardWriter(root, shard_size="8KiB", codec="bytes") as w:
        for i in range(n):
            w.write(_payload(i))
    return root


def _id(sample: bytes) -> int:
    return int.from_bytes(sample[:4], "little")


def test_samples_come_in_the_order_asked_across_groups(tmp_path: Path) -> None:
    ds = StreamingDataset(_write(tmp_path / "ds"))
    ids = np.random.default_rng(3).permutation(N)
    got = list(one_by_one(ds.reader, ids))
    assert [_id(s) for s in got] == ids.tolist()
    assert got == [_payload(int(i)) for i in ids]  # whole and unchanged
    assert ds.stats()["samples"] == N and ds.stats()["bytes_read"] == sum(map(len, got))


def test_torchs_dataloader_with_workers_gets_the_epoch_once(tmp_path: Path) -> None:
    """As a new user drops it in: DataLoader(ds, batch_size=, num_workers=2)."""
    ds = StreamingDataset(_write(tmp_path / "ds"), seed=4)
    loader = torch.utils.data.DataLoader(ds, batch_size=16, num_workers=2, collate_fn=list)
    got = [_id(s) for batch in loader for s in batch]
    order = epoch_order(ds.index.shard_sizes, seed=4, epoch=0, shuffle=True, block_shards=8)
    assert sorted(got) == sorted(order.tolist())
    assert ds.stats()["samples"] == N  # the workers' counts reach the training process
    # without workers, in the epoch's own order
    assert [_id(s) for s in ds] == order.tolist()


def test_a_corrupt_sample_in_a_group_is_raised_or_skipped(tmp_path: Path) -> None:
    root = _write(tmp_path / "ds")
    ds = StreamingDataset(root, shuffle=False)
    shard = root / ds.index.shards[3].name
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0xFF  # inside the shard's last sample
    shard.write_bytes(bytes(data))
    bad = ds.index.first(4) - 1
    with pytest.raises(CorruptSample, match=r"shard shard-000003.stk: sample \d+"):
        list(StreamingDataset(root, shuffle=False))
    skipping = StreamingDataset(root, shuffle=False, on_corrupt="skip")
    got = [_id(s) for s in skipping]
    assert got == [i for i in range(N) if i != bad]
    assert skipping.stats()["skipped"] == 1


def test_a_group_holds_a_batch_of_small_samples_and_few_large_ones() -> None:
    assert group_size(114_660) == GROUP_SAMPLES
    assert group_size(4 << 20) == 4  # 16 MiB of them at most
    assert group_size(64 << 20) == 1


def test_a_worker_keeps_the_memory_it_freed() -> None:
    assert keep_freed_memory() is True  # glibc (Linux): mallopt took both settings


def _frozen(samples: list[bytes]) -> int:
    return gc.get_freeze_count()  # (a collate function: it runs in the worker)


def test_a_worker_takes_what_it_inherited_out_of_the_garbage_collector(tmp_path: Path) -> None:
    """A full collection in a forked worker would walk (and copy) every object of the
    training process; the worker freezes them as it starts reading."""
    ds = StreamingDataset(_write(tmp_path / "ds"))
    loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=1, collate_fn=_frozen)
    assert next(iter(loader)) > 1000  # (torch alone is many more objects than that)
    assert gc.get_freeze_count() == 0  # the training process's own collector is left alone


def test_what_a_worker_runs_is_imported_with_the_dataset_not_in_each_worker() -> None:
    """A module imported at first use is imported again by each forked worker, before its
    first batch (numpy.random: ~10 ms each)."""
    code = (
        "import sys, stoker.stream; stoker.stream.StreamingDataset; "
        "print(sorted({'numpy.random', 'stoker.stream._mixture_reader'} - set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _evict_until_cold(root: Path, tries: int = 20) -> None:
    """Each shard out of the page cache, evicted again while its middle page is still cached:
    now and then, on a busy machine, an eviction left some pages of a file just read (a test
    of cold reads would then read warm ones), five times in a row once (a fresh clone's make
    test): the kernel skips a page it holds locked meanwhile, so each try waits a little more."""
    for shard in root.glob("*.stk"):
        fd = os.open(shard, os.O_RDONLY)
        try:
            for attempt in range(tries):
                evict_fd(fd)
                if not page_cached(fd, os.fstat(fd).st_size // 2):
                    break
                time.sleep(0.01 * attempt)
            else:
                raise AssertionError(f"{shard}: still in the page cache after {tries} evictions")
        finally:
            os.close(fd)


def test_warm_samples_are_read_on_the_callers_thread_and_cold_ones_on_reader_threads(
    tmp_path: Path,
) -> None:
    """The page cache decides: a copy from it costs less than a hand-off to a reader thread,
    a read from the disk is better waited for on several threads at once."""
    n = 2_000  # samples of 0.5-4.5 KiB in 1 MiB shards: a shard's tables are not its samples' pages
    with ShardWriter(tmp_path / "ds", shard_size="1MiB", codec="bytes") as w:
        for i in range(n):
            w.write(_payload(i) * 10)
    root = tmp_path / "ds"
    ids = np.random.default_rng(5).permutation(n)
    want = [_payload(int(i)) * 10 for i in ids]
    warm = StreamingDataset(root)
    assert list(one_by_one(warm.reader, ids)) == want
    assert warm.reader.access()._read_pool is None  # every group was in the page cache
    _evict_until_cold(root)
    cold = StreamingDataset(root)
    assert list(one_by_one(cold.reader, ids)) == want
    assert cold.reader.access()._read_pool is not None


def test_a_corrupt_sample_is_caught_on_the_callers_thread_too(tmp_path: Path) -> None:
    root = _write(tmp_path / "ds")
    ds = StreamingDataset(root, shuffle=False)
    shard = root / ds.index.shards[2].name
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0x01
    shard.write_bytes(bytes(data))  # (written: in the page cache, so read inline)
    with pytest.raises(CorruptSample, match=r"shard shard-000002.stk"):
        list(one_by_one(ds.reader, np.arange(N)))
    assert ds.reader.access()._read_pool is None


def _write_large(root: Path, n: int = 40, size: int = 20 << 10) -> Path:
    with ShardWriter(root, shard_size="256KiB", codec="bytes") as w:
        for i in range(n):
            w.write(i.to_bytes(4, "little") + bytes([i % 251]) * (size - 4))
    return root


def test_warm_large_samples_are_read_as_each_is_handed_over(tmp_path: Path) -> None:
    """A group of large samples in the page cache is read a sample at a time as the loader
    takes them (each still in the CPU's cache when collate copies it): a sample damaged after
    the group began, but before it was taken, is caught; one taken before is already whole."""
    root = _write_large(tmp_path / "ds")  # just written: in the page cache
    ds = StreamingDataset(root, shuffle=False, on_corrupt="skip")
    assert ds.index.largest_sample >= 16 << 10 and group_size(ds.index.largest_sample) > 30
    samples = one_by_one(ds.reader, np.arange(40))
    assert _id(next(samples)) == 0
    shard = root / ds.index.shards[0].name
    start, _ = ds.reader.group_readers([(0, 5)])[0].span(5)
    with open(shard, "r+b") as f:  # sample 5 of the group being handed over, damaged now
        f.seek(start + 100)
        f.write(b"\xff")
    rest = [_id(s) for s in samples]
    assert rest == [i for i in range(1, 40) if i != 5]
    stats = ds.stats()
    assert (stats["samples"], stats["skipped"]) == (39, 1)
    assert stats["bytes_read"] == 39 * (20 << 10)
    assert ds.reader.access()._read_pool is None  # warm: all on the caller's thread


def test_a_group_left_half_way_still_counts_what_it_handed_over(tmp_path: Path) -> None:
    ds = StreamingDataset(_write_large(tmp_path / "ds"), shuffle=False)
    samples = one_by_one(ds.reader, np.arange(40))
    assert [_id(next(samples)) for _ in range(7)] == list(range(7))
    del samples  # (a loader shut down mid-epoch)
    gc.collect()
    assert ds.stats()["samples"] == 7 and ds.stats()["bytes_read"] == 7 * (20 << 10)
