"""Samples as tensors read straight into the batch (``dtype=``), the recycled batch buffers and
the read-ahead thread of ``num_workers=0``."""

from __future__ import annotations

import json
import mmap
import os
import re
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

from stoker.errors import StreamError
from stoker.measure.storage import evict_fd
from stoker.stream import ShardWriter, StreamingDataset, StreamingLoader, _buffers, _tensors
from stoker.stream._format import CorruptSample, ShardReader, page_cached

N, WIDTH = 300, 256  # int32 items per record


def _record(i: int) -> bytes:
    return (np.arange(WIDTH, dtype=np.int32) + i * 1000).tobytes()


def _write(root: Path, n: int = N, sizes: bool = False) -> Path:
    with ShardWriter(root, shard_size="32KiB") as w:
        for i in range(n):
            w.write(_record(i)[: 4 * (8 + i % 50)] if sizes else _record(i))
    return root


def _first_items(batch: torch.Tensor) -> list[int]:
    return (batch[:, 0] // 1000).tolist()


@pytest.mark.parametrize("workers", [0, 2])
def test_fixed_size_records_arrive_as_one_tensor_in_the_global_order(
    tmp_path: Path, workers: int
) -> None:
    root = _write(tmp_path / "ds")
    plain = [s for b in StreamingLoader(StreamingDataset(root, seed=3), 16) for s in b]
    loader = StreamingLoader(
        StreamingDataset(root, seed=3, dtype=torch.int32), 16, num_workers=workers
    )
    ids = []
    for batch in loader:
        assert batch.dtype == torch.int32 and batch.shape == (16, WIDTH)
        for row, i in zip(batch, _first_items(batch), strict=True):
            assert torch.equal(row, torch.from_numpy(np.frombuffer(_record(i), np.int32)))
        ids += _first_items(batch)
    assert ids == [np.frombuffer(s, np.int32)[0] // 1000 for s in plain]  # same order as bytes
    assert len(ids) == N // 16 * 16 == len(set(ids))
    assert loader.metrics.samples == len(ids)
    assert loader.metrics.bytes_read == len(ids) * WIDTH * 4


def test_records_of_different_sizes_arrive_as_a_list(tmp_path: Path) -> None:
    root = _write(tmp_path / "ds", sizes=True)
    ds = StreamingDataset(root, shuffle=False, dtype=torch.int32)
    batches = list(StreamingLoader(ds, 10))
    assert all(isinstance(b, list) and len(b) == 10 for b in batches)
    for i, t in enumerate(t for b in batches for t in b):
        assert torch.equal(t, torch.from_numpy(np.frombuffer(_record(i), np.int32)[: 8 + i % 50]))
    assert torch.equal(ds[7], batches[0][7])  # random access gives the same tensor


def test_samples_of_different_sizes_read_for_several_epochs(tmp_path: Path) -> None:
    """Recycled buffers of several sizes: taking one back out of the pool compared numpy
    arrays with ==, and the second epoch died with "operands could not be broadcast"."""
    root = _write(tmp_path / "ds", sizes=True)
    ds = StreamingDataset(root, shuffle=False, dtype=torch.int32)
    loader = StreamingLoader(ds, 10)
    for epoch in range(3):
        ds.set_epoch(epoch)
        for i, t in enumerate(t for b in loader for t in b):
            want = np.frombuffer(_record(i), np.int32)[: 8 + i % 50]
            assert torch.equal(t, torch.from_numpy(want)), (epoch, i)


def test_a_free_buffer_serves_any_smaller_sample() -> None:
    """Buffers were reused for their exact size only: with samples of varied sizes every one
    faulted in new memory, each epoch (a warm unet3d epoch read at 1.0-3.1 GB/s, now 3.6-4.8)."""
    pool = _buffers.BufferPool()
    big = pool.tensor(1000)
    where = big.data_ptr()
    del big  # the loop is done with it: back to the pool
    smaller = pool.tensor(600)
    assert smaller.data_ptr() == where and smaller.numel() == 600
    smaller[:] = 7
    larger = pool.tensor(2000)  # nothing free holds it: new memory
    assert larger.data_ptr() != where and larger.numel() == 2000
    del smaller, larger
    sizes = sorted(b.nbytes for b in pool.free)
    assert sizes == [1000, 2000]
    assert pool.tensor(1500).numel() == 1500 and [b.nbytes for b in pool.free] == [1000]


def test_large_samples_are_read_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_tensors, "PIECE", 100)  # every record is read in 11 pieces
    root = _write(tmp_path / "ds", n=40)
    batches = list(StreamingLoader(StreamingDataset(root, shuffle=False, dtype=torch.int32), 8))
    flat = torch.cat(batches)
    assert torch.equal(
        flat,
        torch.from_numpy(
            np.frombuffer(b"".join(map(_record, range(40))), np.int32).reshape(40, WIDTH)
        ),
    )


def test_batch_buffers_are_reused_only_after_the_loop_drops_them(tmp_path: Path) -> None:
    root = _write(tmp_path / "ds")
    kept = [
        (b[:, 0].clone(), b) for b in StreamingLoader(StreamingDataset(root, dtype=torch.int32), 16)
    ]
    assert len({b.data_ptr() for _, b in kept}) == len(kept)  # all alive: none shared
    for first, b in kept:
        assert torch.equal(first, b[:, 0])  # and none overwritten
    del kept
    pointers = set()
    loader = StreamingLoader(StreamingDataset(root, dtype=torch.int32), 16)
    for b in loader:
        pointers.add(b.data_ptr())
        view = b[:, :2]  # a view keeps its buffer until the next batch replaces it
        assert torch.equal(view[:, 0], b[:, 0])
        del b
    # Steady state: a few buffers in rotation, of ~19 batches. At most this many are alive at
    # once: the view's, the loop's batch, those queued ahead, and the one the read-ahead
    # thread holds while the queue is full (4 was one short: it failed when that thread ran
    # ahead, ~1 run in 6 on a busy machine).
    assert len(pointers) <= 2 + loader.read_ahead + 1


def test_a_corrupt_sample_is_named_or_skipped(tmp_path: Path) -> None:
    root = _write(tmp_path / "ds")
    ds = StreamingDataset(root, shuffle=False)
    shard = root / ds.index.shards[1].name
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0xFF
    shard.write_bytes(bytes(data))
    loader = StreamingLoader(StreamingDataset(root, shuffle=False, dtype=torch.int32), 16)
    with pytest.raises(CorruptSample, match=r"shard shard-000001.stk: sample \d+ \(byte offset"):
        list(loader)
    assert not [t for t in threading.enumerate() if t.name == "stoker-read-ahead"]
    skipping = StreamingLoader(
        StreamingDataset(root, shuffle=False, dtype=torch.int32, on_corrupt="skip"), 16
    )
    sizes = [len(b) for b in skipping]
    assert sum(sizes) == N // 16 * 16 - 1 and sorted(set(sizes)) == [15, 16]
    assert skipping.metrics.skipped == 1


def test_stopping_early_stops_the_read_ahead_thread(tmp_path: Path) -> None:
    loader = StreamingLoader(StreamingDataset(_write(tmp_path / "ds"), dtype=torch.int32), 4)
    for k, _ in enumerate(loader):
        if k == 2:
            break
    assert not [t for t in threading.enumerate() if t.name == "stoker-read-ahead"]
    state = loader.state_dict()
    assert state["position"] == 12


def test_dtype_errors_name_what_to_change(tmp_path: Path) -> None:
    with ShardWriter(tmp_path / "j", codec="json") as w:
        w.write({"a": 1})
    with pytest.raises(StreamError, match="codec is 'json': leave dtype unset"):
        len(StreamingDataset(tmp_path / "j", dtype=torch.int32))  # (checked with the index)
    with ShardWriter(tmp_path / "odd") as w:
        w.write(b"12345")
    ds = StreamingDataset(tmp_path / "odd", dtype=torch.int32)
    with pytest.raises(
        StreamError, match=r"sample 0: 5 bytes is not a whole number of torch.int32"
    ):
        list(StreamingLoader(ds, 1))


def test_a_program_that_leaves_the_loop_early_exits_cleanly(tmp_path: Path) -> None:
    root = _write(tmp_path / "ds")
    code = (
        "import sys, torch\n"
        "from stoker.stream import StreamingDataset, StreamingLoader\n"
        "it = iter(StreamingLoader(StreamingDataset(sys.argv[1], dtype=torch.int32), 4))\n"
        "next(it)\n"  # left mid-epoch, the read-ahead thread still running
    )
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("workers", [0, 2])
def test_npy_rows_stream_as_arrays_or_straight_into_tensors(tmp_path: Path, workers: int) -> None:
    """`--from npy` stores rows raw (codec "array"), so the dtype= fast path reads them, in
    their shape, and without dtype they come back as the arrays written."""
    from stoker.stream import write_shards

    src = tmp_path / "tokens"
    src.mkdir()
    rows = np.arange(40 * 3 * 4, dtype=">i4").reshape(40, 3, 4)  # big endian: stored native
    np.save(src / "a.npy", rows[:25])
    np.save(src / "b.npy", rows[25:])
    index = write_shards(src, tmp_path / "ds", kind="npy", shard_size=400)
    assert index.codec == "array" and len(index.shards) > 2
    plain = StreamingDataset(tmp_path / "ds", shuffle=False)
    assert plain[31].dtype == np.int32 and np.array_equal(plain[31], rows[31])
    plain[31][0, 0] = -1  # a writable copy, as torch expects
    ds = StreamingDataset(tmp_path / "ds", shuffle=False, dtype=torch.int32)
    assert ds.sample_shape == (3, 4) and torch.equal(ds[7], torch.from_numpy(rows[7].astype("<i4")))
    batches = list(StreamingLoader(ds, 8, num_workers=workers))
    assert [b.shape for b in batches] == [(8, 3, 4)] * 5
    assert torch.equal(torch.cat(batches), torch.from_numpy(rows.astype("<i4")))


def test_array_datasets_refuse_another_layout_and_a_dtype_not_theirs(tmp_path: Path) -> None:
    from stoker.stream import write_shards

    with ShardWriter(tmp_path / "a", codec="array") as w:
        w.write(np.zeros(4, np.float32))
        with pytest.raises(StreamError, match=r"sample 1 is a float32 \(5,\) array, but the "):
            w.write(np.zeros(5, np.float32))
        with pytest.raises(StreamError, match="sample 1 is a list, not a NumPy array"):
            w.write([1.0, 2.0])
    with pytest.raises(StreamError, match=r"float32 \(4,\) arrays: pass dtype=torch.float32"):
        len(StreamingDataset(tmp_path / "a", dtype=torch.int32))  # (checked with the index)
    src = tmp_path / "npy"
    src.mkdir()
    np.save(src / "1.npy", np.zeros((3, 4), np.int64))
    np.save(src / "2.npy", np.zeros((3, 5), np.int64))
    with pytest.raises(StreamError, match=r"2.npy: rows are int64 \(5,\), but those of .*1.npy"):
        write_shards(src, tmp_path / "out", kind="npy")
    assert not (tmp_path / "out" / "index.json").exists()


def test_npy_edge_cases_byte_orders_records_and_empty_rows(tmp_path: Path) -> None:
    from stoker.stream import write_shards

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    np.save(mixed / "a.npy", np.arange(6, dtype="<i4").reshape(3, 2))
    np.save(mixed / "b.npy", np.arange(6, 12, dtype=">i4").reshape(3, 2))  # same dtype, stored BE
    write_shards(mixed, tmp_path / "m", kind="npy")
    assert np.array_equal(StreamingDataset(tmp_path / "m", shuffle=False)[4], [8, 9])
    records = tmp_path / "records"
    records.mkdir()
    np.save(records / "r.npy", np.array([(1, 2.5)], dtype=[("a", "<i4"), ("b", "<f8")]))
    with pytest.raises(StreamError, match=r"r.npy: a structured \(record\) array"):
        write_shards(records, tmp_path / "r", kind="npy")
    empty = tmp_path / "empty"
    empty.mkdir()
    np.save(empty / "z.npy", np.zeros((4, 0), np.float32))
    write_shards(empty, tmp_path / "z", kind="npy")
    ds = StreamingDataset(tmp_path / "z", dtype=torch.float32, shuffle=False)
    assert [b.shape for b in StreamingLoader(ds, 2)] == [(2, 0), (2, 0)] and ds[0].shape == (0,)


def test_a_large_buffer_is_made_at_the_largest_sample_size() -> None:
    """A buffer made for a 30 MB unet3d sample left the next 140 MB one to fault in new memory;
    now any later sample fits it. Small samples keep their exact sizes."""
    pool = _buffers.BufferPool(capacity=5 * _tensors.PIECE)
    first = pool.tensor(_tensors.PIECE)
    where = first.data_ptr()
    assert first.numel() == _tensors.PIECE  # the view is the size asked
    del first
    later = pool.tensor(4 * _tensors.PIECE)  # larger than the first sample, within the largest
    assert later.data_ptr() == where and later.numel() == 4 * _tensors.PIECE
    small = pool.tensor(1000)
    del later, small
    assert sorted(b.nbytes for b in pool.free) == [1000, 5 * _tensors.PIECE]


def test_the_index_keeps_each_shard_s_largest_sample(tmp_path: Path) -> None:
    root = _write(tmp_path / "ds", sizes=True)
    ds = StreamingDataset(root, shuffle=False, dtype=torch.int32)
    expected = [
        max(4 * (8 + i % 50) for i in range(ds.index.first(k), ds.index.first(k) + s.samples))
        for k, s in enumerate(ds.index.shards)
    ]
    assert [s.largest for s in ds.index.shards] == expected
    assert ds.index.largest_sample == 4 * 57
    # An index written before `largest` was kept still reads, and says 0.
    index = root / "index.json"
    raw = json.loads(index.read_text())
    for s in raw["shards"]:
        del s["largest"]
    index.write_text(json.dumps(raw))
    old = StreamingDataset(root, shuffle=False, dtype=torch.int32)
    assert old.index.largest_sample == 0
    assert sum(len(b) for b in StreamingLoader(old, 10)) == N
    # And one from a later writer, with keys this version does not know, reads too.
    for s in raw["shards"]:
        s["written_by_a_later_version"] = 1
    index.write_text(json.dumps(raw))
    later = StreamingDataset(root, shuffle=False, dtype=torch.int32)
    assert later.index.samples == N


def test_the_training_process_makes_large_buffers_at_the_largest_sample_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shuffled epoch of samples of varied sizes, all "large": every buffer the training
    process makes for them can hold any sample of the dataset, so a free one always fits."""
    monkeypatch.setattr(_tensors, "PIECE", 64)
    monkeypatch.setattr(_buffers, "PIECE", 64)  # (the pool's rule for large samples)
    monkeypatch.setattr(_tensors, "_mapped", lambda *a: None)  # as on a file system without maps
    root = _write(tmp_path / "ds", sizes=True)
    ds = StreamingDataset(root, shuffle=True, seed=3, dtype=torch.int32)
    made = []
    real_empty = np.empty

    def empty(n, dtype):  # noqa: ANN001, ANN202 - the pool's new buffers
        if sys._getframe(1).f_code is _buffers.BufferPool.tensor.__code__ and n >= 64:
            made.append(n)
        return real_empty(n, dtype)

    monkeypatch.setattr(_buffers.np, "empty", empty)
    seen = sum(len(batch) for batch in StreamingLoader(ds, 2))
    monkeypatch.undo()
    assert seen == N
    # (two samples of one size share one buffer, which may be larger still)
    assert made and min(made) == ds.index.largest_sample == 4 * 57


def _mapped_base(t: torch.Tensor) -> bool:
    """Whether a tensor's memory is a map of a shard file (rather than a batch buffer)."""
    at = t.data_ptr()
    with open("/proc/self/maps") as f:
        for line in f:
            span, *_, path = line.split()
            lo, hi = (int(x, 16) for x in span.split("-"))
            if lo <= at < hi:
                return path.endswith(".stk")
    return False


@pytest.mark.parametrize("cold", [False, True])
def test_large_samples_are_maps_of_their_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cold: bool
) -> None:
    """A large sample, cached or not, is handed over as a private map of the shard's pages: no
    copy, no fresh memory. Writing to it leaves the shard as it was; it outlives the file."""
    monkeypatch.setattr(_tensors, "PIECE", 64)
    root = _write(tmp_path / "ds", sizes=True)
    before = {p.name: p.read_bytes() for p in root.glob("*.stk")}
    uncached = []
    if cold:  # out of the page cache just before each is mapped (opening a shard reads it)
        real = _tensors._mapped

        def evicted_then_mapped(reader, *place):  # noqa: ANN001, ANN002, ANN202
            evict_fd(reader.fd)  # (mapped pages stay)
            uncached.append(not page_cached(reader.fd, place[1]))
            return real(reader, *place)

        monkeypatch.setattr(_tensors, "_mapped", evicted_then_mapped)
    ds = StreamingDataset(root, shuffle=False, dtype=torch.int32)
    got = [t for b in StreamingLoader(ds, 10) for t in b]
    assert len(got) == N
    for i, t in enumerate(got):
        assert torch.equal(t, torch.from_numpy(np.frombuffer(_record(i), np.int32)[: 8 + i % 50]))
    large = [t for t in got if t.numel() * 4 >= 64]
    assert large and all(_mapped_base(t) for t in large)
    assert not any(_mapped_base(t) for t in got if t.numel() * 4 < 64)  # small ones: read
    assert any(uncached) == cold  # (the first of each shard, at least, was mapped from disk)
    large[0][:] = -1  # the consumer's own copy of what it writes
    del ds
    for p in root.glob("*.stk"):
        assert p.read_bytes() == before[p.name]
        p.unlink()
    assert torch.equal(large[1], large[1].clone()) and int(large[0][0]) == -1


def test_a_shard_cut_short_under_a_map_is_named_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard truncated after its sample was mapped: touching those pages would kill the
    process (SIGBUS). The map is populated first, which fails instead, and names the sample."""
    monkeypatch.setattr(_tensors, "PIECE", 64)
    root = _write(tmp_path / "ds", n=40, sizes=True)
    real, cut = _tensors._mapped, []

    def mapped_then_cut(reader, i, offset, size):  # noqa: ANN001, ANN202
        m = real(reader, i, offset, size)
        if m is not None and not cut:  # before any sample was read: none is touched later
            cut.append(i)
            os.truncate(root / reader.name, 0)
        return m

    monkeypatch.setattr(_tensors, "_mapped", mapped_then_cut)
    ds = StreamingDataset(root, shuffle=False, dtype=torch.int32)
    name = ds.index.shards[0].name
    spans = _spans(tmp_path / "intact", name)
    with pytest.raises(CorruptSample, match=rf"shard {name}: sample \d+") as got:
        list(StreamingLoader(ds, 7))
    assert cut
    i, offset = map(int, re.search(r"sample (\d+) \(byte offset (\d+)\)", str(got.value)).groups())
    assert spans[i][0] <= offset < sum(spans[i])  # a byte of that sample, as the file has it
    # A mapped sample past the file's first page, read from a shard cut short: its error names
    # the offset in the file (not in the map, which starts at a page boundary).
    shard = tmp_path / "intact" / name
    reader = ShardReader.open(name, os.open(shard, os.O_RDONLY), shuffled=False)
    i = next(k for k, (at, size) in enumerate(spans) if at > mmap.PAGESIZE and size >= 64)
    mapped = real(reader, i, *spans[i])
    os.truncate(shard, 0)
    with ThreadPoolExecutor(2) as pool:
        bad, _ = _tensors._read_and_check(
            pool, 2, [(reader, i, *spans[i])], [memoryview(mapped.array)], {0: mapped}
        )
    reader.close()
    at = int(re.fullmatch(rf"shard {name}: sample {i} \(byte offset (\d+)\).*", str(bad[0]))[1])
    assert spans[i][0] <= at < sum(spans[i])


def _spans(root: Path, name: str) -> list[tuple[int, int]]:
    """Every sample's (offset, size) in shard ``name`` of a dataset written like the test's."""
    _write(root, n=40, sizes=True)
    reader = ShardReader.open(name, os.open(root / name, os.O_RDONLY), shuffled=False)
    try:
        return [reader.span(i) for i in range(len(reader))]
    finally:
        reader.close()


def test_a_corrupt_mapped_sample_is_named_or_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tensors, "PIECE", 64)
    root = _write(tmp_path / "ds", n=40, sizes=True)  # 32-228 bytes, 64 and more "large"
    ds = StreamingDataset(root, shuffle=False)
    shard = root / ds.index.shards[0].name
    reader = ShardReader.open(shard.name, os.open(shard, os.O_RDONLY), shuffled=False)
    offset, size = reader.span(10)  # 72 bytes: mapped
    reader.close()
    data = bytearray(shard.read_bytes())
    data[offset + 5] ^= 0xFF
    shard.write_bytes(bytes(data))
    maps = []
    real = _tensors._mapped
    monkeypatch.setattr(_tensors, "_mapped", lambda *a: maps.append(real(*a)) or maps[-1])
    loader = StreamingLoader(StreamingDataset(root, shuffle=False, dtype=torch.int32), 7)
    with pytest.raises(CorruptSample, match=rf"shard {shard.name}: sample 10 \(byte offset"):
        list(loader)
    assert any(m is not None for m in maps)  # (the corrupt one among them: checked in place)
    skipping = StreamingLoader(
        StreamingDataset(root, shuffle=False, dtype=torch.int32, on_corrupt="skip"), 7
    )
    assert sum(len(b) for b in skipping) == 40 // 7 * 7 - 1 and skipping.metrics.skipped == 1
