"""``stoker shards write`` from each kind of input, and its resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from stoker.cli import app
from stoker.stream import StreamingDataset

runner = CliRunner()


def _write(*args: str) -> dict:
    out = runner.invoke(app, ["shards", "write", *args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_files_keep_sorted_order_and_optional_keys(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for i in range(30):
        path = src / f"class-{i % 3}" / f"{i:03d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([i]) * (500 + i))
    summary = _write(str(src), str(tmp_path / "raw"), "--shard-size", "4KiB")
    assert summary["samples"] == 30 and summary["shards"] > 2 and summary["codec"] == "bytes"
    ordered = sorted(p for p in src.rglob("*.jpg"))
    raw = StreamingDataset(tmp_path / "raw")
    assert [raw[i] for i in range(30)] == [p.read_bytes() for p in ordered]
    _write(str(src), str(tmp_path / "keyed"), "--keys", "--compression", "zstd")
    keyed = StreamingDataset(tmp_path / "keyed")
    assert keyed[0] == {"key": "class-0/000.jpg", "data": ordered[0].read_bytes()}


def test_jsonl_npy_and_parquet(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"t": "x", "y": 1}\n\n{"t": "z", "y": 2}\n')
    _write(str(tmp_path / "a.jsonl"), str(tmp_path / "j"), "--from", "jsonl")
    assert StreamingDataset(tmp_path / "j")[1] == {"t": "z", "y": 2}
    np.save(tmp_path / "x.npy", np.arange(24, dtype=np.float32).reshape(6, 4))
    _write(str(tmp_path / "x.npy"), str(tmp_path / "n"), "--from", "npy")
    assert np.array_equal(StreamingDataset(tmp_path / "n")[5], np.arange(20, 24, dtype=np.float32))
    assert StreamingDataset(tmp_path / "n").index.codec == "array"  # raw rows, not pickles
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["a", "b", "c"], "label": [0, 1, 0]}), tmp_path / "t.parquet")
    assert (
        _write(str(tmp_path / "t.parquet"), str(tmp_path / "p"), "--from", "parquet")["samples"]
        == 3
    )
    assert StreamingDataset(tmp_path / "p")[2] == {"text": "c", "label": 0}


def test_bad_input_is_named_and_resume_continues(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"ok": 1}\nnot json\n')
    bad = runner.invoke(
        app,
        ["shards", "write", str(tmp_path / "bad.jsonl"), str(tmp_path / "o"), "--from", "jsonl"],
    )
    assert bad.exit_code == 2 and "bad.jsonl:2: not JSON" in bad.stderr
    src = tmp_path / "src"
    src.mkdir()
    for i in range(10):
        (src / f"{i:02d}.bin").write_bytes(bytes([i]) * 3000)
    _write(str(src), str(tmp_path / "r"), "--shard-size", "4KiB")
    again = runner.invoke(app, ["shards", "write", str(src), str(tmp_path / "r")])
    assert again.exit_code == 2 and "pass resume=True" in again.stderr
    for i in range(10, 14):
        (src / f"{i:02d}.bin").write_bytes(bytes([i]) * 3000)
    assert (
        _write(str(src), str(tmp_path / "r"), "--shard-size", "4KiB", "--resume")["samples"] == 14
    )


def test_unreadable_inputs_are_named_and_leave_nothing_to_resume(tmp_path: Path) -> None:
    for name, kind, data in (
        ("latin.jsonl", "jsonl", b'{"a": "\xe9"}\n'),
        ("text.npy", "npy", b"not an array"),
        ("broken.parquet", "parquet", b"PAR1 not a table PAR1"),
    ):
        (tmp_path / name).write_bytes(data)
        out = tmp_path / f"out-{kind}"
        bad = runner.invoke(
            app, ["shards", "write", str(tmp_path / name), str(out), "--from", kind]
        )
        assert bad.exit_code == 2, bad.output
        assert f"{name}: cannot be read as {kind}" in bad.stderr and "Traceback" not in bad.output
        assert not (out / "index.json").exists()  # a run on the mended input starts afresh
    (tmp_path / "latin.jsonl").write_text('{"a": "e"}\n')
    fixed = _write(
        str(tmp_path / "latin.jsonl"), str(tmp_path / "out-jsonl"), "--from", "jsonl",
        "--compression", "none",
    )  # fmt: skip
    assert fixed["samples"] == 1 and fixed["compression"] is None


def test_one_file_with_keys_is_keyed_by_its_name(tmp_path: Path) -> None:
    (tmp_path / "cat.jpg").write_bytes(b"meow")
    _write(str(tmp_path / "cat.jpg"), str(tmp_path / "k"), "--keys")
    assert StreamingDataset(tmp_path / "k")[0] == {"key": "cat.jpg", "data": b"meow"}


def test_an_output_that_is_a_file_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.bin").write_bytes(b"a")
    (tmp_path / "taken").write_text("mine")
    out = runner.invoke(app, ["shards", "write", str(tmp_path / "in"), str(tmp_path / "taken")])
    assert out.exit_code == 2 and "cannot hold a dataset" in out.stderr, out.output
    assert (tmp_path / "taken").read_text() == "mine"


def test_bad_options_are_named_by_their_option(tmp_path: Path) -> None:
    from stoker.cli import shards as shards_cli
    from stoker.stream._sources import KINDS

    assert set(shards_cli.KINDS) == set(KINDS)
    (tmp_path / "a.bin").write_bytes(b"x")
    for args, option in [
        (["--from", "csv"], "--from"),
        (["--shard-size", "0"], "--shard-size"),
        (["--shard-size", "banana"], "--shard-size"),
        (["--compression", "gzip"], "--compression"),
    ]:
        out = runner.invoke(app, ["shards", "write", str(tmp_path), str(tmp_path / "o"), *args])
        assert out.exit_code == 2 and f"'{option}'" in out.output, (args, out.output)
    assert not (tmp_path / "o").exists()
