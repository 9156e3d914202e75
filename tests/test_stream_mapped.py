"""Warm samples in a DataLoader worker, copied out of maps of their shards (stream/_samples.py,
``_read_mapped``; ``ShardReader.mapped``): the same bytes as pread, corrupt ones caught the same
way, a shard truncated under the reader read by pread (a short read named, no SIGBUS), and the
training process's own reads left on pread."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np
import pytest
import torch.utils.data

from stoker.stream import ShardWriter, StreamingDataset
from stoker.stream._format import CorruptSample, ShardReader
from stoker.stream._samples import MAP_BELOW, _Group, _read_mapped, _read_run, one_by_one

N = 400


def _payload(i: int) -> bytes:
    return i.to_bytes(4, "little") + bytes([i % 251]) * (60 + (i * 37) % 500)


def _write(root: Path, n: int = N) -> Path:
    with ShardWriter(root, shard_size="16KiB", codec="bytes") as w:
        for i in range(n):
            w.write(_payload(i))
    return root


def _readers(root: Path) -> dict[int, ShardReader]:
    paths = sorted(root.glob("*.stk"))
    return {
        s: ShardReader.open(p.name, os.open(p, os.O_RDONLY), shuffled=True)
        for s, p in enumerate(paths)
    }


def _places(readers: dict[int, ShardReader], seed: int = 1) -> list[tuple[int, int]]:
    every = [(s, i) for s, r in readers.items() for i in range(len(r))]
    order = np.random.default_rng(seed).permutation(len(every))
    return [every[k] for k in order]


def test_a_map_gives_the_bytes_pread_gives(tmp_path: Path) -> None:
    readers = _readers(_write(tmp_path / "ds"))
    places = _places(readers)
    mapped, bad = _read_mapped(readers, places)
    assert not bad and mapped == _read_run(readers, places)[0]
    assert all(isinstance(r._map, mmap.mmap) for r in readers.values())  # the map was used
    assert {_payload(int.from_bytes(d[:4], "little")) == d for d in mapped} == {True}  # type: ignore[index]


def test_a_corrupt_sample_in_a_map_is_noted_where_it_falls(tmp_path: Path) -> None:
    root = _write(tmp_path / "ds")
    shard = sorted(root.glob("*.stk"))[1]
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0x01  # the shard's last sample
    shard.write_bytes(bytes(data))
    readers = _readers(root)
    places = _places(readers)
    got, bad = _read_mapped(readers, places)
    last = (1, len(readers[1]) - 1)
    assert [places[k] for k in bad] == [last] and got[bad[0]] is None
    assert sum(d is None for d in got) == 1


@pytest.mark.parametrize("on_corrupt", ["raise", "skip"])
def test_a_mapped_groups_corrupt_sample_is_raised_or_skipped(
    tmp_path: Path, on_corrupt: str
) -> None:
    root = _write(tmp_path / "ds")
    ds = StreamingDataset(root, shuffle=False, on_corrupt=on_corrupt)
    shard = root / ds.index.shards[0].name
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0x01
    shard.write_bytes(bytes(data))
    ids = np.arange(ds.index.shards[0].samples)
    group = _Group(ds.reader, ds.reader.locate_in_order(ids, len(ids))[0], warm_way="mapped")
    assert group.warm  # (just written: in the page cache, so read through the map)
    if on_corrupt == "raise":
        with pytest.raises(CorruptSample, match=r"shard shard-000000.stk"):
            group.result()
    else:
        assert group.result() == [_payload(int(i)) for i in ids[:-1]]
    assert all(isinstance(r._map, mmap.mmap) for r in group.readers.values())


def test_a_shard_truncated_under_its_map_is_read_by_pread(tmp_path: Path) -> None:
    """Touching a map's page past the end of its file kills the process (SIGBUS); the size is
    asked first, and a short file is read by pread, whose short read is named."""
    root = _write(tmp_path / "ds")
    readers = _readers(root)
    assert readers[0].mapped() is not None
    path = sorted(root.glob("*.stk"))[0]
    os.truncate(path, path.stat().st_size // 2)
    assert readers[0].mapped() is None and readers[1].mapped() is not None
    places = [(0, i) for i in range(len(readers[0]))] + [(1, 0)]
    got, bad = _read_mapped(readers, places)
    assert bad and places[bad[0]][1] > 0 and all(places[k][0] == 0 for k in bad)
    assert got[-1] == _read_run(readers, [(1, 0)])[0][0]  # the whole shard still read


def test_dataloader_workers_read_warm_samples_through_maps(tmp_path: Path) -> None:
    ds = StreamingDataset(_write(tmp_path / "ds"), seed=2)

    def collate(batch: list[bytes]) -> tuple[list[bytes], bool]:
        # (in the worker: whether its open shards were mapped)
        return batch, any(r._map for r in ds.reader.access().open.values())

    loader = torch.utils.data.DataLoader(ds, batch_size=16, num_workers=2, collate_fn=collate)
    got, maps = [], []
    for batch, mapped in loader:
        got += batch
        maps.append(mapped)
    assert sorted(got) == sorted(_payload(i) for i in range(N))
    assert all(maps)
    # The training process's own reads keep pread: none of its shards is mapped.
    assert sorted(one_by_one(ds.reader, np.arange(N))) == sorted(got)
    assert not any(r._map for r in ds.reader.access().open.values())


def test_larger_samples_keep_pread_in_workers_too(tmp_path: Path) -> None:
    """Each page a worker maps is a first touch (a fault): samples of ``MAP_BELOW`` or more
    cost more CPU copied out of a map than read."""
    n = 40
    with ShardWriter(tmp_path / "ds", shard_size="256KiB", codec="bytes") as w:
        for i in range(n):
            w.write(i.to_bytes(4, "little") + bytes([i]) * MAP_BELOW)
    ds = StreamingDataset(tmp_path / "ds", seed=1)

    def collate(batch: list[bytes]) -> tuple[list[bytes], bool]:
        return batch, any(r._map for r in ds.reader.access().open.values())

    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=collate)
    got = [(batch, mapped) for batch, mapped in loader]
    assert sorted(int.from_bytes(s[:4], "little") for b, _ in got for s in b) == list(range(n))
    assert not any(mapped for _, mapped in got)
