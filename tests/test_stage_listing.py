"""The copy starts while the source is still being listed: the first batch is copied before the
listing goes on, a listing that fails half way keeps what was copied, and the reporters'
totals grow with the listing."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

import stoker.store._posix_tree as posix_tree
from stoker.errors import StoreError
from stoker.stage import JsonReporter, stage
from stoker.store import PosixStore

BATCH = 5


@pytest.fixture
def sides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, list[str]]:
    """A source folder of four listing batches' worth of files, a destination, the keys."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    keys = [f"f{i:03d}.bin" for i in range(4 * BATCH)]
    src.mkdir()
    for i, key in enumerate(keys):
        (src / key).write_bytes(os.urandom(1000 + i))
    monkeypatch.setattr(posix_tree, "LIST_BATCH", BATCH)
    return src, dst, keys


def _listing_of(src: Path, after_first: Any) -> Any:
    """PosixStore.list for ``src`` that runs ``after_first(batch)`` once its first batch is out."""
    real = PosixStore.list

    async def listing(self: PosixStore) -> Any:
        first = None
        async for batch in real(self):
            yield batch
            if self.root == src and first is None:
                first = batch
                await after_first(batch)

    return listing


def test_the_first_batch_is_copied_while_the_listing_goes_on(
    sides: tuple[Path, Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst, keys = sides
    waited: list[float] = []

    async def until_copied(batch: list) -> None:
        # A copy that waited for the whole listing would never get here: fail after 10 s.
        for tick in range(1000):
            if all((dst / o.key).exists() for o in batch):
                waited.append(tick / 100)
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the first listed batch was not copied while the listing ran")

    monkeypatch.setattr(PosixStore, "list", _listing_of(src, until_copied))
    summary = stage(str(src), str(dst))
    assert summary.ok and waited
    assert summary.files_total == summary.files_copied == len(keys)
    assert sorted(p.name for p in dst.iterdir() if p.is_file()) == keys


def test_a_listing_that_fails_keeps_what_it_copied(
    sides: tuple[Path, Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst, keys = sides

    async def fail(batch: list) -> None:
        raise StoreError("listing broke off")

    with monkeypatch.context() as patch:
        patch.setattr(PosixStore, "list", _listing_of(src, fail))
        with pytest.raises(StoreError, match="listing broke off"):
            stage(str(src), str(dst))
    copied = sorted(p.name for p in dst.iterdir() if p.is_file())
    assert copied == keys[:BATCH]  # the batch listed before the error, whole
    again = stage(str(src), str(dst))
    assert again.ok and again.files_skipped == BATCH
    assert again.files_copied == len(keys) - BATCH
    assert sorted(p.name for p in dst.iterdir() if p.is_file()) == keys


def test_json_progress_names_the_final_totals_once_listed(
    sides: tuple[Path, Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst, keys = sides
    stage(str(src), str(dst))
    new = {f"new{i}.bin": os.urandom(2000 + i) for i in range(BATCH + 2)}  # two batches' worth
    for key, data in new.items():
        (src / key).write_bytes(data)
    capsys.readouterr()
    summary = stage(str(src), str(dst), reporter=JsonReporter(every_s=0))
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "summary" and kinds.count("listed") == 1
    listed = kinds.index("listed")
    assert (events[listed]["files"], events[listed]["bytes"]) == (
        len(new),
        sum(map(len, new.values())),
    )
    progress = [(i, e) for i, e in enumerate(events) if e["event"] == "progress"]
    assert progress
    for i, e in progress:  # totals only grow up to the final ones, flagged until then
        assert e["total_files"] <= len(new) and e["listing"] == (i < listed)
    assert (summary.files_skipped, summary.files_copied) == (len(keys), len(new))
    assert summary.files_total == len(keys) + len(new)


def test_a_file_removed_while_its_folder_is_listed_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank's listing of the fast tier ran while another rank pruned an old step: a file
    read in the folder and gone at its stat failed the listing, and with it that rank's save
    (the torchrun mixture test, 1 run in ~10)."""
    for name in ("a.bin", "gone.bin", "z.bin"):
        (tmp_path / name).write_bytes(b"x" * 10)
    real = os.scandir

    class RemovedOnTheWay:
        def __init__(self, path: str) -> None:
            self.entries = real(path)

        def __enter__(self) -> RemovedOnTheWay:
            return self

        def __exit__(self, *exc: object) -> None:
            self.entries.close()

        def __iter__(self) -> Any:
            for entry in self.entries:
                if entry.name == "gone.bin":
                    os.unlink(entry.path)  # after the folder was read, before its stat
                yield entry

    monkeypatch.setattr(posix_tree.os, "scandir", RemovedOnTheWay)

    async def keys() -> list[str]:
        return [info.key async for batch in PosixStore(tmp_path).list() for info in batch]

    assert asyncio.run(keys()) == ["a.bin", "z.bin"]
