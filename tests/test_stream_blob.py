"""Streaming from Blob (a real Azurite): the node cache, its limit, one download per shard for
many processes, a missing shard, the emulator going away mid-epoch, and workers that must not
outlive a killed training process."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from short_writes import ShortWrites
from stoker.errors import NoContainerError, StreamError, StreamWarning
from stoker.store import _download, _posix, open_store
from stoker.stream import ShardWriter, StreamingDataset, StreamingLoader

N = 400


def _write(url: str, first: int = 0) -> None:
    with ShardWriter(url, shard_size="64KiB", codec="pickle") as w:
        for i in range(first, first + N):
            w.write({"id": i, "data": bytes([i % 256]) * 2000})


def _ids(loader: StreamingLoader) -> list[int]:
    return [s["id"] for batch in loader for s in batch]


def test_a_missing_container_is_named(blob_env: str, tmp_path: Path) -> None:
    """Not "has no index.json": the container itself is missing, and the error says so."""
    with pytest.raises(NoContainerError, match="there is no container 'no-such-container'"):
        len(StreamingDataset("az://no-such-container/ds", tmp_path / "cache"))  # on first use


def test_remote_shards_go_through_the_cache_within_its_limit(blob_env: str, tmp_path: Path) -> None:
    url, cache = f"{blob_env}/ds1", tmp_path / "cache"
    _write(url)
    shard_bytes = max(s.bytes for s in StreamingDataset(url, cache).index.shards)
    ds = StreamingDataset(url, cache, cache_limit=3 * shard_bytes + 100, block_shards=2)
    loader = StreamingLoader(ds, 10, collate_fn=list)
    ids = _ids(loader)
    assert sorted(ids) == list(range(N))
    m = loader.metrics
    assert m.tier == "az" and m.cache_misses >= len(ds.index.shards)
    assert m.bytes_fetched >= ds.index.bytes
    kept = [p for p in cache.iterdir() if p.is_file()]
    assert sum(p.stat().st_size for p in kept) <= 3 * shard_bytes + 100
    _ids(StreamingLoader(StreamingDataset(url, cache), 10, collate_fn=list))  # no limit now
    warm = StreamingLoader(StreamingDataset(url, cache), 10, collate_fn=list)
    _ids(warm)  # a new job on this node: every shard is in the cache
    assert (warm.metrics.cache_hits, warm.metrics.cache_misses) == (len(ds.index.shards), 0)


def test_short_writes_into_the_cache_are_written_out(
    blob_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard's ranges were written with one pwrite each: on a filling disk a short write left
    a hole, and the whole copy failed its hash as if the source were damaged."""
    url = f"{blob_env}/short"
    _write(url)
    for module in (_download, _posix):
        monkeypatch.setattr(module, "os", ShortWrites())
    assert sorted(
        _ids(StreamingLoader(StreamingDataset(url, tmp_path / "c"), 10, collate_fn=list))
    ) == list(range(N))


def test_downloads_ahead_stay_within_what_the_cache_limit_holds(
    blob_env: str, tmp_path: Path
) -> None:
    """Every process of a node reads the same block at about the same time: downloads ahead
    that evict a shard another process has yet to open make it fetch that shard again (with 2
    workers and room for 12 of 16 shards, a third were fetched twice)."""
    url = f"{blob_env}/ahead"
    with ShardWriter(url, shard_size=64 << 10) as writer:
        for i in range(16 * 4):
            writer.write(bytes([i]) * (16 << 10))
    shard = max(s.bytes for s in StreamingDataset(url, tmp_path / "a").index.shards)
    roomy = StreamingDataset(url, tmp_path / "b", block_shards=4, cache_limit=100 * shard)
    assert roomy.prefetch_shards == 4  # a block ahead, as without a limit
    tight = StreamingDataset(url, tmp_path / "c", block_shards=4, cache_limit=7 * shard)
    assert tight.prefetch_shards == 3  # the block being read and 3 ahead fill the 7
    small = StreamingDataset(url, tmp_path / "d", block_shards=4, cache_limit=4 * shard)
    with pytest.warns(StreamWarning, match=r"holds 4 of its shards.*more than once"):
        assert small.prefetch_shards == 1  # (worked out, and warned of, on first use)
    loader = StreamingLoader(small, batch_size=8)
    assert sorted(int(b[0]) for batch in loader for b in batch) == sorted(range(64))


def test_datasets_sharing_a_cache_folder_read_their_own_shards(
    blob_env: str, tmp_path: Path
) -> None:
    """Shards of one name and size from two datasets, and from one dataset rewritten at its
    URL, are different shards: each reader gets its own samples."""
    cache = tmp_path / "cache"
    _write(f"{blob_env}/mine")
    _write(f"{blob_env}/theirs", first=5000)  # the same shapes, other samples
    for url, first in ((f"{blob_env}/mine", 0), (f"{blob_env}/theirs", 5000)):
        ds = StreamingDataset(url, cache, shuffle=False)
        assert ds[3]["id"] == first + 3
        assert sorted(_ids(StreamingLoader(ds, 10, collate_fn=list))) == list(
            range(first, first + N)
        )
    asyncio.run(open_store(f"{blob_env}/mine").delete("index.json"))
    _write(f"{blob_env}/mine", first=7000)  # written again in place, sizes unchanged
    assert StreamingDataset(f"{blob_env}/mine", cache, shuffle=False)[3]["id"] == 7003


@pytest.mark.parametrize("dtype", [None, torch.uint8])  # decoded, and straight into tensors
def test_a_damaged_cached_copy_is_fetched_again(
    blob_env: str, tmp_path: Path, dtype: torch.dtype | None
) -> None:
    url, cache = f"{blob_env}/healed", tmp_path / "cache"
    with ShardWriter(url, shard_size="64KiB") as w:
        for i in range(N):
            w.write(bytes([i % 256]) * 2000)
    first = StreamingDataset(url, cache, shuffle=False, dtype=dtype)
    assert len(list(StreamingLoader(first, 10))) == N // 10  # every shard is cached now
    copy = next(cache.glob(f"{first.index.shards[1].name}.*"))
    data = bytearray(copy.read_bytes())
    data[-5] ^= 0xFF  # inside the shard's last sample, as a failing disk would
    copy.write_bytes(bytes(data))
    again = StreamingLoader(StreamingDataset(url, cache, shuffle=False, dtype=dtype), 10)
    got = [bytes(sample) for batch in again for sample in batch]
    assert got == [bytes([i % 256]) * 2000 for i in range(N)]
    assert (again.metrics.cache_misses, again.metrics.skipped) == (1, 0)  # that shard, once


def test_a_shard_evicted_by_another_job_as_it_lands_is_still_read(
    blob_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jobs sharing a cache smaller than the dataset evict each other's shards, even one just
    downloaded (their downloads in flight count against the limit). Three such jobs crashed
    with FileNotFoundError when a shard went between its download and its open, twice."""
    url, cache = f"{blob_env}/evicted", tmp_path / "cache"
    _write(url)
    replace = os.replace

    def replace_then_evicted(src: object, dst: object) -> None:
        replace(src, dst)  # type: ignore[arg-type]
        if str(dst).startswith(str(cache)):
            os.unlink(dst)  # type: ignore[arg-type]  # the other job's make_room, at that moment

    monkeypatch.setattr(os, "replace", replace_then_evicted)
    loader = StreamingLoader(StreamingDataset(url, cache, shuffle=False), 10, collate_fn=list)
    assert _ids(loader) == list(range(N))
    assert loader.metrics.cache_misses == len(loader.dataset.index.shards)  # none fetched twice


def test_torchs_dataloader_says_how_to_start_workers_for_a_remote_dataset(
    blob_env: str, tmp_path: Path
) -> None:
    """torch's DataLoader forks its workers, and the object store client hangs in a fork of a
    process that has used it: the workers hung without a word."""
    url = f"{blob_env}/forked"
    _write(url)
    ds = StreamingDataset(url, tmp_path / "cache")
    forked = torch.utils.data.DataLoader(ds, batch_size=10, num_workers=1, timeout=60)
    with pytest.raises(StreamError, match=r"multiprocessing_context=ds\.mp_context"):
        next(iter(forked))
    served = torch.utils.data.DataLoader(
        ds, batch_size=10, num_workers=2, multiprocessing_context=ds.mp_context, collate_fn=list
    )
    assert sorted(_ids(served)) == list(range(N))  # as the error says, and it works


READER = """
import json, sys
from stoker.stream import StreamingDataset, StreamingLoader
ds = StreamingDataset(sys.argv[1], sys.argv[2], seed=int(sys.argv[3]))
loader = StreamingLoader(ds, 8, num_workers=2, collate_fn=list)
ids = [s["id"] for b in loader for s in b]
print(json.dumps({"ids": len(ids), "misses": loader.metrics.cache_misses}))
"""


def test_processes_on_one_node_download_each_shard_once(blob_env: str, tmp_path: Path) -> None:
    url, cache = f"{blob_env}/ds2", tmp_path / "cache"
    _write(url)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", READER, url, str(cache), str(seed)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for seed in range(3)
    ]
    try:
        results = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    finally:
        for p in procs:  # a hung reader must not outlive the test
            p.kill()
    shards = len(StreamingDataset(url, cache).index.shards)
    assert all(r["ids"] == N // 8 * 8 for r in results)
    assert sum(r["misses"] for r in results) == shards  # one download per shard, node-wide
    assert not list(cache.glob("*.partial"))


ORPHAN = """
import json, multiprocessing, sys, time
from multiprocessing import forkserver
from stoker.stream import StreamingDataset, StreamingLoader
ds = StreamingDataset(sys.argv[1], sys.argv[2])
it = iter(StreamingLoader(ds, 32, num_workers=2, collate_fn=list))  # batches fill the queue
next(it)
pids = [p.pid for p in multiprocessing.active_children()]
pids += [forkserver._forkserver._forkserver_pid] if ds.tier == "az" else []
print(json.dumps(pids), flush=True)
time.sleep(300)
"""


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie nobody has reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("where", ["blob", "folder"])
def test_a_killed_training_process_takes_its_workers_with_it(
    blob_env: str, tmp_path: Path, where: str
) -> None:
    """After a kill -9 of the training process (the OOM killer, a preempted node) its workers
    lived on, forever, holding memory and the cache's files, one set per restart. torch's
    check watches a worker's parent: for a remote dataset that is the fork server, which the
    workers keep alive; a forked worker (a folder) whose queue was full waited at exit for
    the dead process to read it."""
    url = f"{blob_env}/orphans" if where == "blob" else str(tmp_path / "orphans")
    _write(url)
    proc = subprocess.Popen(
        [sys.executable, "-c", ORPHAN, url, str(tmp_path / "cache")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        pids = json.loads(proc.stdout.readline())
        assert len(pids) == 2 + (where == "blob") and not any(map(_gone, pids))  # (fork server)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 20
    while not all(map(_gone, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in pids if not _gone(pid)]
    for pid in left:  # (the test must not leave them behind either)
        os.kill(pid, 9)
    assert not left, f"{left} outlived the training process"


def test_a_missing_shard_fails_clearly(blob_env: str, tmp_path: Path) -> None:
    url = f"{blob_env}/ds3"
    _write(url)

    async def remove() -> None:
        store = open_store(url)
        await store.delete("shard-000001.stk")
        await store.close()

    asyncio.run(remove())
    ds = StreamingDataset(url, tmp_path / "cache", shuffle=False)
    with pytest.raises(StreamError, match=r"shard shard-000001.stk from .*tried 3 times"):
        _ids(StreamingLoader(ds, 10, collate_fn=list))


def test_emulator_restart_mid_epoch_keeps_the_cache_sound(
    azurite_factory: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = azurite_factory()  # type: ignore[operator]
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", server.connection_string)
    url = f"az://{server.container().container_name}/ds"
    _write(url)
    server.restart()  # a clean stop saves Azurite's metadata: the kill below cannot lose data
    cache = tmp_path / "cache"
    loader = StreamingLoader(
        StreamingDataset(url, cache, prefetch_shards=1, block_shards=1), 10, collate_fn=list
    )
    got: list[int] = []
    for k, batch in enumerate(loader):
        got += [s["id"] for s in batch]
        if k == 3:
            server.stop(kill=True)
            threading.Timer(2.0, server.start).start()
            time.sleep(0.5)
    assert sorted(got) == list(range(N))
    again = StreamingLoader(StreamingDataset(url, cache), 10, collate_fn=list)
    assert sorted(_ids(again)) == list(range(N))  # every cached shard still verifies


def test_shards_written_into_a_missing_container_create_it(blob_env: str, tmp_path: Path) -> None:
    """As stage does; the write failed with an error that blamed the credentials."""
    import random

    url = f"az://made-by-writer-{random.randrange(10**9)}/ds"
    with ShardWriter(url, shard_size="4KiB") as w:
        for i in range(10):
            w.write(bytes([i]) * 1000)
    ds = StreamingDataset(url, tmp_path / "cache", shuffle=False)
    assert [ds[i][0] for i in range(10)] == list(range(10))


def test_a_worker_whose_environment_lacks_the_account_reads_the_dataset(
    blob_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork server's workers get the environment of when the server started, not the one
    the dataset was made in (a notebook sets os.environ after its first DataLoader): they
    could not name the account of an az://CONTAINER/PATH dataset. The dataset carries it."""
    url = f"{blob_env}/elsewhere"
    _write(url)
    ds = StreamingDataset(url, tmp_path / "cache")
    len(ds)  # the index, read here
    for key in [k for k in os.environ if k.startswith("AZURE_")]:
        monkeypatch.delenv(key)  # the workers below start without them
    loader = torch.utils.data.DataLoader(
        ds, batch_size=10, num_workers=1, multiprocessing_context="spawn", collate_fn=list
    )
    assert sorted(_ids(loader)) == list(range(N))
