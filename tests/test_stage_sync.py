"""stage syncs against what is already at the destination, manifest or not (issue 25, part 3):
a file there whose size is the source's and that is newer is not copied again (``--checksum``:
whose MD5 is the source's), so a first run over a tree another tool copied, a lost manifest or
a new ``--include`` moves only what is missing or changed."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from typer.testing import CliRunner

from azurite import Azurite, blob_tree, read_tree
from stoker.cli import app
from stoker.stage import stage

runner = CliRunner()


def tree(root: Path, files: dict[str, bytes]) -> Path:
    for key, data in files.items():
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def dataset(n: int = 12) -> dict[str, bytes]:
    return {f"part-{i % 3}/{i:03d}.bin": os.urandom(5_000 + i) for i in range(n)}


def test_a_tree_another_tool_copied_moves_nothing(tmp_path: Path) -> None:
    files = dataset()
    src = tree(tmp_path / "src", files)
    shutil.copytree(src, tmp_path / "dst")  # (cp -r: newer copies, no manifest)
    summary = stage(str(src), str(tmp_path / "dst"))
    assert summary.ok and summary.bytes_copied == 0 and summary.files_copied == 0
    assert summary.files_skipped == 12
    # A source changed since (newer, same size) is copied; so is one whose size differs.
    later = time.time() + 5
    (src / "part-0" / "000.bin").write_bytes(os.urandom(5_000))
    os.utime(src / "part-0" / "000.bin", (later, later))
    (src / "part-1" / "001.bin").write_bytes(b"shorter")
    again = stage(str(src), str(tmp_path / "dst"))
    assert again.files_copied == 2 and again.files_skipped == 10
    assert read_tree(tmp_path / "dst") == read_tree(src)


def test_a_new_include_copies_only_what_is_new(tmp_path: Path) -> None:
    files = dataset()
    src, dst = tree(tmp_path / "src", files), tmp_path / "dst"
    first = stage(str(src), str(dst), include=("part-0/*",))
    assert first.files_copied == 4
    wider = stage(str(src), str(dst), include=("part-0/*", "part-1/*"))
    assert wider.files_copied == 4 and wider.files_skipped == 4
    assert wider.bytes_copied == sum(len(d) for k, d in files.items() if k.startswith("part-1"))
    out = runner.invoke(app, ["stage", str(src), str(dst)])
    assert out.exit_code == 0 and "copied 4 files" in out.stdout and "8 unchanged" in out.stdout
    assert read_tree(dst) == files


def test_a_lost_manifest_moves_nothing_both_ways_with_blob(
    azurite: Azurite, blob_env: str, tmp_path: Path
) -> None:
    files = dataset()
    src = tree(tmp_path / "src", files)
    for path in src.rglob("*.bin"):  # written a while ago
        os.utime(path, (time.time() - 10, time.time() - 10))
    assert stage(str(src), f"{blob_env}/ds").ok
    # Blob's times are whole seconds, and a copy made in its source's second counts as
    # changed (it could be): the download comes a second later.
    time.sleep(1.1)
    assert stage(f"{blob_env}/ds", str(tmp_path / "back")).ok
    shutil.rmtree(tmp_path / "back" / ".stoker")  # the manifests are gone
    shutil.rmtree(Path(os.environ["XDG_CACHE_HOME"]) / "stoker")
    up = stage(str(src), f"{blob_env}/ds")
    down = stage(f"{blob_env}/ds", str(tmp_path / "back"))
    assert up.bytes_copied == 0 and up.files_skipped == 12, up
    assert down.bytes_copied == 0 and down.files_skipped == 12, down
    assert blob_tree(azurite.client(blob_env), "ds/") == files


def test_checksum_compares_content_not_times(tmp_path: Path) -> None:
    files = dataset(3)
    src = tree(tmp_path / "src", files)
    dst = tree(tmp_path / "dst", files)  # newer, same content
    doctored = dst / "part-0" / "000.bin"
    doctored.write_bytes(os.urandom(5_000))  # same size, newer, other bytes
    plain = stage(str(src), str(dst), dry_run=True)
    assert plain.files_copied == 0  # size and time cannot tell
    checked = stage(str(src), str(dst), checksum=True)
    assert checked.files_copied == 1 and checked.files_skipped == 2
    assert read_tree(dst) == files
    older = tree(tmp_path / "older", files)
    for path in older.rglob("*.bin"):
        os.utime(path, (1_000_000, 1_000_000))  # older than the source, same bytes
    assert stage(str(src), str(older), dry_run=True).files_copied == 3
    assert stage(str(src), str(older), checksum=True).files_copied == 0


def test_an_unchanged_tree_of_2000_files_without_its_manifest_moves_nothing(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    for i in range(2000):
        folder = src / f"d{i % 20:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:04d}.bin").write_bytes(b"x" * (100 + i))
    assert stage(str(src), str(tmp_path / "dst")).files_copied == 2000
    shutil.rmtree(tmp_path / "dst" / ".stoker")
    t0 = time.perf_counter()
    again = stage(str(src), str(tmp_path / "dst"))
    seconds = time.perf_counter() - t0
    assert again.bytes_copied == 0 and again.files_skipped == 2000
    assert seconds < 10, seconds  # (the bench's row holds it to 2 s on a quiet machine)
