"""Small files are written in groups, one thread call per group: every file still gets
its own hash and its own error, and is renamed only once its data is on disk (one syncfs for
the group where the file system allows it, else an fsync each)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import xxhash

from azurite import partials, read_tree
from stoker.errors import ChecksumError
from stoker.stage import stage
from stoker.store import PosixStore, _posix, _small
from stoker.store._safety import PARTIAL_SUFFIX


def small_files(count: int) -> dict[str, bytes]:
    rng = random.Random(7)
    return {
        f"part-{i % 3}/f{i:03d}.bin": rng.randbytes(rng.choice([0, 1, 4096, 65_536, 300_000]))
        for i in range(count)
    }


def fill(root: Path, files: dict[str, bytes]) -> None:
    for key, data in files.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)


def recorded_hashes(manifest: str) -> dict[str, str | None]:
    with sqlite3.connect(manifest) as db:
        return dict(db.execute("SELECT key, hash FROM objects WHERE state = 1"))


def test_grouped_local_copy_hashes_each_file_and_fails_one_alone(tmp_path: Path) -> None:
    files = small_files(40)
    src, dst = tmp_path / "src", tmp_path / "dst"
    fill(src, files)
    blocked = "part-1/f007.bin"
    (dst / blocked).mkdir(parents=True)  # a folder where a file must go: its rename fails

    first = stage(str(src), str(dst), hash_files=True)
    assert len(first.failed) == 1 and blocked in first.failed[0], first.failed
    assert first.files_copied == len(files) - 1
    assert read_tree(dst) == {k: v for k, v in files.items() if k != blocked}
    assert partials(dst) == []
    hashes = recorded_hashes(first.manifest)
    assert hashes == {
        k: f"xxh128:{xxhash.xxh3_128_hexdigest(v)}" for k, v in files.items() if k != blocked
    }

    (dst / blocked).rmdir()
    again = stage(str(src), str(dst), hash_files=True)
    assert again.ok and again.files_copied == 1 and again.files_skipped == len(files) - 1
    assert read_tree(dst) == files
    assert partials(dst) == []


def test_grouped_local_copy_without_hashing_copies_every_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = small_files(60)
    src, dst = tmp_path / "src", tmp_path / "dst"
    fill(src, files)
    groups: list[int] = []
    real = _small.write_group

    def counted(jobs: list[Any], *rest: Any) -> Any:
        groups.append(len(jobs))
        return real(jobs, *rest)

    monkeypatch.setattr(_small, "write_group", counted)
    summary = stage(str(src), str(dst))
    assert sum(groups) == len(files) and max(groups) > 1  # files did travel together
    assert summary.ok and summary.files_copied == len(files)
    assert summary.bytes_copied == sum(len(v) for v in files.values())
    assert read_tree(dst) == files
    assert set(recorded_hashes(summary.manifest).values()) == {None}


def test_kill_9_during_grouped_copy_leaves_only_whole_files(tmp_path: Path) -> None:
    """kill -9 while groups of small files are being written: every file at its final name is
    whole, and the same command again completes the copy."""
    files = {f"d{i % 7}/f{i:04d}.bin": os.urandom(4096 + i) for i in range(1500)}
    src, dst = tmp_path / "src", tmp_path / "dst"
    fill(src, files)
    # The child slows each group down so the kill surely lands mid-copy.
    code = (
        "import sys, time; from stoker.stage import stage; from stoker.store import _small\n"
        "real = _small.write_group\n"
        "_small.write_group = lambda *a: (time.sleep(0.02), real(*a))[1]\n"
        "stage(sys.argv[1], sys.argv[2], concurrency=2)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(src), str(dst)])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if dst.exists() and len(read_tree(dst)) >= 200:
                break
            time.sleep(0.01)
        alive = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert alive, "the copy ended before it could be killed"

    landed = read_tree(dst)
    assert 200 <= len(landed) < len(files)
    for key, data in landed.items():
        assert data == files[key], f"{key} at its final name but not whole"

    again = stage(str(src), str(dst))
    assert again.ok, again.failed
    assert read_tree(dst) == files
    assert partials(dst) == []


def test_group_is_made_durable_before_any_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where syncfs covers the file system, one syncfs per group stands for the files' fsyncs,
    and it runs before the first rename; elsewhere every file is fsynced before its rename."""
    files = small_files(60)
    src = tmp_path / "src"
    fill(src, files)
    events: list[str] = []
    real_syncfs, real_fsync, real_replace = _small.syncfs, os.fsync, os.replace
    monkeypatch.setattr(_small, "syncfs", lambda fd: (events.append("syncfs"), real_syncfs(fd)))
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd)))
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append("rename"), real_replace(a, b)))

    for whole in (True, False):
        monkeypatch.setattr(_small, "syncs_as_a_whole", lambda path, whole=whole: whole)
        events.clear()
        dst = tmp_path / f"dst-{whole}"
        summary = stage(str(src), str(dst))
        assert summary.ok and read_tree(dst) == files
        last_rename = len(events) - events[::-1].index("rename")
        files_phase = events[:last_rename]  # (the folders are fsynced after it)
        if whole:
            assert "fsync" not in files_phase
            assert 1 <= files_phase.count("syncfs") < len(files)
            assert files_phase.index("syncfs") < files_phase.index("rename")
        else:
            assert "syncfs" not in events and files_phase.count("rename") == len(files)
            # every rename follows an fsync of its own
            assert all(
                files_phase[: i + 1].count("fsync") >= files_phase[: i + 1].count("rename")
                for i in range(len(files_phase))
            )


def test_each_rename_follows_a_syncfs_begun_after_its_file_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit: writers go on while a syncfs runs, so a file written during it must wait
    for the next one before it is renamed."""
    files = small_files(200)
    src, dst = tmp_path / "src", tmp_path / "dst"
    fill(src, files)
    events: list[tuple[str, str]] = []
    real_write, real_syncfs, real_publish = _small.write_all, _small.syncfs, _small.publish_at

    def write_all(fd: int, data: Any, **options: Any) -> None:
        real_write(fd, data, **options)
        events.append(("wrote", os.readlink(f"/proc/self/fd/{fd}")))

    def slow_syncfs(fd: int) -> None:
        events.append(("syncfs", ""))
        time.sleep(0.005)  # long enough for other files to be written meanwhile
        real_syncfs(fd)

    def publish(final: str, fd: int, **options: Any) -> str:
        events.append(("rename", final))
        return real_publish(final, fd, **options)

    monkeypatch.setattr(_small, "syncs_as_a_whole", lambda path: True)
    monkeypatch.setattr(_small, "write_all", write_all)
    monkeypatch.setattr(_small, "syncfs", slow_syncfs)
    monkeypatch.setattr(_small, "publish_at", publish)
    summary = stage(str(src), str(dst), hash_files=True)
    assert summary.ok and read_tree(dst) == files

    syncs = [i for i, (what, _) in enumerate(events) if what == "syncfs"]
    wrote = {path: i for i, (what, path) in enumerate(events) if what == "wrote"}
    for i, (what, final) in enumerate(events):
        if what == "rename":
            written = wrote[final + PARTIAL_SUFFIX]
            assert any(written < s < i for s in syncs), f"{final} renamed before a syncfs"
    assert 1 < len(syncs) < len(files)  # grouped, and more than one group


def test_failed_syncfs_publishes_none_of_its_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writeback error reported by syncfs cannot be pinned to one file: no file of that group
    reaches its final name, no partial file stays, each failure names its file, and a re-run
    copies them."""
    files = small_files(30)
    src, dst = tmp_path / "src", tmp_path / "dst"
    fill(src, files)
    monkeypatch.setattr(_small, "syncs_as_a_whole", lambda path: True)

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(_small, "syncfs", broken)
    first = stage(str(src), str(dst))
    assert not first.ok and len(first.failed) == len(files)
    assert all("Input/output error" in f for f in first.failed)
    assert {k for k in files if any(k in f for f in first.failed)} == set(files)
    assert read_tree(dst) == {} and partials(dst) == []

    monkeypatch.undo()
    again = stage(str(src), str(dst))
    assert again.ok and again.files_copied == len(files)
    assert read_tree(dst) == files


def test_syncfs_stands_for_fsync_only_on_local_file_systems(tmp_path: Path) -> None:
    from stoker.store._posix import _release_at_least, fs_type, syncs_as_a_whole

    assert fs_type(tmp_path / "not" / "yet") == fs_type(tmp_path)  # nearest existing folder
    assert not syncs_as_a_whole(Path("/proc"))  # procfs: not a file system to trust with data
    assert syncs_as_a_whole(Path("/dev/shm")) == _release_at_least(os.uname().release, (5, 8))
    assert _release_at_least("6.18.44-fc-v782", (5, 8))
    assert _release_at_least("5.8.0", (5, 8)) and not _release_at_least("5.4.0-1-azure", (5, 8))
    assert not _release_at_least("weird", (5, 8))


def test_closing_the_writers_mid_gather_leaves_no_file_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file taken into a group that is still gathering when the writers close is cancelled,
    not left waiting for ever."""
    monkeypatch.setattr(_small, "syncs_as_a_whole", lambda path: True)  # so the group gathers
    monkeypatch.setattr(_small, "GATHER_S", 5.0)

    async def main() -> None:
        writer = _small.SmallWriter(PosixStore(tmp_path), 2)
        job = _small.Job(
            "a.bin", str(tmp_path / "a.bin"), _small.from_bytes(b"x", None, False, "t")
        )
        waiting = asyncio.create_task(writer.write(job))
        await asyncio.sleep(0.05)  # the group has its first file and is gathering
        await writer.close()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiting, 5)

    asyncio.run(main())
    assert not (tmp_path / "a.bin").exists()


def test_a_group_goes_when_it_is_full_or_when_the_gathering_time_is_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file that fills a gathering group sends it at once (it does not wait out GATHER_S);
    a group that never fills goes when GATHER_S is up."""
    monkeypatch.setattr(_small, "syncs_as_a_whole", lambda path: True)  # so the group gathers
    groups: list[int] = []
    real = _small.write_group
    monkeypatch.setattr(
        _small, "write_group", lambda jobs, *a: (groups.append(len(jobs)), real(jobs, *a))[1]
    )

    def job(name: str) -> _small.Job:
        return _small.Job(name, str(tmp_path / name), _small.from_bytes(b"x", None, False, "t"))

    async def full_group() -> float:
        writer = _small.SmallWriter(PosixStore(tmp_path), 1)
        start = time.monotonic()
        first = asyncio.create_task(writer.write(job("f000")))
        await asyncio.sleep(0.05)  # the group has its first file and is gathering
        rest = [writer.write(job(f"f{i:03d}")) for i in range(1, _small.GROUP_FILES)]
        await asyncio.wait_for(asyncio.gather(first, *rest), 30)
        await writer.close()
        return time.monotonic() - start

    monkeypatch.setattr(_small, "GATHER_S", 60.0)
    assert asyncio.run(full_group()) < 30 and groups == [_small.GROUP_FILES]

    async def lone_file() -> None:
        writer = _small.SmallWriter(PosixStore(tmp_path), 1)
        await asyncio.wait_for(writer.write(job("lone")), 30)
        await writer.close()

    monkeypatch.setattr(_small, "GATHER_S", 0.05)
    asyncio.run(lone_file())
    assert groups[-1] == 1 and (tmp_path / "lone").read_bytes() == b"x"
    assert len(list(tmp_path.iterdir())) == _small.GROUP_FILES + 1


@pytest.mark.parametrize("lanes", ["1", "0"])
@pytest.mark.parametrize("group_commit", [True, False])
def test_objects_fetched_whole_are_written_in_pieces_and_kept_only_if_their_hash_holds(
    tmp_path: Path, group_commit: bool, lanes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group's objects in memory are hashed side by side (MD5 in SIMD lanes, or hashlib's
    with STOKER_MD5_LANES=0) as they are written a piece at a time: an object whose MD5 is not
    its source's is never published and leaves no partial file; the group's others, of every
    length and with every kind of hash, are published whole with their own hashes."""
    monkeypatch.setenv("STOKER_MD5_LANES", lanes)
    piece = _posix.WRITE_PIECE
    good = [os.urandom(n) for n in (3 * piece + 7, 0, 1, piece, piece - 1, 5 * piece + 63)]
    bad = os.urandom(2 * piece + 1)
    damaged = bad[:piece] + bytes([bad[piece] ^ 1]) + bad[piece + 1 :]
    unchecked, unhashed = os.urandom(piece + 3), os.urandom(17)

    def job(name: str, data: bytes, md5: str | None, hash_files: bool = True) -> _small.Job:
        fill = _small.from_bytes(data, md5, hash_files, f"src/{name}")
        return _small.Job(name, str(tmp_path / name), fill)

    jobs = [job(f"good{i}", data, hashlib.md5(data).hexdigest()) for i, data in enumerate(good)]
    jobs += [
        job("bad", damaged, hashlib.md5(bad).hexdigest()),
        job("unchecked", unchecked, None),
        job("unhashed", unhashed, None, hash_files=False),
    ]
    outcomes = _small.write_group(jobs, group_commit)
    assert outcomes[: len(good)] == [hashlib.md5(data).hexdigest() for data in good]
    assert isinstance(outcomes[len(good)], ChecksumError) and "src/bad" in str(outcomes[len(good)])
    assert outcomes[-2] == f"xxh128:{xxhash.xxh3_128(unchecked).hexdigest()}"
    assert outcomes[-1] is None
    for i, data in enumerate(good):
        assert (tmp_path / f"good{i}").read_bytes() == data
    assert (tmp_path / "unchecked").read_bytes() == unchecked
    assert (tmp_path / "unhashed").read_bytes() == unhashed
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted([f"good{i}" for i in range(len(good))] + ["unchecked", "unhashed"])


def test_a_hash_that_fails_fails_its_files_and_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever stops the side-by-side MD5 (here no memory) fails the files it hashed, removes
    their partial files and publishes nothing of them; a file without MD5 in the group goes on."""

    def no_memory(hashers: list, datas: list) -> None:
        raise MemoryError("no room for a lane")

    monkeypatch.setattr(_small, "update_together", no_memory)
    data, other = os.urandom(3000), os.urandom(4000)
    jobs = [
        _small.Job(
            "a.bin",
            str(tmp_path / "a.bin"),
            _small.from_bytes(data, hashlib.md5(data).hexdigest(), True, "src/a.bin"),
        ),
        _small.Job("b.bin", str(tmp_path / "b.bin"), _small.from_bytes(other, None, True, "b")),
    ]
    outcomes = _small.write_group(jobs, True)
    assert isinstance(outcomes[0], MemoryError)
    assert outcomes[1] == f"xxh128:{xxhash.xxh3_128(other).hexdigest()}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.bin"]
