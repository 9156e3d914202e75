"""stage under faults, against a real Azurite: kill -9 and resume, the service going away and
coming back, a full disk, a source that changes mid-copy, corrupted and failed blocks."""

from __future__ import annotations

import asyncio
import errno
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from azurite import Azurite, blob_tree, partials, read_tree
from kill_mid_run import kill_when
from short_writes import ShortWrites
from stoker.errors import StageError, StoreError
from stoker.stage import _engine, stage
from stoker.store import _copy_down, _posix
from stoker.store import _direct_get as direct_get
from stoker.store._azure import STREAM_CHUNK, BlobStore
from stoker.store._direct_get import DirectGets

MiB = 1 << 20
BLOCK = MiB


def upload(container: Any, prefix: str, files: dict[str, bytes]) -> None:
    for key, data in files.items():
        container.upload_blob(f"{prefix}{key}", data, overwrite=True, max_concurrency=4)


@dataclass(frozen=True)
class Read:
    key: str
    start: int
    end: int
    began: float  # time.monotonic() when the request went out (after the hook)
    ended: float
    error: str = ""


def patch_reads(
    monkeypatch: pytest.MonkeyPatch, hook: Callable[[str, int, int], Any]
) -> list[Read]:
    """Route BlobStore's reads (a range streamed, or read whole: a small file, or a range of
    one piece) through ``await hook(key, start, end)`` (which may raise, sleep or return a
    function that replaces the range's first piece); returns the log of ranges fetched."""
    real_chunks, real_range = BlobStore.read_chunks, BlobStore.read_range
    fetched: list[Read] = []
    # The faults go into obstore's path (async, on the loop); the threads' path (_direct_get)
    # meets its faults from a loopback service in tests/test_direct_get.py.
    monkeypatch.setattr(BlobStore, "direct_gets", lambda self: None)

    async def read_chunks(
        self: BlobStore, key: str, start: int, end: int, etag: str | None = None
    ) -> Any:
        if end - start <= STREAM_CHUNK:  # it reads the range whole (below), hooked there
            async for chunk in real_chunks(self, key, start, end, etag):
                yield chunk
            return
        mangle = await hook(key, start, end)
        began = time.monotonic()
        try:
            async for chunk in real_chunks(self, key, start, end, etag):
                yield mangle(chunk) if callable(mangle) else chunk
                mangle = None
        except BaseException as exc:
            fetched.append(Read(key, start, end, began, time.monotonic(), repr(exc)))
            raise
        fetched.append(Read(key, start, end, began, time.monotonic()))

    async def read_range(
        self: BlobStore, key: str, start: int, end: int, etag: str | None = None
    ) -> Any:
        mangle = await hook(key, start, end)
        began = time.monotonic()
        try:
            data = await real_range(self, key, start, end, etag)
        except BaseException as exc:
            fetched.append(Read(key, start, end, began, time.monotonic(), repr(exc)))
            raise
        fetched.append(Read(key, start, end, began, time.monotonic()))
        return mangle(data) if callable(mangle) else data

    monkeypatch.setattr(BlobStore, "read_chunks", read_chunks)
    monkeypatch.setattr(BlobStore, "read_range", read_range)
    return fetched


class OsProxy:
    """The ``os`` module, except that ``name`` raises ENOSPC after ``ok`` successful calls."""

    def __init__(self, name: str, ok: int) -> None:
        self._name, self._ok, self.calls = name, ok, 0

    def __getattr__(self, attr: str) -> Any:
        real = getattr(os, attr)
        if attr != self._name:
            return real

        def call(*args: Any) -> Any:
            self.calls += 1
            if self.calls > self._ok:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(*args)

        return call


# ------------------------------------------------------------------------------ kill -9
def _final_sizes(root: Path) -> dict[str, int]:
    """Sizes of the files at their final names (no partials, no state directory)."""
    out = {}
    for path in root.rglob("*"):
        key = path.relative_to(root).as_posix()
        if key.startswith(".stoker") or key.endswith(".stoker-partial"):
            continue
        try:
            if path.is_file():
                out[key] = path.stat().st_size
        except FileNotFoundError:
            continue
    return out


def test_resume_after_kill_9(
    blob_env: str, azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import killed (-9) half way resumes: finished files are kept, the large file goes on
    from its finished blocks, and no file is ever visible at its final name before it is whole.
    """
    # Six 4 MiB files, then a 40 MiB one: by key order the big file is the one in progress
    # when about half of the 64 MiB has landed.
    files = {f"data/part-{i}.bin": os.urandom(4 * MiB) for i in range(6)}
    files["data/z-big.bin"] = os.urandom(40 * MiB)
    total = sum(len(d) for d in files.values())
    upload(azurite.client(blob_env), "", files)
    src, dst = f"{blob_env}/data", tmp_path / "dst"
    code = (
        "import sys; from stoker.stage import stage; "
        "stage(sys.argv[1], sys.argv[2], block_size=1 << 20, concurrency=4, durability='fsync')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, src, str(dst)],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    sizes = {k.removeprefix("data/"): len(v) for k, v in files.items()}

    def enough(landed: int) -> bool:
        # Whatever sits at a final name is whole (size now, content after the kill).
        for key, size in _final_sizes(dst).items():
            assert size == sizes[key], f"{key} visible before it was complete"
        return landed >= total // 2

    landed = kill_when(proc, dst, enough, timeout_s=45, poll_s=0.005)
    assert total // 2 <= landed < total

    before = read_tree(dst)
    assert before and partials(dst), "the kill should leave finished files and a partial one"
    for key, data in before.items():
        assert data == files[f"data/{key}"], f"{key} at its final name but not complete"

    async def count_only(key: str, start: int, end: int) -> None:
        return None

    fetched = patch_reads(monkeypatch, count_only)
    summary = stage(src, str(dst), block_size=BLOCK, concurrency=4)
    assert summary.ok, summary.failed
    assert read_tree(dst) == {k.removeprefix("data/"): v for k, v in files.items()}
    assert partials(dst) == []
    refetched = sum(r.end - r.start for r in fetched)
    by_key: dict[str, int] = {}
    for r in fetched:
        by_key[r.key] = by_key.get(r.key, 0) + r.end - r.start
    assert refetched < 0.6 * total, (
        f"resume fetched {refetched} of {total} bytes again: {by_key}; "
        f"before the kill: { {k: len(v) for k, v in before.items()} }"
    )
    assert summary.bytes_copied < 0.6 * total, (
        f"summary.bytes_copied {summary.bytes_copied} of {total}, but only {refetched} bytes "
        "were transferred in this run"
    )


# ------------------------------------------------------------------------------ Azurite restart
DOWN_S = 3.0  # Azurite is started again this long after the kill (it then needs 1-2 s to listen)


def test_azurite_restart_mid_transfer(
    azurite_factory: Callable[[], Azurite],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Azurite is killed (-9) mid-import and is back a few seconds later: requests cut off or
    refused meanwhile are retried, and the copy completes."""
    server = azurite_factory()
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", server.connection_string)
    container = server.container()
    files = {f"f{i}.bin": os.urandom(2 * MiB + i) for i in range(4)}
    files["big.bin"] = os.urandom(8 * MiB)
    upload(container, "", files)
    server.restart()  # the data is on disk and Azurite's metadata saved
    assert blob_tree(container) == files

    go_down, is_down, is_back = threading.Event(), threading.Event(), threading.Event()
    reads = 0

    async def hook(key: str, start: int, end: int) -> None:
        nonlocal reads
        reads += 1
        if reads == 6:  # some blocks have landed: now the service goes away
            go_down.set()
            await asyncio.to_thread(is_back.wait, 30)  # (only to order the test's events)
        elif reads > 6:  # the rest go out to a dead service, however late the kill comes
            await asyncio.to_thread(is_down.wait, 30)

    fetched = patch_reads(monkeypatch, hook)
    dst = tmp_path / "dst"
    result: list[Any] = []

    def copy() -> None:
        try:
            result.append(
                stage(
                    f"az://{container.container_name}",
                    str(dst),
                    block_size=BLOCK,
                    concurrency=4,
                )
            )
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            result.append(exc)

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    assert go_down.wait(30), "the copy never started reading"
    down = time.monotonic()
    try:
        server.stop(kill=True)  # kill -9: connections in flight die too
        is_down.set()
        time.sleep(max(0.0, DOWN_S - (time.monotonic() - down)))
        server.start()
        back = time.monotonic()
        assert back - down < 10, "Azurite took too long to come back"
    finally:
        is_down.set()
        is_back.set()
    thread.join(120)
    assert not thread.is_alive(), "stage did not finish within 2 minutes of Azurite's return"
    summary = result[0]
    assert not isinstance(summary, BaseException), summary
    gave_up = [
        f"{r.key}@{r.start} after {r.ended - r.began:.1f} s: {r.error}" for r in fetched if r.error
    ]
    assert not gave_up, f"reads gave up during a {back - down:.1f} s outage: {gave_up}"
    assert summary.ok, summary.failed
    assert read_tree(dst) == files
    assert partials(dst) == []
    # Requests in flight in the middle of the outage were cut off or refused, and retried.
    mid = (down + back) / 2
    assert [r for r in fetched if r.began < mid < r.ended], "no request met the outage"


# ------------------------------------------------------------------------------ disk full
def _small_dataset() -> dict[str, bytes]:
    files = {f"d{i % 3}/f{i:02d}.bin": os.urandom(1000 * i + 1) for i in range(12)}
    files["big.bin"] = os.urandom(3 * BLOCK + 5)
    return files


@pytest.mark.parametrize(
    ("module", "call", "ok"),
    [
        (_posix, "pwrite", 2),  # a block of the large file (write_all)
        (_posix, "write", 4),  # a small file, written whole (write_all at its position)
        (_posix, "ftruncate", 0),  # sizing the large file's partial
    ],
)
def test_disk_full_stops_with_a_clear_error_and_a_rerun_completes(
    blob_env: str,
    azurite: Azurite,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    module: Any,
    call: str,
    ok: int,
) -> None:
    files = _small_dataset()
    upload(azurite.client(blob_env), "", files)
    dst = tmp_path / "dst"
    with monkeypatch.context() as patch:
        proxy = OsProxy(call, ok=ok)
        patch.setattr(module, "os", proxy)
        with pytest.raises(StageError) as err:
            stage(blob_env, str(dst), block_size=BLOCK, concurrency=4)
    assert proxy.calls > ok
    message = str(err.value)
    assert "no space" in message.lower(), message
    assert str(dst) in message  # names where
    assert read_tree(dst) != files

    summary = stage(blob_env, str(dst), block_size=BLOCK, concurrency=4)
    assert summary.ok, summary.failed
    assert read_tree(dst) == files
    assert partials(dst) == []


def test_short_writes_leave_no_hole(
    blob_env: str, azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pwrite that wrote less than it was given was taken as whole: the file was published
    with a hole, and with no hash nothing noticed."""
    files = _small_dataset()
    upload(azurite.client(blob_env), "", files)
    for module in (_copy_down, _posix):
        monkeypatch.setattr(module, "os", ShortWrites())
    summary = stage(blob_env, str(tmp_path / "dst"), block_size=BLOCK, hash_files=False)
    assert summary.ok, summary.failed
    assert read_tree(tmp_path / "dst") == files


def test_whole_files_go_into_the_page_cache_a_piece_at_a_time(
    blob_env: str, azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write's length sets the size of the page-cache folio the kernel takes for it (see
    _posix.WRITE_PIECE): a file written whole in order goes in writes of at most a piece; a
    large file's ranges go in their pieces as they arrive (there small folios cost more)."""
    files = _small_dataset()
    files["whole.bin"] = os.urandom(MiB - 3)  # fetched whole, written by the small writers
    upload(azurite.client(blob_env), "", files)
    lengths: dict[str, list[int]] = {"write": [], "pwrite": []}

    class Recording:
        def __getattr__(self, attr: str) -> Any:
            call = getattr(os, attr)
            if attr not in lengths:
                return call
            return lambda fd, data, *at: (lengths[attr].append(len(data)), call(fd, data, *at))[1]

    monkeypatch.setattr(_posix, "os", Recording())
    summary = stage(blob_env, str(tmp_path / "dst"), block_size=BLOCK)
    assert summary.ok, summary.failed
    assert read_tree(tmp_path / "dst") == files
    assert max(lengths["write"]) == _posix.WRITE_PIECE
    # big.bin's ranges, a piece at a time as the store's threads read them (its MD5 is read
    # back in file order, so it goes through the page cache: see _direct_write)
    assert max(lengths["pwrite"]) == direct_get.PIECE


# ------------------------------------------------------------------------------ source changes
@pytest.mark.parametrize(
    ("moving", "hash_files", "said"),
    [
        ("moving/big.bin", True, "changed while it was being copied"),  # its version, checked
        # a small object is checked against its listed MD5 instead (one call to read it)
        ("moving/small.bin", True, "(it changed since it was listed, or was damaged on the way)"),
        ("moving/small.bin", False, "changed while it was being copied"),  # no MD5: its version
    ],
)
def test_source_changing_mid_copy_is_reported_and_rerun_takes_the_new_version(
    blob_env: str,
    azurite: Azurite,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    moving: str,
    hash_files: bool,
    said: str,
) -> None:
    container = azurite.client(blob_env)
    files = {"keep/a.txt": b"a" * 1000, "keep/b.bin": os.urandom(70_000)}
    files["moving/big.bin"] = os.urandom(3 * BLOCK + 100)
    files["moving/small.bin"] = os.urandom(50_000)
    upload(container, "", files)
    new = os.urandom(2 * BLOCK + 7 if moving.endswith("big.bin") else 40_000)
    replaced = False

    async def hook(key: str, start: int, end: int) -> None:
        nonlocal replaced
        if key == moving and not replaced:
            replaced = True  # someone rewrites the object after listing, before reading
            await asyncio.to_thread(container.upload_blob, moving, new, overwrite=True)

    dst = tmp_path / "dst"
    with monkeypatch.context() as patch:
        patch_reads(patch, hook)
        summary = stage(blob_env, str(dst), block_size=BLOCK, concurrency=4, hash_files=hash_files)
    assert replaced
    assert len(summary.failed) == 1 and not summary.refused
    assert moving in summary.failed[0]
    assert said in summary.failed[0]
    assert summary.files_copied == 3
    assert read_tree(dst) == {k: v for k, v in files.items() if k != moving}

    again = stage(blob_env, str(dst), block_size=BLOCK, concurrency=4)
    assert again.ok, again.failed
    assert again.files_copied == 1
    assert read_tree(dst) == {**files, moving: new}
    assert partials(dst) == []


# ------------------------------------------------------------------------------ whole files
def test_files_up_to_4_mib_come_whole_checked_and_few_held_at_once(
    blob_env: str, azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From Blob, a file of up to 4 MiB is one read of the whole object, its MD5 checked in
    memory before a byte is written, with at most HELD_WHOLE of those above 1 MiB held at
    once; a larger one streams by blocks into its partial file."""
    files = {f"mid/{i:02d}.bin": os.urandom(MiB + 1 + i * 150_000) for i in range(20)}
    files["mid/damaged.bin"] = os.urandom(3 * MiB)
    files["big.bin"] = os.urandom(4 * MiB + 1)
    upload(azurite.client(blob_env), "", files)
    monkeypatch.setattr(_engine, "HELD_WHOLE", 2)
    real_range, real_chunks = BlobStore.read_range, BlobStore.read_chunks
    whole: list[str] = []
    streamed: set[str] = set()
    held = most = 0

    async def read_range(self: BlobStore, key: str, start: int, end: int, etag: Any = None) -> Any:
        nonlocal held, most
        held += 1
        most = max(most, held)
        try:
            data = await real_range(self, key, start, end, etag)
            await asyncio.sleep(0.01)  # (as if the network were slower: they overlap)
        finally:
            held -= 1
        whole.append(key)
        return bytes([data[0] ^ 0xFF]) + bytes(data[1:]) if key == "mid/damaged.bin" else data

    async def read_chunks(self: BlobStore, key: str, start: int, end: int, etag: Any = None) -> Any:
        streamed.add(key)
        async for chunk in real_chunks(self, key, start, end, etag):
            yield chunk

    real_direct = DirectGets.read

    def direct(self: DirectGets, what: str, key: str, *args: Any) -> int:  # (a thread's GET)
        streamed.add(key)
        return real_direct(self, what, key, *args)

    dst = tmp_path / "dst"
    with monkeypatch.context() as patch:
        patch.setattr(BlobStore, "read_range", read_range)
        patch.setattr(BlobStore, "read_chunks", read_chunks)
        patch.setattr(DirectGets, "read", direct)
        summary = stage(blob_env, str(dst), concurrency=8)
    assert sorted(whole) == sorted(k for k in files if k.startswith("mid/"))  # one read each
    assert streamed == {"big.bin"}
    assert most == 2
    assert len(summary.failed) == 1 and "mid/damaged.bin" in summary.failed[0]
    assert "MD5" in summary.failed[0]
    assert read_tree(dst) == {k: v for k, v in files.items() if k != "mid/damaged.bin"}
    assert partials(dst) == []
    again = stage(blob_env, str(dst))
    assert again.ok and again.files_copied == 1
    assert read_tree(dst) == files


# ------------------------------------------------------------------------------ bad blocks
@pytest.mark.parametrize(("damaged", "start"), [("big.bin", BLOCK), ("small.bin", 0)])
def test_corrupted_transfer_is_caught_and_a_rerun_fetches_it_again(
    blob_env: str,
    azurite: Azurite,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    damaged: str,
    start: int,
) -> None:
    """A block (or a small file, fetched whole) damaged in transit fails the MD5 check
    ("re-run to fetch it again"); the re-run must then fetch it, not trust the damaged blocks
    it recorded."""
    files = {"big.bin": os.urandom(3 * BLOCK + 11), "small.bin": os.urandom(5000)}
    upload(azurite.client(blob_env), "", files)

    async def hook(key: str, begin: int, end: int) -> Any:
        if key == damaged and begin == start:
            return lambda data: bytes([data[0] ^ 0xFF]) + bytes(data[1:])  # one bit-flipped byte
        return None

    dst = tmp_path / "dst"
    with monkeypatch.context() as patch:
        patch_reads(patch, hook)
        summary = stage(blob_env, str(dst), block_size=BLOCK, concurrency=4)
    assert len(summary.failed) == 1 and damaged in summary.failed[0]
    assert "MD5" in summary.failed[0]
    intact = next(k for k in files if k != damaged)
    assert read_tree(dst) == {intact: files[intact]}  # never published damaged
    assert partials(dst) == []

    again = stage(blob_env, str(dst), block_size=BLOCK, concurrency=4)
    assert again.ok, again.failed
    assert read_tree(dst) == files


def test_blob_to_blob_rerun_after_a_failed_block(
    azurite_factory: Callable[[], Azurite], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blob -> Blob on another endpoint relays through a temporary file (within one account
    the service copies); a re-run after a failed block must not assume blocks of a temporary
    file that is gone."""
    one, two = azurite_factory(), azurite_factory()
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", one.connection_string)
    src, dst = one.container(), two.container()
    src_url = f"{one.endpoint}/{src.container_name}"
    files = {"big.bin": os.urandom(4 * BLOCK + 3), "small.bin": b"s" * 100}
    upload(src, "", files)
    failed_once = False

    async def hook(key: str, start: int, end: int) -> None:
        nonlocal failed_once
        if key == "big.bin" and start == 2 * BLOCK and not failed_once:
            failed_once = True
            await asyncio.sleep(0.5)  # the other blocks land first
            raise StoreError("reading big.bin: connection reset (injected)")

    dst_url = f"{two.endpoint}/{dst.container_name}"
    with monkeypatch.context() as patch:
        patch_reads(patch, hook)
        summary = stage(src_url, dst_url, block_size=BLOCK, concurrency=8)
    assert failed_once and len(summary.failed) == 1 and "injected" in summary.failed[0]

    again = stage(src_url, dst_url, block_size=BLOCK, concurrency=8)
    assert again.ok, again.failed
    assert blob_tree(dst) == files


def test_failed_block_does_not_write_into_another_file(
    blob_env: str, azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When one block of a file fails, the file's other blocks still in flight must not be
    written after its descriptor is closed: by then the number belongs to the next partial
    file opened (b, c, d or m here, all small and slow), which would then be published
    holding a's blocks."""
    files = {
        "a.bin": bytes([0xA1]) * (3 * BLOCK),  # block 0 fails at once, blocks 1-2 land at 0.4 s
        "b.bin": bytes([0xB2]) * 100,
        "c.bin": bytes([0xC3]) * 100,
        "d.bin": bytes([0xD4]) * 100,
        "m.bin": bytes([0xE5]) * 100,  # opened when a's slot frees, just after a fails
    }
    upload(azurite.client(blob_env), "", files)
    failed = False

    async def hook(key: str, start: int, end: int) -> None:
        nonlocal failed
        if key == "a.bin" and start == 0 and not failed:
            failed = True
            raise StoreError("reading a.bin: connection reset (injected)")
        await asyncio.sleep(0.4 if key == "a.bin" else 1.0)

    dst = tmp_path / "dst"
    with monkeypatch.context() as patch:
        patch_reads(patch, hook)
        summary = stage(blob_env, str(dst), block_size=BLOCK, concurrency=4)
    assert failed and len(summary.failed) == 1 and "a.bin" in summary.failed[0]
    got = read_tree(dst)
    assert set(got) == {"b.bin", "c.bin", "d.bin", "m.bin"}
    damaged = {
        key: f"{len(data)} bytes, {len(data) - data.count(files[key][0])} of them not its own"
        for key, data in got.items()
        if data != files[key]
    }
    assert not damaged, f"published damaged (a.bin's blocks landed in them): {damaged}"


def test_crash_between_publish_and_done_mark_does_not_zero_the_file(
    blob_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks recorded for a file count only while its partial file exists: if a run died
    after renaming the file into place but before its done mark, the re-run must not publish
    an empty partial over the good copy."""
    from stoker.stage import _manifest

    src = tmp_path / "src"
    src.mkdir()
    payload = os.urandom(3 << 20)
    (src / "big.bin").write_bytes(payload)
    url = f"{blob_env}/ds"
    assert stage(str(src), url, block_size=1 << 20).ok
    dst = tmp_path / "dst"
    # Lose every done mark, as a kill -9 between publish and the batched commit would.
    with monkeypatch.context() as patch:
        patch.setattr(_manifest.Manifest, "flush", lambda self: self._done.clear())
        stage(url, str(dst), block_size=1 << 20, hash_files=False)
    assert (dst / "big.bin").read_bytes() == payload
    again = stage(url, str(dst), block_size=1 << 20, hash_files=False)
    # (copied again, or, newer than its blob, taken as already there: whole either way)
    assert again.ok and again.files_copied + again.files_skipped == 1
    assert (dst / "big.bin").read_bytes() == payload


_KILL_AFTER_A_IS_PUBLISHED = """
import os, sys, threading
from stoker.stage import _engine, _manifest, stage
from stoker.store import _posix

async def never(self, seconds):  # no timed commit: only what the engine commits at once
    await __import__("asyncio").Event().wait()

_engine.Engine._flush_every = never
real_publish, real_done = _posix.PosixStore.publish, _manifest.Manifest.object_done
a_marked = threading.Event()

def object_done(self, key, *args, **kw):
    real_done(self, key, *args, **kw)
    if key == "a.bin":  # the engine has done all it does for a.bin: committed or queued
        a_marked.set()

def publish(self, key, fd, **kw):
    if key == "z.bin":  # killed while publishing z, after a.bin was marked done
        if not a_marked.wait(30):
            os._exit(3)
        os._exit(9)
    return real_publish(self, key, fd, **kw)

_manifest.Manifest.object_done = object_done
_posix.PosixStore.publish = publish
stage(sys.argv[1], sys.argv[2], block_size=1 << 20, concurrency=2, durability="fsync")
"""


def test_a_file_of_many_blocks_is_recorded_done_as_soon_as_it_is_published(
    blob_env: str, azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finished files are committed in batches, but a file of many blocks is committed as it
    is published: a kill just after must not cost the whole file again (its blocks were
    forgotten when it was published)."""
    files = {"a.bin": os.urandom(3 * MiB), "z.bin": os.urandom(2 * MiB)}
    upload(azurite.client(blob_env), "", files)
    dst = tmp_path / "dst"
    run = [sys.executable, "-c", _KILL_AFTER_A_IS_PUBLISHED, blob_env, str(dst)]
    assert subprocess.run(run, env=dict(os.environ), timeout=60).returncode == 9
    assert (dst / "a.bin").read_bytes() == files["a.bin"]

    async def count_only(key: str, start: int, end: int) -> None:
        return None

    fetched = patch_reads(monkeypatch, count_only)
    summary = stage(blob_env, str(dst), block_size=BLOCK, concurrency=2)
    assert summary.ok and read_tree(dst) == files
    assert "a.bin" not in {r.key for r in fetched}, "a.bin was fetched again"


def test_resume_with_another_block_size_fetches_what_is_missing(
    blob_env: str, azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finished blocks are numbered in the block size that fetched them: a re-run with larger
    blocks must not take blocks 0-2 of 1 MiB for blocks 0-2 of 2 MiB (and publish a file with
    a hole), even with no hash to catch it."""
    data = os.urandom(4 * BLOCK)
    upload(azurite.client(blob_env), "", {"a.bin": data})

    async def fail_last(key: str, start: int, end: int) -> None:
        if start == 3 * BLOCK:
            await asyncio.sleep(0.5)  # blocks 0-2 land and are recorded first
            raise StoreError("reading a.bin: connection reset (injected)")

    dst = tmp_path / "dst"
    with monkeypatch.context() as patch:
        patch_reads(patch, fail_last)
        first = stage(blob_env, str(dst), block_size=BLOCK, concurrency=4)
    assert len(first.failed) == 1 and partials(dst)
    again = stage(blob_env, str(dst), block_size=2 * BLOCK, concurrency=4, hash_files=False)
    assert again.ok and read_tree(dst) == {"a.bin": data}


def test_a_local_file_changed_or_removed_during_its_upload_fails_alone(
    blob_env: str, azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file written to while it was sent would go up torn, and one removed after the listing
    cannot go up at all: each fails by itself, the others go on, and a re-run sends the file
    as it is now."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("edited.bin", "gone.bin", "kept.bin"):
        (src / name).write_bytes(name.encode() * 1000)
    real_list, real_write = _posix.PosixStore.list, BlobStore.write_bytes

    async def list_then_remove(self: Any) -> Any:
        async for batch in real_list(self):
            (src / "gone.bin").unlink(missing_ok=True)  # after it was listed
            yield batch

    async def write_while_edited(self: BlobStore, key: str, data: bytes) -> None:
        if key == "edited.bin":
            with open(src / key, "ab") as f:  # the writer goes on while stoker sends it
                f.write(b"more")
        await real_write(self, key, data)

    with monkeypatch.context() as patch:
        patch.setattr(_posix.PosixStore, "list", list_then_remove)
        patch.setattr(BlobStore, "write_bytes", write_while_edited)
        first = stage(str(src), f"{blob_env}/up")
    assert len(first.failed) == 2
    for name, message in zip(("edited.bin", "gone.bin"), sorted(first.failed), strict=True):
        assert f"/{name} changed while it was being copied" in message
    assert first.files_copied == 1
    again = stage(str(src), f"{blob_env}/up")
    assert again.ok and again.files_copied == 1
    got = blob_tree(azurite.client(blob_env), "up/")
    assert got == {"edited.bin": (src / "edited.bin").read_bytes(), "kept.bin": b"kept.bin" * 1000}


def test_a_download_goes_in_requests_of_blocks_and_is_recorded_in_units(
    blob_env: str, azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 20 MiB blob in 8 MiB blocks: three requests (8, 8 and 4 MiB), each unit of 4 MiB
    recorded for resume as the stream passes it, so a crash re-fetches at most the unit each
    request had under way; the copy is whole and its MD5 checked."""
    from stoker.stage import _manifest

    data = os.urandom(20 * MiB)
    upload(azurite.client(blob_env), "", {"big.bin": data})
    recorded: list[int] = []
    real_done = _manifest.Manifest.block_done

    def block_done(self: _manifest.Manifest, key: str, etag: str, idx: int) -> None:
        recorded.append(idx)
        real_done(self, key, etag, idx)

    async def count_only(key: str, start: int, end: int) -> None:
        return None

    monkeypatch.setattr(_manifest.Manifest, "block_done", block_done)
    fetched = patch_reads(monkeypatch, count_only)
    summary = stage(blob_env, str(tmp_path / "dst"), block_size=8 * MiB)
    assert summary.ok, summary.failed
    assert (tmp_path / "dst" / "big.bin").read_bytes() == data
    assert sorted((r.start, r.end) for r in fetched) == [
        (0, 8 * MiB),
        (8 * MiB, 16 * MiB),
        (16 * MiB, 20 * MiB),
    ]
    assert sorted(recorded) == list(range(5))  # five 4 MiB units


def test_a_large_download_keeps_a_window_of_requests_in_file_order(
    blob_env: str, azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file's requests start in file order, at most WINDOW of them in flight (its MD5 goes in
    order, so it can hash while the rest arrive), however many the engine allows at once."""
    from stoker.store import _copy_down

    data = os.urandom(40 * MiB)
    upload(azurite.client(blob_env), "", {"big.bin": data})

    async def slow(key: str, start: int, end: int) -> None:
        await asyncio.sleep(0.05)

    fetched = patch_reads(monkeypatch, slow)
    summary = stage(blob_env, str(tmp_path / "dst"), block_size=BLOCK, concurrency=32)
    assert summary.ok, summary.failed
    assert (tmp_path / "dst" / "big.bin").read_bytes() == data
    assert len(fetched) > 2 * _copy_down.WINDOW  # (20 requests of 2 MiB: 16 a file at least)
    by_start = sorted(fetched, key=lambda r: r.began)
    assert [r.start for r in by_start] == sorted(r.start for r in fetched)
    most = max(sum(o.began <= r.began < o.ended for o in fetched) for r in fetched)
    assert most <= _copy_down.WINDOW, most


def test_a_download_starts_its_writeback_a_span_at_a_time(
    blob_env: str, azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 40 MiB blob (ten 4 MiB units): writeback starts once per 32 MiB span, when the last of
    its units has landed, not once a unit; the copy is whole."""
    from stoker.store import _copy_down

    data = os.urandom(40 * MiB)
    upload(azurite.client(blob_env), "", {"big.bin": data})
    started: list[tuple[int, int]] = []
    monkeypatch.setattr(_copy_down, "start_writeback", lambda fd, off, n: started.append((off, n)))
    summary = stage(blob_env, str(tmp_path / "dst"), block_size=8 * MiB, durability="fsync")
    assert summary.ok, summary.failed
    assert (tmp_path / "dst" / "big.bin").read_bytes() == data
    assert sorted(started) == [(0, 32 * MiB), (32 * MiB, 8 * MiB)]


def test_writeback_spans_complete_whatever_order_units_land_in() -> None:
    from stoker.store._copy_down import WRITEBACK, WritebackSpans

    unit, size = 4 * MiB, 100 * MiB  # 25 units: spans of 8, 8, 8 and 1
    per = WRITEBACK // unit
    order = list(range(25))
    random.Random(7).shuffle(order)
    spans = WritebackSpans(size, unit)
    done: dict[int, tuple[int, int]] = {}
    for k, i in enumerate(order):
        span, s = spans.landed(i), i // per
        if span is not None:
            assert s not in done  # once a span, when every unit of it has landed
            assert set(range(s * per, min(25, (s + 1) * per))) <= set(order[: k + 1])
            done[s] = span
    assert done == {
        0: (0, WRITEBACK),
        1: (WRITEBACK, WRITEBACK),
        2: (2 * WRITEBACK, WRITEBACK),
        3: (3 * WRITEBACK, 4 * MiB),
    }
    # A resumed run's units count as landed: the unit that lands last completes its span.
    resumed = WritebackSpans(size, unit, landed={0, 1, 2, 3, 4, 5, 7})
    assert resumed.landed(6) == (0, WRITEBACK)
    assert resumed.landed(8) is None
