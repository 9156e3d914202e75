"""Reading in place, the next batch's small samples are asked of the disk (WILLNEED) while
the current batch is read; never the first batch's, large samples' or pages already cached."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from stoker.measure.storage import evict_fd
from stoker.stream import ShardWriter, StreamingDataset, StreamingLoader, _shard_access, _tensors
from stoker.stream._format import ShardReader

N, RECORD = 240, 3000  # bytes


def _write(root: Path) -> Path:
    with ShardWriter(root, shard_size="64KiB") as w:
        for i in range(N):
            w.write(i.to_bytes(8, "little") + bytes(RECORD - 8))
    return root


def _spans(ds: StreamingDataset, batches: np.ndarray) -> set[tuple[str, int, int]]:
    """(shard file, offset, length) of every sample of ``batches``."""
    out = set()
    for g in batches.reshape(-1):
        shard, i = ds.index.locate(int(g))
        name = ds.index.shards[shard].name
        reader = ShardReader.open(name, os.open(Path(ds.remote) / name, os.O_RDONLY), shuffled=True)
        out.add((name, *reader.span(i)))
        reader.close()
    return out


def _advised(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """Every WILLNEED asked from now on, as (file name, offset, length)."""
    calls: list[tuple[str, int, int]] = []
    real = os.posix_fadvise

    def record(fd: int, offset: int, length: int, advice: int) -> None:
        if advice == os.POSIX_FADV_WILLNEED:
            calls.append((Path(os.readlink(f"/proc/self/fd/{fd}")).name, offset, length))
        real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", record)
    return calls


def _epoch(ds: StreamingDataset, workers: int = 0) -> list[int]:
    ids = [int(i) for b in StreamingLoader(ds, 16, num_workers=workers) for i in b[:, 0]]
    if ds.reader._access is not None:
        ds.reader._access.pool.shutdown(wait=True)  # the advice of the last batches has been given
    return ids


def test_each_batch_but_the_first_is_asked_of_the_disk_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = StreamingDataset(_write(tmp_path / "ds"), seed=1, dtype=torch.uint8, batch_size=16)
    batches = ds.my_batches()
    assert len(batches) == N // 16
    _as_if_cold(monkeypatch)
    calls = _advised(monkeypatch)
    _epoch(ds)
    assert len(calls) == len(set(calls)), "a sample was advised twice"
    assert set(calls) == _spans(ds, batches[1:])
    assert not set(calls) & _spans(ds, batches[:1])


def _as_if_cold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every page as if not cached: to the advice's probe, and to the reads' judgement."""
    monkeypatch.setattr(_shard_access, "page_cached", lambda fd, offset: False)
    monkeypatch.setattr(_tensors, "in_page_cache", lambda spans: False)


def test_while_batches_are_read_warm_nothing_is_advised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reads judge every batch warm (the shards were just written): the advice is not
    searched for at all, even where its own probe would call a page cold."""
    root = _write(tmp_path / "ds")
    monkeypatch.setattr(_shard_access, "page_cached", lambda fd, offset: False)
    calls = _advised(monkeypatch)
    ids = _epoch(StreamingDataset(root, seed=1, dtype=torch.uint8))
    assert len(set(ids)) == len(ids) == N // 16 * 16
    assert calls == []


def test_large_samples_and_cached_pages_are_not_advised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _write(tmp_path / "ds")
    calls = _advised(monkeypatch)
    warm = StreamingDataset(root, seed=1, dtype=torch.uint8)
    _epoch(warm)  # the shards were just written, and now read: every page is cached
    assert calls == []
    fd = os.open(root / warm.index.shards[0].name, os.O_RDONLY)
    try:
        assert _shard_access.page_cached(fd, 100)
        evict_fd(fd)
        assert not _shard_access.page_cached(fd, 100)
    finally:
        os.close(fd)

    _as_if_cold(monkeypatch)
    monkeypatch.setattr(_shard_access, "PIECE", RECORD)  # every sample is a large one now
    _epoch(StreamingDataset(root, seed=1, dtype=torch.uint8))
    assert calls == []


def test_advised_epochs_deliver_every_sample_once_with_workers_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _write(tmp_path / "ds")
    _as_if_cold(monkeypatch)
    for workers in (0, 2):
        ids = _epoch(StreamingDataset(root, seed=2, dtype=torch.uint8), workers)
        assert len(set(ids)) == len(ids) == N // 16 * 16
