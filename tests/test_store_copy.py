"""The copy strategies (store/_copy.py): each pair of stores goes the way its capabilities call
for, the bytes arrive whole, and the run hears of every byte through its callbacks, not the
engine. An in-memory object store stands for a remote one."""

from __future__ import annotations

import ast
import asyncio
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stoker.store import CopyRun, ObjectInfo, PosixStore, SmallWriter, Store, copy_object

SRC = Path(__file__).resolve().parents[1] / "src" / "stoker"


class MemoryStore(Store):
    """Objects in a dict; ``service`` says whether it copies another MemoryStore's objects
    itself (and ``refuse`` that it then cannot after all)."""

    def __init__(self, objects: dict[str, bytes] | None = None, *, service: bool = False) -> None:
        self.objects = dict(objects or {})
        self.service, self.refuse, self.copied = service, False, []

    def __str__(self) -> str:
        return "mem://test"

    async def list(self) -> AsyncIterator[list[ObjectInfo]]:  # type: ignore[override]
        yield [ObjectInfo(k, len(v), f"e{len(v)}") for k, v in self.objects.items()]

    async def head(self, key: str) -> ObjectInfo | None:
        data = self.objects.get(key)
        return None if data is None else ObjectInfo(key, len(data), f"e{len(data)}")

    async def read_range(self, key: str, start: int, end: int, etag: str | None = None) -> bytes:
        return self.objects[key][start:end]

    async def write_file(self, key, source, size, md5=None, *, gate=None):  # noqa: ANN001
        self.objects[key] = Path(source).read_bytes()
        return None

    async def delete(self, key: str) -> None:
        self.objects.pop(key, None)

    def copies_from(self, src: Store) -> bool:
        return self.service and isinstance(src, MemoryStore)

    async def copy_from(self, src, key, etag, md5, size=None, gate=None):  # noqa: ANN001
        if self.refuse:
            raise NotImplementedError("not this one")
        self.objects[key] = src.objects[key]  # type: ignore[attr-defined]
        self.copied.append(key)
        return None


class Journal:
    def __init__(self) -> None:
        self.blocks: list[int] = []

    def blocks_done(self, key: str, etag: str) -> set[int]:
        return set()

    def block_done(self, key: str, etag: str, i: int) -> None:
        self.blocks.append(i)

    def mark_pending(self, key: str) -> None:
        raise AssertionError("no copy here is damaged")


def _run(tmp_path: Path, **kw) -> tuple[CopyRun, list[int], list[int]]:  # noqa: ANN003
    shown: list[int] = []
    moved: list[int] = []
    run = CopyRun(
        requests=asyncio.Semaphore(4),
        block_size=1 << 20,
        concurrency=4,
        hash_files=True,
        progress=shown.append,
        moved=moved.append,
        journal=Journal(),
        small=256 << 10,
        held=asyncio.Semaphore(2),
        spool=tmp_path / "spool",
        **kw,
    )
    return run, shown, moved


def _copy(src: Store, dst: Store, key: str, run: CopyRun, md5: bool = True) -> str | None:
    async def go() -> str | None:
        info = await src.head(key)
        assert info is not None
        digest = hashlib.md5(await src.read_range(key, 0, info.size)).hexdigest() if md5 else None
        if dst.local_root is not None:
            run.writer = SmallWriter(dst, 2)
        try:
            return await copy_object(src, dst, key, info.size, info.etag, digest, run)
        finally:
            if run.writer:
                await run.writer.close()

    return asyncio.run(go())


def test_each_store_answers_what_it_can_do(tmp_path: Path) -> None:
    posix, memory = PosixStore(tmp_path), MemoryStore()
    assert posix.local_root == tmp_path and posix.local_path("a/b") == tmp_path / "a" / "b"
    assert memory.local_root is None and memory.local_path("a/b") is None
    assert posix.exact_times and not memory.exact_times
    listed = ObjectInfo("k", 3, "1500000000123456789:3")
    assert posix.modified(listed) == pytest.approx(1500000000.123456789)
    assert memory.modified(listed) is None  # (an object store says mtime, or nothing)
    assert memory.modified(ObjectInfo("k", 3, "x", mtime=7.0)) == 7.0
    assert memory.link_notes() == [] and posix.link_notes() == []


@pytest.mark.parametrize("size", [100 << 10, 5 << 20])  # small: fetched whole; large: ranged
def test_remote_to_folder_arrives_whole_and_is_counted(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    src, dst = MemoryStore({"d/obj": data}), PosixStore(tmp_path / "dst")
    run, shown, moved = _run(tmp_path)
    digest = _copy(src, dst, "d/obj", run)
    assert (tmp_path / "dst" / "d" / "obj").read_bytes() == data
    assert digest == hashlib.md5(data).hexdigest()  # checked against the source's MD5
    assert sum(shown) == sum(moved) == size
    assert run.folders == {"d"}  # its folder is left to the run's one fsync
    # A large object's units (1 MiB here: the block size) are recorded for resume as they
    # land; a small one has none.
    units = list(range(size >> 20)) if size > run.small else []
    assert sorted(run.journal.blocks) == units  # type: ignore[attr-defined]


def test_folder_to_folder_and_folder_to_object_store(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    big, small = os.urandom(3 << 20), os.urandom(1000)
    (tmp_path / "src" / "big").write_bytes(big)
    (tmp_path / "src" / "small").write_bytes(small)
    src = PosixStore(tmp_path / "src")
    for key, data in (("big", big), ("small", small)):
        run, shown, moved = _run(tmp_path)
        digest = _copy(src, PosixStore(tmp_path / "dst"), key, run, md5=False)
        assert (tmp_path / "dst" / key).read_bytes() == data
        assert digest is not None and digest.startswith("xxh128:")
        assert sum(shown) == sum(moved) == len(data)
    up = MemoryStore()
    run, shown, moved = _run(tmp_path)
    _copy(src, up, "big", run, md5=False)
    assert up.objects["big"] == big and sum(moved) == len(big)


def test_between_object_stores_the_service_copies_or_the_object_is_relayed(
    tmp_path: Path,
) -> None:
    data = os.urandom(3 << 20)
    src = MemoryStore({"k": data})
    served = MemoryStore(service=True)
    run, _, moved = _run(tmp_path)
    _copy(src, served, "k", run)
    assert served.copied == ["k"] and served.objects["k"] == data and sum(moved) == len(data)
    refused, elsewhere = MemoryStore(service=True), MemoryStore()
    refused.refuse = True
    for dst in (refused, elsewhere):  # through a spool file, which goes with it
        run, shown, moved = _run(tmp_path)
        _copy(src, dst, "k", run)
        assert dst.objects["k"] == data and not dst.copied  # type: ignore[attr-defined]
        assert sum(moved) == sum(shown) == len(data)
        assert run.journal.blocks == []  # type: ignore[attr-defined]  (a spool is not resumed)
        assert not any((tmp_path / "spool").rglob("k"))


def test_stage_asks_stores_what_they_can_do_never_their_class() -> None:
    found = []
    for path in sorted((SRC / "stage").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
                kinds = node.args[1]
                names = [n.id for n in ast.walk(kinds) if isinstance(n, ast.Name)]
                found += [f"{path.name}: {n}" for n in names if n.endswith("Store")]
    assert not found, found
