"""stage, verify and cache pull under what a careless or unlucky user does to them: a full or
read-only disk, a missing folder, bad credentials, names a file system cannot hold, filters
that take nothing, Ctrl-C, two runs into one destination, and ``--delete`` (issue 25, parts 1
and 2). Where it is about exit codes and output, the real CLI runs in a child process; where it
needs Blob, against Azurite. Each error must be one line that names the thing and what to do,
exit status 2 (130 for Ctrl-C), no traceback, and nothing already written lost."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from azurite import ACCOUNT_KEY, Azurite, blob_tree, partials, read_tree
from stoker.cli import app
from stoker.errors import StageError, StoreError
from stoker.stage import Reporter, stage
from stoker.stage import _guard as guard
from stoker.store import PosixStore, _posix

STOKER = str(Path(sys.executable).parent / "stoker")
MiB = 1 << 20
runner = CliRunner()


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Any:
    """The real ``stoker`` in a child process: (exit status, stdout, stderr)."""
    proc = subprocess.run(
        [STOKER, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )
    return proc.returncode, proc.stdout, proc.stderr


def one_error(stderr: str) -> str:
    """The run's one error line (and no traceback)."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def tree(root: Path, files: dict[str, bytes]) -> Path:
    for key, data in files.items():
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def dataset(n: int = 12, size: int = 10_000) -> dict[str, bytes]:
    return {f"part-{i % 3}/{i:03d}.bin": os.urandom(size + i) for i in range(n)}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (needs root and mount(2); else the test is skipped)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True
    )
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def remount(mnt: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(mnt)], check=True)


# ------------------------------------------------------------------------------ full disk
def test_a_full_disk_is_one_line_and_a_rerun_with_space_completes(
    tmp_path: Path, small_disk: Path
) -> None:
    """The disk fills while files are written, or while the manifest is (SQLite: "database or
    disk is full", which was a traceback): each is one line, exit 2; with space, the same
    command finishes and what was written before is intact."""
    files = {**dataset(8, 300_000), "big.bin": os.urandom(3 * MiB)}
    src = tree(tmp_path / "src", files)
    dst = small_disk / "dst"
    seen = set()
    for leave in (2_000, 12_000, 40_000, 100_000, 1_000_000):  # bytes left free before the run
        shutil.rmtree(dst, ignore_errors=True)
        filler = small_disk / "filler"
        filler.unlink(missing_ok=True)
        with open(filler, "wb") as f:  # (tmpfs counts pages: fill to what is free, less leave)
            st = os.statvfs(small_disk)
            f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
        code, out, err = cli("stage", str(src), str(dst))
        assert code == 2, (leave, out, err)
        line = one_error(err)
        assert "no space left" in line and str(dst) in line, line
        assert "OperationalError" not in err and "sqlite3" not in err
        seen.add("manifest" in line)
    assert True in seen  # the manifest's writes met the full disk (a traceback, before)
    kept = read_tree(dst)
    for key, data in kept.items():
        assert data == files[key]  # nothing at a final name is torn
    (small_disk / "filler").unlink()
    remount(small_disk, "size=16m")
    code, out, err = cli("stage", str(src), str(dst))
    assert code == 0, err
    assert read_tree(dst) == files and partials(dst) == []


def test_verify_with_a_full_scratch_disk_is_one_line(tmp_path: Path, small_disk: Path) -> None:
    files = dataset(200, 20_000)
    src = tree(tmp_path / "src", files)
    assert stage(str(src), str(tmp_path / "dst")).ok
    with open(small_disk / "filler", "wb") as f:
        st = os.statvfs(small_disk)
        f.write(b"\0" * (st.f_bavail * st.f_frsize - 8192))
    code, _, err = cli("verify", str(src), str(tmp_path / "dst"), env={"TMPDIR": str(small_disk)})
    assert code == 2, err
    line = one_error(err)
    assert "no space left" in line and "TMPDIR" in line, line


# ------------------------------------------------------------------------------ read-only
def test_a_read_only_destination_stops_once(tmp_path: Path, small_disk: Path) -> None:
    """Mounted read-only: one line at the start (it printed one error per file), with the
    manifest elsewhere too; nothing of the destination changes."""
    src = tree(tmp_path / "src", dataset())
    (small_disk / "dst").mkdir()
    (small_disk / "dst" / "old.txt").write_text("keep")
    remount(small_disk, "ro")
    for extra in ([], ["--state-dir", str(tmp_path / "state")], ["--delete", "--yes"]):
        code, out, err = cli("stage", str(src), str(small_disk / "dst"), *extra)
        assert code == 2, (extra, out, err)
        line = one_error(err)
        assert "read-only file system" in line and str(small_disk / "dst") in line, line
    assert read_tree(small_disk / "dst") == {"old.txt": b"keep"}
    code, _, err = cli("cache", "pull", str(src), str(small_disk / "models"))
    assert code == 2
    line = one_error(err)
    assert "read-only" in line and str(small_disk / "models") in line, line


def test_a_disk_turning_read_only_mid_run_stops_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write failing alike (EROFS, EACCES) is one error for the run, not one per file."""
    src = tree(tmp_path / "src", dataset(40))
    real_open = os.open

    class ReadOnlyAfterStart:
        def __getattr__(self, attr: str) -> Any:
            if attr != "open":
                return getattr(os, attr)

            def refuse(path: Any, flags: int, *args: Any) -> int:
                if str(path).endswith(".stoker-partial"):
                    raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
                return real_open(path, flags, *args)

            return refuse

    monkeypatch.setattr(_posix, "os", ReadOnlyAfterStart())
    out = runner.invoke(app, ["stage", str(src), str(tmp_path / "dst")])
    assert out.exit_code == 2, out.output
    assert out.stderr.count("read-only") == 1, out.stderr
    assert "cannot write" in out.stderr and "remount it read-write" in out.stderr


def test_a_destination_this_user_may_not_write_stops_once(tmp_path: Path) -> None:
    """As another user (root ignores permissions): a destination that user may not write is
    one line at the start; a folder inside it that it may not write stops the run once."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run as another user")
    base = Path(tempfile.mkdtemp(prefix="stoker-perm-", dir="/tmp"))
    try:
        base.chmod(0o755)
        src = tree(base / "src", dataset(30))
        for path in [base / "src", *(base / "src").rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        (base / "theirs").mkdir()  # root's, 755
        (base / "mine").mkdir()
        (base / "mine" / "part-1").mkdir()  # root's, inside a folder nobody owns
        os.chown(base / "mine", 65534, 65534)
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", STOKER]
        env = {**os.environ, "XDG_CACHE_HOME": str(base / "cache"), "HOME": str(base)}
        for dst, said in (
            (base / "theirs" / "dst", "permission denied"),
            (base / "mine", "permission denied writing"),
        ):
            proc = subprocess.run(
                [*as_nobody, "stage", str(src), str(dst)],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert proc.returncode == 2, proc.stderr
            line = one_error(proc.stderr)
            assert said in line and "uid 65534" in line, line
        assert not list((base / "theirs").iterdir())
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ------------------------------------------------------------------------------ paths
def test_a_missing_destination_parent_is_refused_and_nothing_made(tmp_path: Path) -> None:
    src = tree(tmp_path / "src", dataset())
    dst = tmp_path / "not-mounted" / "data"
    code, out, err = cli("stage", str(src), str(dst))
    assert code == 2, out
    line = one_error(err)
    assert str(tmp_path / "not-mounted") in line and "mkdir -p" in line, line
    assert not (tmp_path / "not-mounted").exists()
    code, _, err = cli("cache", "pull", str(src), str(tmp_path / "no-mount" / "models"))
    assert code == 2 and "does not exist" in one_error(err)
    assert not (tmp_path / "no-mount").exists()
    # the destination itself may be new
    assert cli("stage", str(src), str(tmp_path / "new"))[0] == 0


# ------------------------------------------------------------------------------ credentials
def test_bad_and_malformed_keys_are_one_line_on_every_verb(
    azurite: Azurite, blob_env: str, tmp_path: Path
) -> None:
    src = tree(tmp_path / "src", dataset(3))
    assert stage(str(src), f"{blob_env}/ds").ok
    good = os.environ["AZURE_STORAGE_CONNECTION_STRING"]
    malformed = ACCOUNT_KEY[:40] + "!" + ACCOUNT_KEY[41:]  # right length, not base64
    wrong = "A" * 86 + "=="  # base64, but not the account's key
    assert len(malformed) == len(wrong) == len(ACCOUNT_KEY)
    for key, said in ((malformed, "not an account key"), (wrong, "403")):
        env = {"AZURE_STORAGE_CONNECTION_STRING": good.replace(ACCOUNT_KEY, key)}
        for args in (
            ["stage", f"{blob_env}/ds", str(tmp_path / "down")],
            ["stage", str(src), f"{blob_env}/up"],
            ["verify", f"{blob_env}/ds", str(src)],
            ["cache", "pull", f"{blob_env}/ds", str(tmp_path / "cache")],
        ):
            code, out, err = cli(*args, env=env)
            assert code == 2, (args, out, err)
            line = one_error(err)
            assert said in line, line
            assert key not in out + err and ACCOUNT_KEY not in out + err


# ------------------------------------------------------------------------------ names
def test_names_a_file_system_cannot_hold_are_named_and_the_rest_copied(
    azurite: Azurite, blob_env: str, tmp_path: Path
) -> None:
    """A blob ``a`` beside ``a/b`` (a file and a folder of one name), a name over 255 bytes:
    each is one line, the others are copied, exit 1, and a re-run is not worse."""
    container = azurite.client(blob_env)
    good = {"ok/1.bin": b"1", "ok/2.bin": b"2"}
    for key, data in {**good, "clash": b"file", "clash/inner": b"inner"}.items():
        container.upload_blob(key, data)
    container.upload_blob("n" * 300 + ".bin", b"long")
    dst = tmp_path / "dst"
    code, out, err = cli("stage", blob_env, str(dst))
    assert code == 1, (out, err)
    assert "Traceback" not in err
    assert err.count("clash") == 1, err  # one of the two could not be written, named once
    assert "longer than the file system's 255 bytes" in err
    got = read_tree(dst)
    assert {k: got[k] for k in good} == good
    assert got.get("clash") == b"file" or got.get("clash/inner") == b"inner"
    assert cli("stage", blob_env, str(dst))[0] == 1


# ------------------------------------------------------------------------------ filters
def test_filters_that_take_nothing_are_an_error_and_delete_nothing(tmp_path: Path) -> None:
    files = dataset()
    src, dst = tree(tmp_path / "src", files), tmp_path / "dst"
    assert stage(str(src), str(dst)).ok
    for verb in (["stage"], ["stage", "--delete", "--yes"], ["verify"]):
        code, out, err = cli(verb[0], str(src), str(dst), *verb[1:], "--include", "*.parquet")
        assert code == 2, out
        line = one_error(err)
        assert "--include '*.parquet'" in line and "none of the 12 objects" in line, line
    assert read_tree(dst) == files
    # A share that takes nothing is a share (no error), but never a reason to delete.
    with pytest.raises(StageError, match="nothing was deleted"):
        stage(
            str(tree(tmp_path / "one", {"only.bin": b"x"})),
            str(dst),
            delete=True,
            rank=_empty_rank("only.bin"),
            world_size=2,
        )
    assert read_tree(dst) == files


def _empty_rank(key: str) -> int:
    from stoker.shard import owns

    return 1 if owns(key, 0, 2) else 0


# ------------------------------------------------------------------------------ Ctrl-C
@pytest.mark.parametrize(
    ("signum", "status", "said", "sigint"),
    [
        (signal.SIGINT, 130, "interrupted", signal.SIG_DFL),
        (signal.SIGTERM, 143, "stopped (SIGTERM)", signal.SIG_DFL),
        (signal.SIGTERM, 143, "stopped (SIGTERM)", signal.SIG_IGN),  # `nohup stoker ... &`
    ],
)
def test_ctrl_c_mid_transfer_is_one_line_exit_130_and_resumes(
    azurite: Azurite,
    blob_env: str,
    tmp_path: Path,
    signum: int,
    status: int,
    said: str,
    sigint: Any,
) -> None:
    """SIGINT while blocks arrive: the run stops soon (the files in flight are not finished
    first), says so in one line, exits 130, and the same command resumes from the blocks
    already in. SIGTERM (a pod stopped) the same, exit 143, also where the run was started
    with Ctrl-C ignored (a background job of a script). The child's SIGINT is set as the case
    says, whatever the test runner's is (a runner in the background ignores it)."""
    files = {f"d/{i}.bin": os.urandom(6 * MiB) for i in range(8)}
    total = sum(map(len, files.values()))
    container = azurite.client(blob_env)
    for key, data in files.items():
        container.upload_blob(key, data, max_concurrency=4)
    dst = tmp_path / "dst"
    # The real CLI, each block's progress slowed down so that the copy is surely under way.
    slowed = (
        "import sys, time\n"
        "from stoker.stage import _progress\n"
        "advance = _progress.JsonReporter.advance\n"
        "def slow(self, n):\n"
        "    advance(self, n)\n"
        "    time.sleep(0.1)\n"
        "_progress.JsonReporter.advance = slow\n"
        "from stoker.cli import main\n"
        "sys.argv[0] = 'stoker'\n"
        "main()\n"
    )
    args = [blob_env, str(dst), "--json", "--block-size", "1 MiB", "--concurrency", "2"]
    proc = subprocess.Popen(
        [sys.executable, "-c", slowed, "stage", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # a progress line that says some blocks are in
            event = json.loads(line)
            if event.get("event") == "progress" and event["bytes"] >= 4 * MiB:
                break
        else:
            raise AssertionError(f"no progress: {proc.communicate()}")
        sent = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == status, err
    line = one_error(err)
    assert said in line and "same command continues" in line
    assert json.loads(out.splitlines()[-1])["fatal"] is True
    assert took < 3, f"Ctrl-C took {took:.1f} s to stop the run"
    for key, data in read_tree(dst).items():
        assert data == files[key]  # what is at a final name is whole
    again = stage(blob_env, str(dst), block_size=MiB)
    assert again.ok and read_tree(dst) == files and partials(dst) == []
    assert again.bytes_copied <= total - 4 * MiB  # it resumed, not restarted


# ------------------------------------------------------------------------------ two runs
def test_a_second_run_into_one_destination_is_refused_naming_the_first(
    azurite: Azurite, blob_env: str, tmp_path: Path
) -> None:
    """Local and Blob destinations alike: the second run stops at once, naming the PID of the
    first, which finishes whole; the lock goes with the first run."""
    files = dataset(6)
    src = tree(tmp_path / "src", files)

    class SecondRunAtFirstBatch(Reporter):
        """Starts the same copy (in a thread) as the first batch of this one is listed."""

        def __init__(self, dst: str) -> None:
            self.dst = dst
            self.second: list[Any] = []

        def grow(self, n: int, nbytes: int) -> None:
            if not self.second:
                thread = threading.Thread(target=self.run)
                thread.start()
                thread.join()

        def run(self) -> None:
            try:
                self.second.append(stage(str(src), self.dst))
            except StageError as exc:
                self.second.append(exc)

    for dst in (str(tmp_path / "dst"), f"{blob_env}/up"):
        reporter = SecondRunAtFirstBatch(dst)
        first = stage(str(src), dst, reporter=reporter)
        assert first.ok and first.files_copied == 6
        [refused] = reporter.second
        assert isinstance(refused, StageError), refused
        assert f"PID {os.getpid()}" in str(refused) and "another stoker run" in str(refused)
        assert stage(str(src), dst).ok  # released
    assert read_tree(tmp_path / "dst") == files
    assert blob_tree(azurite.client(blob_env), "up/") == files


def test_the_shares_of_one_job_run_side_by_side_but_not_twice(tmp_path: Path) -> None:
    notes: list[str] = []
    folder = tmp_path / ".stoker"
    with guard.destination_lock(folder, "lock", "DST", (0, 2), notes):
        with guard.destination_lock(folder, "lock", "DST", (1, 2), notes):
            pass
        for share in ((0, 2), (0, 1)):
            with pytest.raises(StageError, match=f"PID {os.getpid()}"):
                with guard.destination_lock(folder, "lock", "DST", share, notes):
                    pass
    with guard.destination_lock(folder, "lock", "DST", (0, 1), notes):
        pass
    assert notes == []


def test_two_cli_runs_at_once(tmp_path: Path) -> None:
    """The first run is held inside its copy (by a reporter that waits for a file), so the
    second surely meets it; it is refused, naming the first's PID, and the first finishes."""
    files = dataset(6)
    src, dst, go = tree(tmp_path / "src", files), tmp_path / "dst", tmp_path / "go"
    code = (
        "import sys, time, pathlib\n"
        "from stoker.stage import Reporter, stage\n"
        "class Held(Reporter):\n"
        "    def start(self):\n"
        "        print('started', flush=True)\n"
        "        while not pathlib.Path(sys.argv[3]).exists(): time.sleep(0.02)\n"
        "assert stage(sys.argv[1], sys.argv[2], reporter=Held()).ok\n"
    )
    first = subprocess.Popen(
        [sys.executable, "-c", code, str(src), str(dst), str(go)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout is not None and first.stdout.readline() == "started\n"
        result = cli("stage", str(src), str(dst))
        go.touch()
        _, first_err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    code_, _, err = result
    assert code_ == 2
    line = one_error(err)
    assert f"PID {first.pid}" in line and str(dst) in line and "wait for it" in line, line
    assert first.returncode == 0, first_err
    assert read_tree(dst) == files


# ------------------------------------------------------------------------------ --delete
def _mirror_setup(tmp_path: Path, extra: int) -> tuple[Path, Path, dict[str, bytes]]:
    files = dataset()
    src, dst = tree(tmp_path / "src", files), tmp_path / "dst"
    assert stage(str(src), str(dst)).ok
    for i in range(extra):  # files stoker never wrote, and that the source does not have
        (dst / "part-0" / f"stray-{i}.txt").write_text("stray")
    return src, dst, files


def test_dry_run_delete_names_every_file(tmp_path: Path) -> None:
    src, dst, files = _mirror_setup(tmp_path, 8)
    code, out, err = cli("stage", str(src), str(dst), "--delete", "--dry-run")
    assert code == 0, err
    named = [
        line.removeprefix("would delete ")
        for line in out.splitlines()
        if line.startswith("would delete ")
    ]
    assert named == [f"part-0/stray-{i}.txt" for i in range(8)]
    assert "would delete 8;" in out
    code, out, _ = cli("stage", str(src), str(dst), "--delete", "--dry-run", "--json")
    [summary] = [json.loads(line) for line in out.splitlines()]
    assert summary["deleted"] == named and summary["files_deleted"] == 8
    assert len(read_tree(dst)) == 12 + 8  # a dry run deletes nothing


def test_many_deletions_need_yes_without_a_terminal(tmp_path: Path) -> None:
    src, dst, files = _mirror_setup(tmp_path, 8)
    (src / "new.bin").write_bytes(b"new")
    code, out, err = cli("stage", str(src), str(dst), "--delete")
    assert code == 2, out
    line = one_error(err)
    assert "--yes" in line and "8 files" in line and "nothing was deleted" in line, line
    assert len(read_tree(dst)) == 12 + 8 + 1  # the copy is done, nothing deleted
    code, out, err = cli("stage", str(src), str(dst), "--delete", "--yes", "--json")
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    deleted = sorted(e["key"] for e in events if e["event"] == "delete")
    assert deleted == [f"part-0/stray-{i}.txt" for i in range(8)]
    assert events[-1]["deleted"] == deleted and events[-1]["files_deleted"] == 8
    assert read_tree(dst) == {**files, "new.bin": b"new"}


def test_a_few_deletions_go_ahead_each_named(tmp_path: Path) -> None:
    src, dst, files = _mirror_setup(tmp_path, 2)
    code, out, err = cli("stage", str(src), str(dst), "--delete")
    assert code == 0, err
    assert "deleting part-0/stray-0.txt" in err and "deleting part-0/stray-1.txt" in err
    assert "2 deleted" in out
    assert read_tree(dst) == files


@pytest.mark.parametrize(("answer", "kept"), [("n\n", True), ("y\n", False), ("", True)])
def test_a_terminal_is_asked_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, kept: bool
) -> None:
    from stoker.cli import stage as cli_stage

    src, dst, files = _mirror_setup(tmp_path, 7)
    monkeypatch.setattr(cli_stage, "interactive", lambda: True)
    out = runner.invoke(app, ["stage", str(src), str(dst), "--delete"], input=answer)
    assert out.exit_code == 0, out.output
    assert "Delete these 7 files" in out.stderr and "part-0/stray-6.txt" in out.stderr
    assert len(read_tree(dst)) == 12 + (7 if kept else 0)
    if kept:
        assert "deleting them was declined" in out.stderr


def test_delete_mirrors_within_the_selection_only(tmp_path: Path) -> None:
    """The rule: --delete removes every file in the destination that the source does not
    have, whoever wrote it, within --include/--exclude/--rank; nothing outside them, nor
    stoker's own state."""
    src, dst, files = _mirror_setup(tmp_path, 0)
    (dst / "part-0" / "stray.txt").write_text("stray")
    (dst / "part-1" / "notes.md").write_text("mine")
    summary = stage(str(src), str(dst), delete=True, include=("part-0/*",))
    assert summary.deleted == ["part-0/stray.txt"]
    assert (dst / "part-1" / "notes.md").read_text() == "mine"
    assert (dst / ".stoker").is_dir()
    assert stage(str(src), str(dst), delete=True).deleted == ["part-1/notes.md"]
    assert read_tree(dst) == files


def test_nothing_is_deleted_when_the_source_listing_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst, files = _mirror_setup(tmp_path, 3)
    real = PosixStore.list

    async def fails_half_way(self: PosixStore) -> Any:
        if self.root != src:
            async for batch in real(self):
                yield batch
            return
        async for batch in real(self):
            yield batch[:4]
            raise StoreError(f"listing {self}: the connection dropped")

    monkeypatch.setattr(PosixStore, "list", fails_half_way)
    with pytest.raises(StoreError, match="connection dropped"):
        stage(str(src), str(dst), delete=True)
    assert len(read_tree(dst)) == 12 + 3
    monkeypatch.undo()
    (src / "part-0").rename(tmp_path / "gone")
    shutil.rmtree(src)
    src.mkdir()  # a source that lists nothing at all
    code, _, err = cli("stage", str(src), str(dst), "--delete", "--yes")
    assert code == 2 and "lists no objects" in one_error(err)
    assert len(read_tree(dst)) == 12 + 3


def test_delete_on_blob_names_each_deletion(
    azurite: Azurite, blob_env: str, tmp_path: Path
) -> None:
    files = dataset(6)
    src = tree(tmp_path / "src", files)
    container = azurite.client(blob_env)
    assert stage(str(src), f"{blob_env}/m").ok
    container.upload_blob("m/stray.bin", b"written by another tool")
    container.upload_blob("other/keep.bin", b"outside the prefix")
    code, out, err = cli("stage", str(src), f"{blob_env}/m", "--delete", "--dry-run")
    assert code == 0 and "would delete stray.bin" in out, err
    code, out, err = cli("stage", str(src), f"{blob_env}/m", "--delete", "--json")
    assert code == 0, err
    assert {"event": "delete", "key": "stray.bin"} in [json.loads(x) for x in out.splitlines()]
    assert blob_tree(container, "m/") == files
    assert blob_tree(container, "other/") == {"keep.bin": b"outside the prefix"}


def test_delete_deletes_nothing_when_a_source_name_was_refused(tmp_path: Path) -> None:
    """A name that is not UTF-8 is refused, so it is not in the manifest: its copy at the
    destination (another tool wrote it) would look extra. --delete deletes nothing then."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    for root in (src, dst):
        root.mkdir()
        with open(os.path.join(os.fsencode(root), b"caf\xe9.txt"), "wb") as f:  # Latin-1
            f.write(b"x")
    (src / "ok.txt").write_bytes(b"ok")
    (dst / "stray.txt").write_bytes(b"stray")
    dry = stage(str(src), str(dst), delete=True, dry_run=True)
    assert dry.deleted == [] and any("deleted nothing" in n for n in dry.notes)
    code, out, err = cli("stage", str(src), str(dst), "--delete", "--yes")
    assert code == 1, (out, err)
    assert "the name is not UTF-8" in err and "--delete deleted nothing" in err
    assert (dst / "stray.txt").exists() and (dst / "ok.txt").read_bytes() == b"ok"
    assert os.path.exists(os.path.join(os.fsencode(dst), b"caf\xe9.txt"))


def test_a_destination_name_that_is_not_utf8_is_kept_and_said(tmp_path: Path) -> None:
    files = dataset(3)
    src, dst = tree(tmp_path / "src", files), tmp_path / "dst"
    dst.mkdir()
    with open(os.path.join(os.fsencode(dst), b"caf\xe9.txt"), "wb") as f:
        f.write(b"x")
    summary = stage(str(src), str(dst), delete=True)
    assert summary.ok and summary.files_copied == 3 and summary.deleted == []
    assert any("not UTF-8" in note for note in summary.notes)
    assert os.path.exists(os.path.join(os.fsencode(dst), b"caf\xe9.txt"))
    assert stage(str(src), str(dst)).files_skipped == 3  # a re-run's scan copes with it too


def test_the_delete_question_and_refusal_show_no_sas(monkeypatch: pytest.MonkeyPatch) -> None:
    from stoker.cli import stage as cli_stage

    url = "https://acct.blob.core.windows.net/c/p?sv=2021-08-06&sig=SECRETSIG0123456789"
    keys = [f"k{i}" for i in range(9)]
    monkeypatch.setattr(cli_stage, "interactive", lambda: False)
    with pytest.raises(StageError) as refused:
        cli_stage._confirm(url, False, False, Reporter())(keys)
    assert "SECRETSIG" not in str(refused.value) and "--yes" in str(refused.value)
    asked: list[str] = []
    monkeypatch.setattr(cli_stage, "interactive", lambda: True)
    monkeypatch.setattr(cli_stage.typer, "confirm", lambda text, **_: asked.append(text) or True)
    assert cli_stage._confirm(url, False, False, Reporter())(keys) is True
    assert asked and "SECRETSIG" not in asked[0] and "acct.blob.core.windows.net/c/p" in asked[0]


def test_a_killed_run_leaves_no_lock_behind(tmp_path: Path) -> None:
    files = dataset(4)
    src, dst = tree(tmp_path / "src", files), tmp_path / "dst"
    code = (
        "import sys, time\n"
        "from stoker.stage import Reporter, stage\n"
        "class Stuck(Reporter):\n"
        "    def start(self):\n"
        "        print('started', flush=True)\n"
        "        time.sleep(600)\n"
        "stage(sys.argv[1], sys.argv[2], reporter=Stuck())\n"
    )
    stuck = subprocess.Popen(
        [sys.executable, "-c", code, str(src), str(dst)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert stuck.stdout is not None and stuck.stdout.readline() == "started\n"
        assert cli("stage", str(src), str(dst))[0] == 2  # held
        stuck.kill()
        stuck.wait(timeout=30)
    finally:
        if stuck.poll() is None:
            stuck.kill()
    code_, out, err = cli("stage", str(src), str(dst))
    assert code_ == 0, err
    assert read_tree(dst) == files


def test_verify_of_a_copy_this_user_may_not_read_is_one_line(tmp_path: Path) -> None:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run as another user")
    base = Path(tempfile.mkdtemp(prefix="stoker-perm-", dir="/tmp"))
    try:
        base.chmod(0o755)
        files = dataset(4)
        src, dst = tree(base / "src", files), tree(base / "dst", files)
        for path in [*src.rglob("*"), *dst.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        (dst / "part-1" / "001.bin").chmod(0o600)  # root's alone
        proc = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                STOKER,
                "verify",
                str(src),
                str(dst),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HOME": str(base), "XDG_CACHE_HOME": str(base / "cache")},
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr
        line = one_error(proc.stderr)
        assert "cannot read" in line and "001.bin" in line and "Permission denied" in line, line
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_too_many_open_files_stops_the_run_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tree(tmp_path / "src", dataset(40))
    real_open = os.open

    class NoMoreFiles:
        def __getattr__(self, attr: str) -> Any:
            if attr != "open":
                return getattr(os, attr)

            def refuse(path: Any, flags: int, *args: Any) -> int:
                if str(path).endswith(".stoker-partial"):
                    raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), str(path))
                return real_open(path, flags, *args)

            return refuse

    monkeypatch.setattr(_posix, "os", NoMoreFiles())
    out = runner.invoke(app, ["stage", str(src), str(tmp_path / "dst")])
    assert out.exit_code == 2, out.output
    assert out.stderr.count("too many open files") == 1, out.stderr
    assert "lower --concurrency" in out.stderr
