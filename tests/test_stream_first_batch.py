"""The first batch of a cold remote job, read by range (stream/_remote.py), against a real
Azurite: it arrives before any whole shard, its GETs run at once, every way of reading gets the
right bytes, and a damaged sample is named or skipped."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from stoker.errors import StreamError
from stoker.store import open_store
from stoker.store._azure import BlobStore
from stoker.stream import ShardWriter, StreamingDataset, StreamingLoader, _remote, _tensors
from stoker.stream._format import HEADER, CorruptSample
from stoker.stream._shard_access import ShardAccess

N, WIDTH = 400, 250  # samples of 250 int64s (2,000 bytes), each filled with its id


def _write(url: str, **options: object) -> None:
    with ShardWriter(url, shard_size="64KiB", **options) as w:
        for i in range(N):
            data = i.to_bytes(8, "little") * WIDTH
            w.write(data if not options else {"id": i, "data": data})


class _Downloads:
    """Holds whole-shard downloads until ``release()``; after ``abort()`` they fail at once. A
    test that leaves a loader mid-epoch aborts them first: closing the loader waits for the batch
    being read ahead, and so for its downloads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.go, self.aborted, fetch = threading.Event(), False, ShardAccess._fetch

        def held_fetch(proc: ShardAccess, shard: int) -> Path:
            self.go.wait(60)
            if self.aborted:
                raise StreamError("download aborted by the test")
            return fetch(proc, shard)

        monkeypatch.setattr(ShardAccess, "_fetch", held_fetch)

    def release(self) -> None:
        self.go.set()

    def abort(self) -> None:
        self.aborted = True
        self.go.set()


@pytest.fixture
def downloads(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Downloads]:
    held = _Downloads(monkeypatch)
    yield held
    held.abort()


def _no_shard_arrived(loader: StreamingLoader, cache: Path) -> bool:
    return loader.metrics.cache_misses == 0 and not list(cache.glob("shard-*"))


def _rows_are_ids(batch: torch.Tensor) -> bool:
    return batch.shape[1] == WIDTH and bool((batch == batch[:, :1]).all())


def test_the_first_batch_comes_by_range_while_its_shards_download(
    blob_env: str, tmp_path: Path, downloads: _Downloads
) -> None:
    url = f"{blob_env}/ranged"
    _write(url)
    ds = StreamingDataset(url, tmp_path / "cache", dtype=torch.int64, batch_size=40)
    loader = StreamingLoader(ds)
    expected = ds.my_batches()[0].tolist()
    batches = iter(loader)
    first = next(batches)
    assert first.shape == (40, WIDTH) and _rows_are_ids(first)
    assert first[:, 0].tolist() == expected
    assert _no_shard_arrived(loader, tmp_path / "cache")
    downloads.release()
    ids = first[:, 0].tolist() + [i for b in batches for i in b[:, 0].tolist()]
    assert sorted(ids) == list(range(N))
    assert loader.metrics.bytes_read == N * 2000


@pytest.mark.parametrize("piece", [None, 300])  # 300: each sample fetched in 7 ranges
def test_decoded_samples_come_by_range_too(
    blob_env: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    downloads: _Downloads,
    piece: int | None,
) -> None:
    url = f"{blob_env}/decoded"
    _write(url, codec="pickle")
    if piece:
        monkeypatch.setattr(_remote, "PIECE", piece)
    loader = StreamingLoader(StreamingDataset(url, tmp_path / "cache"), 40, collate_fn=list)
    batches = iter(loader)
    first = next(batches)
    assert _no_shard_arrived(loader, tmp_path / "cache")
    assert all(s["data"] == s["id"].to_bytes(8, "little") * WIDTH for s in first)
    downloads.release()
    assert sorted([s["id"] for s in first] + [s["id"] for b in batches for s in b]) == list(
        range(N)
    )


def test_the_first_batch_asks_for_all_its_samples_at_once(
    blob_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, downloads: _Downloads
) -> None:
    url = f"{blob_env}/at-once"
    _write(url)
    ds = StreamingDataset(url, tmp_path / "cache", dtype=torch.int64, batch_size=64)
    loader = StreamingLoader(ds)
    batch = ds.my_batches()[0]
    ranges: list[tuple[str, int, int]] = []
    now = peak = 0
    read_range = BlobStore.read_range

    async def slow_range(self: BlobStore, key: str, start: int, end: int, etag=None):  # type: ignore[no-untyped-def]
        nonlocal now, peak
        ranges.append((key, start, end))
        now += 1
        peak = max(peak, now)
        await asyncio.sleep(0.02)  # a service's latency: requests must overlap to hide it
        try:
            return await read_range(self, key, start, end, etag)
        finally:
            now -= 1

    monkeypatch.setattr(BlobStore, "read_range", slow_range)
    batches = iter(loader)
    assert _rows_are_ids(next(batches))  # whole shards are held: only ranged reads
    downloads.abort()  # before `batches` closes, which waits for the batch being read
    shards = {ds.index.shards[ds.index.locate(int(g))[0]].name for g in batch}
    heads = [r for r in ranges if r[1] == 0]
    samples = [r for r in ranges if r[1] != 0]
    assert sorted(key for key, *_ in heads) == sorted(shards)  # one GET per shard's tables
    assert len(samples) == 64 and all(end - start == 2000 for _, start, end in samples)
    assert peak == _remote.INFLIGHT


def test_samples_larger_than_a_piece_arrive_whole(
    blob_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, downloads: _Downloads
) -> None:
    url = f"{blob_env}/pieces"
    _write(url)
    monkeypatch.setattr(_tensors, "PIECE", 700)  # a row in 3 ranged GETs, straight into it
    loader = StreamingLoader(StreamingDataset(url, tmp_path / "cache", dtype=torch.int64), 40)
    batches = iter(loader)
    first = next(batches)
    assert _rows_are_ids(first) and _no_shard_arrived(loader, tmp_path / "cache")
    downloads.release()
    assert sum(len(b) for b in batches) == N - 40


def _damage_first_sample(url: str, ds: StreamingDataset) -> tuple[str, int]:
    """Flip a byte of the first batch's first sample in its blob; its shard's name and index."""
    shard, i = ds.index.locate(int(ds.my_batches()[0][0]))
    name, store = ds.index.shards[shard].name, open_store(url)

    async def flip() -> None:
        data = bytearray(await store.read_all(name) or b"")
        table = HEADER.size + 8 * i  # the offset table follows the header
        data[int.from_bytes(data[table : table + 8], "little")] ^= 1
        await store.write_bytes(name, bytes(data))

    asyncio.run(flip())
    return name, i


@pytest.mark.parametrize("on_corrupt", ["raise", "skip"])
def test_a_damaged_sample_in_the_first_batch_is_named_or_skipped(
    blob_env: str, tmp_path: Path, downloads: _Downloads, on_corrupt: str
) -> None:
    url = f"{blob_env}/damaged"
    _write(url)
    ds = StreamingDataset(url, tmp_path / "cache", dtype=torch.int64, on_corrupt=on_corrupt)
    loader = StreamingLoader(ds, 40)
    name, i = _damage_first_sample(url, ds)
    batches = iter(loader)  # whole shards are held: only the first batch is read, by range
    try:
        if on_corrupt == "raise":
            with pytest.raises(CorruptSample, match=rf"shard {name}: sample {i} "):
                next(batches)
        else:
            first = next(batches)
            assert first.shape == (39, WIDTH) and _rows_are_ids(first)
            assert ds.stats()["skipped"] == 1
    finally:
        downloads.abort()
