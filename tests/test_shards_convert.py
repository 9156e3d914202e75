"""Parallel conversion (``write_shards(workers=)``, ``stoker shards write --workers``): the same
dataset from any number of processes and ranks, to a folder or Blob (Azurite); one index at the
end; resume after a killed writer; JSON lines and Parquet streamed, never loaded whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from stoker.errors import StreamError
from stoker.stream import StreamingDataset, write_shards
from stoker.stream._convert import RECORDS

CLI = [str(Path(sys.executable).parent / "stoker")]


def _files(src: Path, n: int, size: int = 700) -> list[bytes]:
    src.mkdir(parents=True, exist_ok=True)
    data = [bytes([i % 251]) * (size + i % 97) for i in range(n)]
    for i, blob in enumerate(data):
        (src / f"{i // 100:02d}" / f"{i:05d}.bin").parent.mkdir(exist_ok=True)
        (src / f"{i // 100:02d}" / f"{i:05d}.bin").write_bytes(blob)
    return data


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_two_processes_write_the_dataset_one_writes(tmp_path: Path) -> None:
    data = _files(tmp_path / "src", 300)
    one = write_shards(tmp_path / "src", tmp_path / "one", shard_size="8KiB")
    two = write_shards(tmp_path / "src", tmp_path / "two", shard_size="8KiB", workers=2)
    assert len(one.shards) > 10 and one.to_json() == two.to_json()
    assert _tree(tmp_path / "one") == _tree(tmp_path / "two")  # no record left behind either
    assert not (tmp_path / "two" / RECORDS).exists()
    ds = StreamingDataset(tmp_path / "two")
    assert [ds[i] for i in range(300)] == data  # sorted path order, as one process reads it


def test_files_come_in_path_order_folder_by_folder_without_hidden_ones(tmp_path: Path) -> None:
    """Sample i is the i-th file in ``Path`` order (a folder's files before "a-b/", which a
    string sort would put first), hidden files and folders left out, linked files followed."""
    src = tmp_path / "src"
    names = ["a/x", "a/y/z", "a-b/x", "a.c", "b", ".hidden/h", "a/.h", "c/.stoker/m"]
    for name in names:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(name.encode())
    (src / "d").symlink_to(src / "b")
    index = write_shards(src, tmp_path / "out", shard_size="1KiB", keys=True)
    expect = sorted(
        p for p in src.rglob("*") if p.is_file() and not any(n[0] == "." for n in p.parts[-3:])
    )
    ds = StreamingDataset(tmp_path / "out", shuffle=False)
    got = [ds[i]["key"] for i in range(index.samples)]
    assert got == [p.relative_to(src).as_posix() for p in expect]
    assert got == ["a/x", "a/y/z", "a-b/x", "a.c", "b", "d"]


def test_jsonl_and_parquet_cut_inside_a_file_keep_every_row_in_order(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"i": i, "text": "x" * (i % 40)} for i in range(500)]
    lines = [json.dumps(r) + ("\n\n" if r["i"] % 50 == 0 else "\n") for r in rows]  # blank lines
    (tmp_path / "a.jsonl").write_text("".join(lines))
    index = write_shards(
        tmp_path / "a.jsonl", tmp_path / "j", kind="jsonl", shard_size=1000, workers=2
    )
    assert len(index.shards) > 10  # byte ranges of one file, converted apart
    ds = StreamingDataset(tmp_path / "j")
    assert [ds[i] for i in range(len(ds))] == rows
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet", row_group_size=37)
    index = write_shards(
        tmp_path / "t.parquet", tmp_path / "p", kind="parquet", shard_size=1000, workers=2
    )
    assert len(index.shards) > 5
    ds = StreamingDataset(tmp_path / "p")
    assert [ds[i] for i in range(len(ds))] == rows


def test_a_bad_line_deep_in_a_file_is_named_by_its_line(tmp_path: Path) -> None:
    text = "".join(json.dumps({"i": i}) + "\n" for i in range(300)) + "oops\n"
    (tmp_path / "b.jsonl").write_text(text)
    with pytest.raises(StreamError, match=r"b.jsonl:301: not JSON"):
        write_shards(tmp_path / "b.jsonl", tmp_path / "o", kind="jsonl", shard_size=500)
    assert not (tmp_path / "o" / "index.json").exists()


def test_npy_rows_are_cut_where_one_writer_cuts_them(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.arange(4000, dtype=np.int32).reshape(1000, 4))
    index = write_shards(tmp_path / "x.npy", tmp_path / "n", kind="npy", shard_size=1000, workers=2)
    assert [s.samples for s in index.shards] == [63] * 15 + [55]  # ceil(1000 / 16) rows each
    assert np.array_equal(StreamingDataset(tmp_path / "n")[999], [3996, 3997, 3998, 3999])


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (the fork server and its workers)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.append(int(stat.parent.name))
                todo.append(int(stat.parent.name))
    return found


def test_a_killed_worker_then_resume_gives_the_same_dataset(tmp_path: Path) -> None:
    _files(tmp_path / "src", 600, size=300)
    args = [str(tmp_path / "src"), "--shard-size", "1KiB", "--workers", "2"]
    clean = subprocess.run([*CLI, "shards", "write", *args[:1], str(tmp_path / "clean"), *args[1:]])
    assert clean.returncode == 0
    out = tmp_path / "out"
    run = subprocess.Popen(
        [*CLI, "shards", "write", args[0], str(out), *args[1:]], stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while len(list(out.glob(f"{RECORDS}/*/part-*.json"))) < 20:  # well under way
        assert run.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    workers = [p for p in _children(run.pid) if p != run.pid]
    writer = max(workers)  # the fork server starts first: the highest pid is a worker
    os.kill(writer, signal.SIGKILL)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 2 and "a conversion process died" in err and "--resume" in err
    assert not (out / "index.json").exists()  # no dataset in the making is ever published
    again = subprocess.run(
        [*CLI, "shards", "write", args[0], str(out), *args[1:], "--resume", "--json"],
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["samples"] == 600
    assert _tree(out) == _tree(tmp_path / "clean")


def test_ranks_convert_their_shares_and_rank_0_publishes_one_index(tmp_path: Path) -> None:
    _files(tmp_path / "src", 200)
    alone = write_shards(tmp_path / "src", tmp_path / "alone", shard_size="4KiB")
    env = os.environ | {"WORLD_SIZE": "2"}
    cmd = [*CLI, "shards", "write", str(tmp_path / "src"), str(tmp_path / "ranks")]
    cmd += ["--shard-size", "4KiB", "--json"]
    ranks = [
        subprocess.Popen(cmd, env=env | {"RANK": str(r)}, stdout=subprocess.PIPE) for r in (1, 0)
    ]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in ranks]
    assert all(p.returncode == 0 for p in ranks)
    assert outs[0]["samples"] == outs[1]["samples"] == 200
    assert _tree(tmp_path / "ranks") == _tree(tmp_path / "alone")
    assert StreamingDataset(tmp_path / "ranks").index.to_json() == alone.to_json()


def test_a_rank_whose_peers_never_come_names_the_missing_parts(tmp_path: Path) -> None:
    _files(tmp_path / "src", 50)
    with pytest.raises(StreamError, match=r"parts 1, 3, .* are missing .* resume=True"):
        write_shards(
            tmp_path / "src", tmp_path / "o", shard_size="4KiB", rank=0, world_size=2, wait_s=0.5
        )
    assert not (tmp_path / "o" / "index.json").exists()
    with pytest.raises(StreamError, match="rank 2 of world_size 2"):
        write_shards(tmp_path / "src", tmp_path / "o", rank=2, world_size=2)
    with pytest.raises(StreamError, match="workers=0"):
        write_shards(tmp_path / "src", tmp_path / "o", workers=0)


def test_two_processes_write_straight_to_blob(blob_env: str, tmp_path: Path) -> None:
    from stoker.store import open_store
    from stoker.store._loop import IOLoop

    data = _files(tmp_path / "src", 120)
    url = f"{blob_env}/converted"
    index = write_shards(tmp_path / "src", url, shard_size="8KiB", workers=2)
    ds = StreamingDataset(url, tmp_path / "cache")
    assert ds.index.to_json() == index.to_json() and [ds[i] for i in range(120)] == data
    io = IOLoop("test")
    try:
        store = open_store(url)

        async def keys() -> list[str]:
            return [o.key for batch in [b async for b in store.list()] for o in batch]

        names = io.run(keys())
        io.run(store.close())
    finally:
        io.close()
    assert sorted(names) == sorted(["index.json", *(s.name for s in index.shards)])


PEAK = """
import resource, sys
from stoker.stream import write_shards
import pyarrow.parquet
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
write_shards(sys.argv[1], sys.argv[2], kind=sys.argv[3], shard_size="1MiB")
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_jsonl_and_parquet_are_streamed_not_loaded_whole(tmp_path: Path, kind: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 40_000
    text = [f"{i:08d}" + "y" * 1000 for i in range(rows)]  # ~40 MB of input
    src = tmp_path / f"big.{kind}"
    if kind == "jsonl":
        src.write_text("".join(json.dumps({"t": t}) + "\n" for t in text))
    else:
        pq.write_table(pa.table({"t": text}), src, row_group_size=2000, compression="none")
    out = subprocess.run(
        [sys.executable, "-c", PEAK, str(src), str(tmp_path / "o"), kind],
        capture_output=True,
        text=True,
        check=True,
    )
    grown = int(out.stdout)
    assert StreamingDataset(tmp_path / "o").index.samples == rows
    assert grown < src.stat().st_size / 2, f"peak memory grew {grown:,} B for {kind}"


def test_workers_are_forked_unless_the_object_store_client_is_loaded() -> None:
    """A fork starts a worker at once; after obstore (whose runtime hangs in a forked child),
    a fork server."""
    code = (
        "import sys\n"
        "from stoker.stream._convert import _process_context\n"
        "before = _process_context().get_start_method()\n"
        "import obstore\n"
        "print(before, _process_context().get_start_method())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["fork", "forkserver"]
