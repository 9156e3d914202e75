"""stage's durability choice (``--durability fsync|batch|none``) and its import of blobs
uploaded in blocks without Content-MD5, against a real Azurite: each file hashed as it arrives
(never read back), what each choice syncs, its default per file system, and a ``kill -9`` mid-run
then a resume: no file is ever recorded complete that differs from the source."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import xxhash

from azurite import Azurite, partials, read_tree
from kill_mid_run import kill_when
from stoker.errors import StageError
from stoker.stage import StageOptions, _boot, stage
from stoker.stage._manifest import Manifest
from stoker.store import _durable, _file_hasher, _unit_hasher, default_durability, list_digest

STOKER = str(Path(sys.executable).parent / "stoker")
MiB = 1 << 20
UNIT = 4 * MiB  # the resume unit (8 MiB blocks: 4 MiB units)


def upload_in_blocks(container: Any, files: dict[str, bytes], block: int = 3 * MiB) -> None:
    """Each file as Put Block + Put Block List, as AzCopy and the SDKs upload large files: the
    service keeps no Content-MD5 for it."""
    from azure.storage.blob import BlobBlock

    for key, data in files.items():
        blob = container.get_blob_client(key)
        ids = []
        for start in range(0, len(data), block):
            block_id = uuid.uuid4().hex
            blob.stage_block(block_id, data[start : start + block])
            ids.append(BlobBlock(block_id=block_id))
        blob.commit_block_list(ids)
        assert blob.get_blob_properties().content_settings.content_md5 is None, key


def expected_hash(data: bytes, unit: int = UNIT) -> str:
    """The hash list of ``data`` worked out here, independently of stoker's code."""
    units = [data[i : i + unit] for i in range(0, len(data), unit)] or [b""]
    joined = b"".join(xxhash.xxh3_128(u).digest() for u in units)
    return f"xxh128/{unit}:{xxhash.xxh3_128(joined).hexdigest()}"


def recorded(dst: Path) -> dict[str, str | None]:
    """The manifest's files recorded complete, with their hashes."""
    (path,) = (dst / ".stoker").glob("stage-*.sqlite")
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT key, hash FROM objects WHERE state = 1").fetchall())


def interrupted(dst: Path, key: str, boot: str | None = None) -> Path:
    """A whole staged file put back as an interrupted run leaves it: at its partial name, its
    manifest row not complete, units 0 and 1 recorded (in ``boot`` if given, else this one).
    Returns the partial file, for the test to spoil what it says was lost."""
    partial = dst / f"{key}.stoker-partial"
    (dst / key).rename(partial)
    (path,) = (dst / ".stoker").glob("stage-*.sqlite")
    manifest = Manifest(path)
    try:
        manifest.db.execute("UPDATE objects SET state = 0, hash = NULL")
        etag = manifest.db.execute("SELECT etag FROM objects").fetchone()[0]
        for i in (0, 1):
            manifest.block_done(key, etag, i)
        if boot is not None:
            manifest.db.execute("UPDATE meta SET v = ? WHERE k = 'boot'", (boot,))
    finally:
        manifest.close()
    return partial


def _any_recorded(dst: Path) -> bool:
    """Whether the manifest (while a run writes it) records a file complete yet."""
    for path in (dst / ".stoker").glob("stage-*.sqlite"):
        with contextlib.suppress(sqlite3.Error):
            with contextlib.closing(sqlite3.connect(path, timeout=0.1)) as db:
                return db.execute("SELECT 1 FROM objects WHERE state = 1").fetchone() is not None
    return False


class Syncs:
    """Counts what a run makes durable: fsyncs of regular files, and syncfs calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.files = self.whole = 0
        real_fsync, real_syncfs = os.fsync, _durable.syncfs

        def fsync(fd: int) -> None:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                self.files += 1
            real_fsync(fd)

        def syncfs(fd: int) -> None:
            self.whole += 1
            real_syncfs(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(_durable, "syncfs", syncfs)


@pytest.fixture
def no_read_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file without Content-MD5 is never read back to be hashed."""

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("a file without Content-MD5 was read back")

    monkeypatch.setattr(_unit_hasher.UnitHasher, "_read_back", refuse)
    monkeypatch.setattr(_file_hasher.FileHasher, "read_piece", refuse)
    monkeypatch.setattr(_file_hasher.FileHasher, "_read_back_block", refuse)


@pytest.mark.parametrize(
    ("durability", "fsync_up_to", "file_fsyncs", "syncfs_calls"),
    [
        ("fsync", 16, 2, 0),
        ("batch", 16, 2, 0),  # a sync point of few files: an fsync each, nobody else's data
        ("batch", 1, 0, 1),  # of more: one syncfs
        ("none", 16, 0, 0),
    ],
)
def test_blobs_without_md5_are_hashed_as_they_arrive_and_synced_as_chosen(
    blob_env: str,
    azurite: Azurite,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_read_back: None,
    durability: str,
    fsync_up_to: int,
    file_fsyncs: int,
    syncfs_calls: int,
) -> None:
    # Sizes off the unit and the upload's blocks: the last unit of each is short.
    files = {"m/a.bin": os.urandom(37 * MiB + 5), "m/b.bin": os.urandom(9 * MiB + 777)}
    upload_in_blocks(azurite.client(blob_env), files)
    monkeypatch.setattr(_durable, "syncs_as_a_whole", lambda _: True)  # (whatever /tmp is)
    monkeypatch.setattr(_durable, "FSYNC_UP_TO", fsync_up_to)
    syncs = Syncs(monkeypatch)
    dst = tmp_path / "dst"
    summary = stage(f"{blob_env}/m", str(dst), durability=durability)  # type: ignore[arg-type]
    assert summary.ok and summary.files_copied == 2, summary
    copied = {f"m/{k}": v for k, v in read_tree(dst).items()}
    assert copied == files
    assert partials(dst) == []
    hashes = recorded(dst)
    for key, data in files.items():
        name = key.removeprefix("m/")
        assert hashes[name] == expected_hash(data)
        assert list_digest(dst / name, UNIT) == hashes[name]  # (what a later check recomputes)
    assert (syncs.files, syncs.whole) == (file_fsyncs, syncfs_calls)


def test_a_resumed_file_reads_back_only_the_units_kept(
    blob_env: str, azurite: Azurite, tmp_path: Path
) -> None:
    """Units an earlier run finished did not come through this run: those, and only those,
    are read back for the file's hash, which is the same as an unbroken copy's."""
    data = os.urandom(21 * MiB)
    upload_in_blocks(azurite.client(blob_env), {"r/x.bin": data})
    src, dst = f"{blob_env}/r", tmp_path / "dst"
    first = stage(src, str(dst), durability="none")  # a whole copy: its manifest and hash
    whole_hash = recorded(dst)["x.bin"]
    assert first.ok and whole_hash == expected_hash(data)
    # As an interrupted run leaves it: units 0 and 1 written and recorded, the rest not.
    partial = interrupted(dst, "x.bin")
    with open(partial, "r+b") as f:
        f.seek(2 * UNIT)
        f.write(bytes(len(data) - 2 * UNIT))
    read_back: list[int] = []
    real = _unit_hasher.UnitHasher._read_back

    def counted(self: _unit_hasher.UnitHasher, start: int, end: int) -> bytes:
        read_back.append(start // UNIT)
        return real(self, start, end)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_unit_hasher.UnitHasher, "_read_back", counted)
        again = stage(src, str(dst), durability="none")
    assert again.ok and again.bytes_copied == len(data) - 2 * UNIT, again
    assert sorted(read_back) == [0, 1]
    assert (dst / "x.bin").read_bytes() == data
    assert recorded(dst)["x.bin"] == whole_hash


# ------------------------------------------------------------------------------ kill -9
@pytest.mark.parametrize("durability", ["batch", "fsync", "none"])
def test_kill_9_mid_run_then_resume_records_nothing_incomplete(
    blob_env: str, azurite: Azurite, tmp_path: Path, durability: str
) -> None:
    """A stage killed (-9) mid-run: every file the manifest records complete is the source's,
    byte for byte and by its recorded hash; the resume finishes the rest."""
    files = {f"k/f{i}.bin": os.urandom(6 * MiB + i * 4099) for i in range(8)}
    total = sum(len(d) for d in files.values())
    upload_in_blocks(azurite.client(blob_env), files)
    src, dst = f"{blob_env}/k", tmp_path / "dst"
    # Sync points every 12 MiB, so that a batch run has named and recorded some files when
    # it is killed; few requests at once, so that the kill comes mid-run.
    code = (
        "import sys; import stoker.stage._engine as e; e.SYNC_EVERY = 12 << 20; "
        "from stoker.stage import stage; "
        "stage(sys.argv[1], sys.argv[2], concurrency=2, durability=sys.argv[3])"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, src, str(dst), durability],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    # (batch: once a sync point has named some, which waits on a shared disk)
    kill_when(
        proc,
        dst,
        lambda landed: landed >= total * 6 // 10 and (durability != "batch" or _any_recorded(dst)),
        timeout_s=60,
        poll_s=0.01,
    )

    done = recorded(dst)
    assert len(done) < len(files), "the kill should come before every file is recorded"
    if durability == "batch":
        assert done, "a sync point should have named and recorded some files before the kill"
    for key, digest in done.items():
        data = files[f"k/{key}"]
        assert (dst / key).read_bytes() == data, f"{key} recorded complete but differs"
        assert digest == expected_hash(data)
    for key, data in read_tree(dst).items():  # nothing at a final name is torn either
        assert data == files[f"k/{key}"], f"{key} at its final name but not complete"

    summary = stage(src, str(dst), concurrency=2, durability=durability)  # type: ignore[arg-type]
    assert summary.ok, summary.failed
    assert {f"k/{k}": v for k, v in read_tree(dst).items()} == files
    assert partials(dst) == []
    # Each file is recorded with its hash, or (named before the kill, its mark not yet
    # committed) with none: the resume found it at the destination whole, as the source's.
    after = recorded(dst)
    assert sorted(after) == sorted(k.removeprefix("k/") for k in files)
    for key, digest in after.items():
        assert digest in (None, expected_hash(files[f"k/{key}"])), key


def test_a_stopped_batch_run_names_and_records_what_it_finished(
    blob_env: str, azurite: Azurite, tmp_path: Path
) -> None:
    """SIGTERM (a job being stopped) mid-run under ``batch``: the files finished and waiting
    for a sync point are made durable, named and recorded on the way out, not left behind."""
    files = {f"t/f{i}.bin": os.urandom(6 * MiB + i) for i in range(6)}
    upload_in_blocks(azurite.client(blob_env), files)
    dst = tmp_path / "dst"
    env = dict(os.environ, AZURE_STORAGE_CONNECTION_STRING=azurite.connection_string)
    argv = [STOKER, "stage", f"{blob_env}/t", str(dst), "--concurrency", "2"]
    proc = subprocess.Popen(
        [*argv, "--durability", "batch"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    whole: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and len(whole) < 2:
            whole = [
                p.name
                for p in partials(dst)
                if dst.exists()
                for st in [p.stat()]
                if st.st_blocks * 512 >= st.st_size > 0
            ]
            time.sleep(0.01)
        alive = proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert alive and len(whole) >= 2, f"the run ended first: {err.decode()[-2000:]}"
    assert proc.returncode == 143, err.decode()[-2000:]
    named = read_tree(dst)
    assert named, "the files finished before the signal should be named on the way out"
    assert len(named) < len(files)
    for key, data in named.items():
        assert data == files[f"t/{key}"]
    assert recorded(dst) == {key: expected_hash(files[f"t/{key}"]) for key in named}


# ------------------------------------------------------------------------------ units and boots
def test_units_recorded_in_another_boot_are_forgotten(tmp_path: Path) -> None:
    manifest = Manifest(tmp_path / "m.sqlite")
    try:
        assert _boot.forget_units_of_another_boot(manifest, "boot-1") == 0
        for i in range(3):
            manifest.block_done("a.bin", "e1", i)
        # The same boot (a kill -9, say): the units are in the page cache still.
        assert _boot.forget_units_of_another_boot(manifest, "boot-1") == 0
        assert manifest.blocks_done("a.bin", "e1") == {0, 1, 2}
        # Another boot: a power cut may have lost them.
        assert _boot.forget_units_of_another_boot(manifest, "boot-2") == 3
        assert manifest.blocks_done("a.bin", "e1") == set()
        manifest.block_done("a.bin", "e1", 0)
        assert _boot.forget_units_of_another_boot(manifest, "boot-2") == 0
        assert manifest.blocks_done("a.bin", "e1") == {0}
    finally:
        manifest.close()


@pytest.mark.parametrize("rebooted", [False, True])
def test_a_partial_file_resumes_from_its_units_only_in_the_boot_that_wrote_them(
    blob_env: str, azurite: Azurite, tmp_path: Path, rebooted: bool
) -> None:
    """Units recorded, then the machine went down: they may never have reached the disk (here
    zeros stand for what a power cut lost), so the whole file is fetched again. In the same
    boot (a kill -9) they are kept."""
    data = os.urandom(17 * MiB)
    upload_in_blocks(azurite.client(blob_env), {"b/y.bin": data})
    src, dst = f"{blob_env}/b", tmp_path / "dst"
    assert stage(src, str(dst), durability="none").ok  # (its manifest, stamped with this boot)
    partial = interrupted(dst, "y.bin", boot="an-earlier-boot" if rebooted else None)
    with open(partial, "r+b") as f:  # units 0 and 1 "recorded" but lost
        f.write(bytes(2 * UNIT))
    again = stage(src, str(dst))
    assert again.ok, again.failed
    if rebooted:
        assert again.bytes_copied == len(data)
        assert (dst / "y.bin").read_bytes() == data
        assert recorded(dst)["y.bin"] == expected_hash(data)
    else:  # the units were trusted: what the partial held is what was kept
        assert again.bytes_copied == len(data) - 2 * UNIT
        assert (dst / "y.bin").read_bytes()[: 2 * UNIT] == bytes(2 * UNIT)


def test_this_boot_has_an_id_on_linux() -> None:
    if not _boot.BOOT_ID.exists():  # (another system: units are then trusted, as before)
        assert _boot.boot_id() is None
        return
    assert _boot.boot_id() == _boot.BOOT_ID.read_text().strip() != ""


# ------------------------------------------------------------------------------ the choice
def test_default_durability_follows_the_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_durable, "syncs_as_a_whole", lambda _: True)  # ext4, XFS, ... (local)
    assert default_durability(tmp_path) == "batch"
    monkeypatch.setattr(_durable, "syncs_as_a_whole", lambda _: False)  # NFS, Lustre, FUSE
    assert default_durability(tmp_path) == "fsync"


def test_the_run_says_which_durability_it_used(
    blob_env: str, azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upload_in_blocks(azurite.client(blob_env), {"s/z.bin": os.urandom(9 * MiB)})
    for whole, chosen, used in (
        (True, None, "batch"),
        (False, None, "fsync"),
        (True, "none", "none"),
    ):
        monkeypatch.setattr(_durable, "syncs_as_a_whole", lambda _, w=whole: w)
        dst = tmp_path / f"dst-{whole}-{chosen}"
        summary = stage(f"{blob_env}/s", str(dst), durability=chosen)  # type: ignore[arg-type]
        assert summary.ok and summary.durability == used
        assert summary.to_dict()["durability"] == used  # (in --json's last line too)


def test_a_bad_durability_is_one_clear_error() -> None:
    with pytest.raises(StageError, match=r"^--durability 'always': use one of fsync, batch, none"):
        StageOptions(durability="always")  # type: ignore[arg-type]
    assert StageOptions(durability="none").durability == "none"


def test_the_command_refuses_a_bad_durability_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    proc = subprocess.run(
        [STOKER, "stage", str(tmp_path / "src"), str(tmp_path / "dst"), "--durability", "later"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--durability 'later'" in lines[0], proc.stderr
