"""Shards, the writer, the global order, the loader, resume, corruption and stall metrics, on a
POSIX folder (read in place)."""

from __future__ import annotations

import os
import shutil
import time
import urllib.request
import warnings
from pathlib import Path

import numpy as np
import pytest

from stoker.errors import StreamError, StreamWarning
from stoker.stream import ShardWriter, StreamingDataset, StreamingLoader, serve_metrics
from stoker.stream._format import CorruptSample
from stoker.stream._order import epoch_order, rank_batches, worker_batches

N = 600


def _payload(i: int) -> bytes:
    return bytes([i % 251]) * (100 + (i * 37) % 900)


def _write(root: Path, n: int = N, **options: object) -> Path:
    with ShardWriter(root, shard_size="16KiB", codec="pickle", **options) as w:  # type: ignore[arg-type]
        for i in range(n):
            w.write({"id": i, "data": _payload(i)})
    return root


def _ids(batches: object) -> list[int]:
    return [s["id"] for batch in batches for s in batch]  # type: ignore[attr-defined]


def _loader(ds: StreamingDataset, batch: int = 8, workers: int = 0) -> StreamingLoader:
    return StreamingLoader(ds, batch, num_workers=workers, collate_fn=list)


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_every_sample_comes_back_by_id(tmp_path: Path, compression: str | None) -> None:
    root = _write(tmp_path / "ds", compression=compression)
    ds = StreamingDataset(root)
    assert len(ds) == N and len(ds.index.shards) > 5
    for i in (0, 1, 299, N - 1):
        assert ds[i] == {"id": i, "data": _payload(i)}
    with pytest.raises(IndexError):
        ds[N]


def test_bytes_and_json_codecs(tmp_path: Path) -> None:
    with ShardWriter(tmp_path / "b") as w:
        w.write(b"abc")
        with pytest.raises(StreamError, match="sample 1 is a str, not bytes"):
            w.write("text")
    assert StreamingDataset(tmp_path / "b")[0] == b"abc"
    with ShardWriter(tmp_path / "j", codec="json") as w:
        w.write({"text": "hello", "label": 3})
    assert StreamingDataset(tmp_path / "j")[0] == {"text": "hello", "label": 3}


def test_a_crash_lists_only_whole_shards_and_resume_completes(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with pytest.raises(RuntimeError), ShardWriter(root, shard_size="16KiB", codec="pickle") as w:
        for i in range(N):
            w.write({"id": i, "data": _payload(i)})
            if i == 250:
                raise RuntimeError("the writer died")
    listed = StreamingDataset(root).index
    assert 0 < listed.samples <= 250 and listed.samples == sum(listed.shard_sizes)
    with pytest.raises(StreamError, match="pass resume=True"):
        ShardWriter(root, codec="pickle")
    with ShardWriter(root, shard_size="16KiB", codec="pickle", resume=True) as w:
        for i in range(w.samples_written, N):
            w.write({"id": i, "data": _payload(i)})
    ds = StreamingDataset(root, shuffle=False)
    assert [ds[i]["id"] for i in range(N)] == list(range(N))


def test_order_depends_only_on_seed_and_epoch() -> None:
    sizes = [37, 50, 50, 13, 50, 50, 41, 50, 9]
    a = epoch_order(sizes, seed=3, epoch=0, shuffle=True, block_shards=3)
    assert sorted(a.tolist()) == list(range(sum(sizes)))
    assert np.array_equal(a, epoch_order(sizes, seed=3, epoch=0, shuffle=True, block_shards=3))
    assert not np.array_equal(a, epoch_order(sizes, seed=3, epoch=1, shuffle=True, block_shards=3))
    for world, workers in ((1, 1), (2, 3), (4, 2), (3, 1)):
        ranks = [
            rank_batches(a, start=0, world_size=world, rank=r, batch_size=5, drop_last=True)
            for r in range(world)
        ]
        assert len({len(b) for b in ranks}) == 1  # equal batches per rank
        seen = np.concatenate(
            [worker_batches(b, w, workers).ravel() for b in ranks for w in range(workers)]
        )
        assert len(set(seen.tolist())) == len(seen) == len(a) // (world * 5) * world * 5
        merged = np.stack(ranks, axis=1).ravel()  # rank slices of each global batch, in order
        assert np.array_equal(merged, a[: len(merged)])


def test_padding_gives_every_rank_the_same_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = StreamingDataset(_write(tmp_path / "ds", n=101), drop_last=False, batch_size=4)
    counts, seen = [], []
    for rank in range(3):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "3")
        ids = ds.my_batches().ravel().tolist()
        counts.append(len(ids))
        seen += ids
    assert counts == [36, 36, 36] and set(seen) == set(range(101))  # 7 samples padded


def test_workers_and_loader_deliver_each_sample_once_in_global_order(tmp_path: Path) -> None:
    root = _write(tmp_path / "ds")
    ds = StreamingDataset(root, seed=5)
    got = _ids(_loader(ds, workers=2))
    order = epoch_order(ds.index.shard_sizes, seed=5, epoch=0, shuffle=True, block_shards=8)
    assert got == order[: N // 8 * 8].tolist()
    assert ds.epoch == 1
    assert _ids(_loader(ds)) != got  # epoch 1 is another order


def test_torchs_dataloader_with_persistent_workers_follows_set_epoch(tmp_path: Path) -> None:
    """A StreamingDataset in torch's own DataLoader: persistent workers keep the dataset they
    started with, and read epoch 0 again and again whatever set_epoch said."""
    import torch.utils.data

    ds = StreamingDataset(_write(tmp_path / "ds"), seed=5)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=10, num_workers=2, persistent_workers=True, collate_fn=list
    )
    epochs = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        epochs.append(_ids(loader))
    for epoch, got in enumerate(epochs):
        order = epoch_order(ds.index.shard_sizes, seed=5, epoch=epoch, shuffle=True, block_shards=8)
        assert sorted(got) == sorted(order.tolist())  # each sample once, from this epoch
    assert len({tuple(got) for got in epochs}) == 3  # three orders, not one


def test_resume_on_another_number_of_ranks_and_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _write(tmp_path / "ds")
    monkeypatch.setenv("WORLD_SIZE", "2")
    consumed: list[int] = []
    state = None
    for rank in (0, 1):  # two ranks in lockstep, simulated one after the other
        monkeypatch.setenv("RANK", str(rank))
        loader = _loader(StreamingDataset(root, seed=1), batch=6, workers=2)
        for k, batch in enumerate(loader):
            consumed += [s["id"] for s in batch]
            if k == 9:
                break
        state = loader.state_dict()
    assert state is not None and state["position"] == 10 * 2 * 6
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    resumed = _loader(StreamingDataset(root, seed=99), batch=4, workers=3)
    resumed.load_state_dict(state)
    resumed.dataset.set_epoch(state["epoch"])  # torch's idiom: the epoch under way goes on
    consumed += _ids(resumed)
    assert len(consumed) == len(set(consumed))  # nothing twice
    assert len(consumed) == 120 + (N - 120) // 4 * 4  # nothing skipped but the short tail
    with pytest.raises(
        StreamError, match=r"lacks block_shards, epoch, .*: pass what state_dict\(\)"
    ):
        resumed.load_state_dict({"version": state["version"]})
    other = _loader(StreamingDataset(_write(tmp_path / "other", compression="zstd")))
    with pytest.raises(StreamError, match="the loader state is for another dataset"):
        other.load_state_dict(state)  # as many samples, other shards


def test_corrupt_sample_is_named_or_skipped(tmp_path: Path) -> None:
    root = _write(tmp_path / "ds")
    ds = StreamingDataset(root, shuffle=False)
    shard = root / ds.index.shards[2].name
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0xFF  # inside the shard's last sample
    shard.write_bytes(bytes(data))
    for workers in (0, 2):  # from a worker process too, as its own type
        with pytest.raises(
            CorruptSample, match=r"shard shard-000002.stk: sample \d+ \(byte offset \d+\)"
        ):
            _ids(_loader(StreamingDataset(root, shuffle=False), workers=workers))
    skipping = StreamingDataset(root, shuffle=False, on_corrupt="skip")
    loader = _loader(skipping, batch=5)
    assert len(_ids(loader)) == N - 1
    assert loader.metrics.skipped == 1


@pytest.mark.parametrize(
    "where",
    [12, 19, 23, 30, 24 + 8 * 5 + 3],  # flags, sample count (twice), first offset, an offset
)
def test_a_damaged_shard_header_or_table_is_named(tmp_path: Path, where: int) -> None:
    """One flipped byte in a shard's header or sample table: the reader allocated what the
    count said (MemoryError), or failed in pread or zstd, naming no shard."""
    root = _write(tmp_path / "ds")
    ds = StreamingDataset(root, shuffle=False)
    shard = root / ds.index.shards[2].name
    data = bytearray(shard.read_bytes())
    data[where] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(StreamError, match=r"shard shard-000002.stk: .*damaged"):
        for i in range(ds.index.first(2), ds.index.first(3)):
            StreamingDataset(root, shuffle=False, on_corrupt="skip")[i]


def test_stall_metrics_and_prometheus(tmp_path: Path) -> None:
    loader = _loader(StreamingDataset(_write(tmp_path / "ds")), batch=50)
    for _ in loader:
        time.sleep(0.02)  # the emulated accelerator
    m = loader.metrics
    assert m.batches == N // 50 and m.first_batch_s is not None
    assert 0.18 <= m.compute_s <= 1.0 and m.utilization is not None and m.utilization > 0.5
    assert m.tier == "posix" and m.samples == N and m.bytes_read > 0
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = serve_metrics(loader, port, job="test", addr="127.0.0.1")
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    finally:
        server.shutdown()
    au = "stoker_loader_accelerator_utilization_ratio{"
    line = next(x for x in text.splitlines() if x.startswith(au))
    assert 'rank="0"' in line and 'training_job="test"' in line and 'tier="posix"' in line
    assert abs(float(line.rsplit(" ", 1)[1]) - m.utilization) < 1e-6


def _two_free_ports() -> int:
    """A port that is free, and the next one too (checking only the first failed now and
    then: the next was some other process's)."""
    import socket

    for _ in range(100):
        with socket.socket() as first, socket.socket() as second:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise RuntimeError("found no two free ports side by side")


def test_every_rank_of_a_node_serves_its_metrics_on_its_own_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each rank of a torchrun job calls serve_metrics(loader, 9400): all but the first died
    with "port in use"."""
    port = _two_free_ports()
    loader = _loader(StreamingDataset(_write(tmp_path / "ds")))
    servers = []
    try:
        monkeypatch.setenv("WORLD_SIZE", "2")
        for rank in (0, 1):  # two ranks of one node, as torchrun sets them
            monkeypatch.setenv("RANK", str(rank))
            monkeypatch.setenv("LOCAL_RANK", str(rank))
            servers.append(serve_metrics(loader, port, addr="127.0.0.1"))
        assert [s.server_port for s in servers] == [port, port + 1]  # port + LOCAL_RANK
        text = urllib.request.urlopen(f"http://127.0.0.1:{port + 1}/metrics").read().decode()
        batches = next(x for x in text.splitlines() if x.startswith("stoker_loader_batches_total{"))
        assert 'rank="1"' in batches and 'gpu="1"' in batches  # the rank's GPU: its local rank
    finally:
        for server in servers:
            server.shutdown()


def test_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(StreamError, match="has no index.json; nothing is there: write"):
        len(StreamingDataset(tmp_path))  # read on first use, not when made
    # Pointed at raw files, or at the folder above the datasets: it says which.
    (tmp_path / "elsewhere" / "raw").mkdir(parents=True)
    (tmp_path / "elsewhere" / "raw" / "a.jpg").write_bytes(b"jpg")
    with pytest.raises(StreamError, match=r"holds other files \('a.jpg', ...\): write"):
        len(StreamingDataset(tmp_path / "elsewhere" / "raw"))
    with ShardWriter(tmp_path / "elsewhere" / "train") as writer:
        writer.write(b"x")
    with pytest.raises(StreamError, match="datasets below it: train: point at one of those"):
        len(StreamingDataset(tmp_path / "elsewhere"))
    shutil.rmtree(tmp_path / "elsewhere")
    (tmp_path / "index.json").write_text('{"format": "other"}')
    with pytest.raises(StreamError, match="is not 'stoker.shards/1'"):
        len(StreamingDataset(tmp_path))
    with pytest.raises(StreamError, match="on_corrupt"):
        StreamingDataset(tmp_path, on_corrupt="ignore")
    for bad in ({"batch_size": 0}, {"block_shards": 0}, {"dtype": "int32"}):
        with pytest.raises(StreamError, match=f"{next(iter(bad))}="):
            StreamingDataset(tmp_path, **bad)  # type: ignore[arg-type]
    with pytest.raises(StreamError, match="shard_size"):
        ShardWriter(tmp_path / "x", shard_size=0)
    assert os.listdir(tmp_path) == ["index.json"]
    ds = StreamingDataset(_write(tmp_path / "ds"))
    for option in ({"shuffle": False}, {"drop_last": False}):
        with pytest.raises(StreamError, match="pass .* to StreamingDataset"):
            StreamingLoader(ds, 4, **option)
    with pytest.raises(StreamError, match="batch_size=0"):
        StreamingLoader(ds, 0)
    for option in ("sampler", "batch_sampler", "generator"):  # StreamingDataset has none
        with pytest.raises(StreamError, match=r"shuffle=, seed=, drop_last="):
            StreamingLoader(ds, 4, **{option: None})


@pytest.mark.parametrize(
    "env", [{"RANK": "2", "WORLD_SIZE": "2"}, {"RANK": "1"}, {"WORLD_SIZE": "0"}, {"RANK": "x"}]
)
def test_a_rank_or_world_size_set_wrong_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    """They failed in numpy (IndexError), in a division (ZeroDivisionError) or in int()."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    loader = _loader(StreamingDataset(_write(tmp_path / "ds")))
    with pytest.raises(StreamError, match=r"(RANK|WORLD_SIZE)[= ].*: .*launch with torchrun"):
        _ids(loader)


def test_shuffle_mixes_shards_within_each_batch(tmp_path: Path) -> None:
    ds = StreamingDataset(_write(tmp_path / "ds"), block_shards=8, batch_size=16)
    shard_of = [ds.index.locate(int(i))[0] for i in range(N)]
    distinct = [len({shard_of[int(i)] for i in batch}) for batch in ds.my_batches()]
    # 16 samples drawn from a block of 8 shards: about 7 distinct shards per batch on average
    assert sum(distinct) / len(distinct) >= 6


KILLED_FETCH = """
import sys, time
from pathlib import Path
from stoker.stream._cache import ShardCache
def fetch(partial):
    partial.write_bytes(b"half")
    print("fetching", flush=True)
    time.sleep(60)
import xxhash
data = b"0123456789"  # what the next process fetches: the same shard, so the same lock
xxh3 = xxhash.xxh3_128_hexdigest(data)
ShardCache(Path(sys.argv[1]), None).get("shard-000000.stk", 10, xxh3, fetch)
"""


def test_a_killed_downloader_blocks_nothing(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    from stoker.stream._cache import ShardCache

    cache = tmp_path / "cache"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_FETCH, str(cache)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "fetching\n"
    os.kill(proc.pid, signal.SIGKILL)  # dies holding the shard's lock, with a partial file
    proc.wait()
    assert list(cache.glob("*.partial"))
    import xxhash

    data = b"0123456789"
    got, hit = ShardCache(cache, None).get(
        "shard-000000.stk", 10, xxhash.xxh3_128_hexdigest(data), lambda p: p.write_bytes(data)
    )
    assert not hit and os.pread(got, 20, 0) == data  # an open file, whole
    os.close(got)
    assert not list(cache.glob("*.partial"))  # the dead process's partial file was removed


def test_two_downloads_at_once_keep_the_cache_within_its_limit(tmp_path: Path) -> None:
    """Two shards fetched at the same moment: the second must count the first, which has made
    room but written nothing yet, and evict for it."""
    import threading

    import xxhash

    from stoker.stream._cache import ShardCache

    size = 1000
    cache = ShardCache(tmp_path / "cache", 2 * size)
    old = os.urandom(size)
    cache.get("old.stk", size, xxhash.xxh3_128_hexdigest(old), lambda p: p.write_bytes(old))
    both_started = threading.Barrier(2, timeout=10)
    data = {name: os.urandom(size) for name in ("a.stk", "b.stk")}

    def get(name: str) -> None:
        def fetch(partial: Path) -> None:
            both_started.wait()  # each has made room before either writes a byte
            partial.write_bytes(data[name])

        cache.get(name, size, xxhash.xxh3_128_hexdigest(data[name]), fetch)

    threads = [threading.Thread(target=get, args=(name,)) for name in data]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kept = {p.read_bytes() for p in (tmp_path / "cache").iterdir() if p.is_file()}
    assert kept == set(data.values())  # the old shard went to make room; both new ones whole


def test_a_missing_local_shard_is_named(tmp_path: Path) -> None:
    root = _write(tmp_path / "ds")
    ds = StreamingDataset(root, shuffle=False)
    (root / ds.index.shards[0].name).unlink()
    with pytest.raises(StreamError, match=r"shard shard-000000.stk, listed in .* is missing"):
        ds[0]


def test_an_epoch_with_no_batch_says_why(tmp_path: Path) -> None:
    with ShardWriter(tmp_path / "empty"):
        pass
    with pytest.warns(StreamWarning, match="holds no samples"):
        assert list(StreamingLoader(StreamingDataset(tmp_path / "empty"), 4)) == []
    with ShardWriter(tmp_path / "few") as w:
        for i in range(3):
            w.write(bytes([i]))
    with pytest.warns(
        StreamWarning, match=r"3 samples are fewer than one global batch \(1 x batch_size 4\)"
    ):
        assert list(StreamingLoader(StreamingDataset(tmp_path / "few"), 4)) == []
    with pytest.warns(StreamWarning, match="fewer than") as seen:  # workers: in this process
        assert list(StreamingLoader(StreamingDataset(tmp_path / "few"), 4, num_workers=2)) == []
    assert seen[0].filename == __file__  # attributed to the loop's line, not torch's
    padded = StreamingDataset(tmp_path / "few", drop_last=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(StreamingLoader(padded, 4))) == 1


def test_making_a_dataset_and_its_loader_opens_no_connection() -> None:
    """The store is opened on first use: a job can make its datasets before the network or
    its credentials are ready (it read index.json in the constructor)."""
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        url = f"http://127.0.0.1:{server.getsockname()[1]}/devstoreaccount1/data/ds"
        ds = StreamingDataset(url, "/nonexistent/cache", dp_rank=0, dp_size=2)
        loader = StreamingLoader(ds, 4, num_workers=2)
        assert (ds.tier, ds.in_place, loader.position) == ("http", False, 0)
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody called


def test_the_loader_holds_the_position_and_another_epoch_starts_from_its_start(
    tmp_path: Path,
) -> None:
    ds = StreamingDataset(_write(tmp_path / "ds"), seed=2)
    loader = _loader(ds, batch=10)
    for k, _ in enumerate(loader):
        if k == 4:
            break
    assert (loader.position, len(loader), ds.epoch) == (50, N // 10 - 5, 0)
    assert ds.batch_size == 1  # the loader's batch size is its own, not set on the dataset
    ds.set_epoch(0)  # the epoch under way: it goes on
    assert loader.position == 50
    ds.set_epoch(3)  # another: from its start
    assert (loader.position, len(loader), loader.state_dict()["epoch"]) == (0, N // 10, 3)
