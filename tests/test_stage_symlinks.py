"""A local source's symbolic links: skipped and counted by default, followed with
--follow-symlinks (a loop or a dangling link is named and skipped), and always followed by the
model cache, so a Hugging Face snapshot tree publishes to Blob and pulls back whole."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from azurite import Azurite, blob_tree
from stoker.cli import app
from stoker.stage import cache_pull, stage, verify


def _tree(root: Path) -> Path:
    """real/a.bin, real/sub/b.bin; a link to a file, one to a folder, a loop, a dangling one."""
    (root / "real" / "sub").mkdir(parents=True)
    (root / "real" / "a.bin").write_bytes(b"a" * 1000)
    (root / "real" / "sub" / "b.bin").write_bytes(b"b" * 3000)
    (root / "file-link.bin").symlink_to("real/a.bin")
    (root / "folder-link").symlink_to("real/sub", target_is_directory=True)
    (root / "real" / "sub" / "up").symlink_to("..", target_is_directory=True)  # a loop
    (root / "dangling.bin").symlink_to("no-such-file")
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".stoker" not in p.parts
    }


def test_links_are_skipped_and_counted_without_the_flag(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    summary = stage(str(src), str(tmp_path / "dst"))
    assert summary.ok and summary.files_copied == 2
    assert _files(tmp_path / "dst") == {"real/a.bin": b"a" * 1000, "real/sub/b.bin": b"b" * 3000}
    (note,) = [n for n in summary.notes if "symbolic link" in n]
    assert "skipped 4 symbolic link(s)" in note and "--follow-symlinks" in note


def test_the_flag_follows_files_and_folders_and_names_loops(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    summary = stage(str(src), str(tmp_path / "dst"), follow_symlinks=True)
    assert summary.ok, summary.failed
    copied = _files(tmp_path / "dst")
    assert copied == {
        "real/a.bin": b"a" * 1000,
        "real/sub/b.bin": b"b" * 3000,
        "file-link.bin": b"a" * 1000,
        "folder-link/b.bin": b"b" * 3000,
        # folder-link/up leads to real, which is not above folder-link: followed, and in it
        # sub, which is (the path came through it): a loop
        "folder-link/up/a.bin": b"a" * 1000,
    }
    assert not any(p.is_symlink() for p in (tmp_path / "dst").rglob("*"))  # plain files
    (note,) = [n for n in summary.notes if "symbolic link" in n]
    assert "cannot be followed" in note
    assert "real/sub/up (a loop" in note and "folder-link/up/sub (a loop" in note
    assert "dangling.bin (it leads nowhere)" in note
    assert verify(str(src), str(tmp_path / "dst"), follow_symlinks=True).ok
    again = stage(str(src), str(tmp_path / "dst"), follow_symlinks=True)
    assert (again.files_copied, again.files_skipped) == (0, 5)


def test_a_followed_link_may_lead_outside_the_source(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "w.bin").write_bytes(b"weights")
    src = tmp_path / "src"
    src.mkdir()
    (src / "model").symlink_to(outside, target_is_directory=True)
    assert stage(str(src), str(tmp_path / "dst"), follow_symlinks=True).ok
    assert _files(tmp_path / "dst") == {"model/w.bin": b"weights"}


def test_a_source_of_links_only_says_why_it_lists_nothing(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "x.bin").write_bytes(b"x")
    (src / "x.bin").symlink_to(tmp_path / "x.bin")
    result = CliRunner().invoke(app, ["stage", str(src), str(tmp_path / "dst")])
    assert result.exit_code == 2
    assert "skipped 1 symbolic link(s)" in result.output and "--follow-symlinks" in result.output


def test_the_cli_says_once_how_many_links_it_skipped(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    result = CliRunner().invoke(app, ["stage", str(src), str(tmp_path / "dst")])
    assert result.exit_code == 0, result.output
    assert result.output.count("symbolic link") == 1
    result = CliRunner().invoke(
        app, ["stage", str(src), str(tmp_path / "dst2"), "--follow-symlinks"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "dst2" / "folder-link" / "b.bin").read_bytes() == b"b" * 3000


# ------------------------------------------------------------------ a Hugging Face snapshot
def _hf_snapshot(cache: Path) -> tuple[Path, dict[str, bytes]]:
    """models--org--name as huggingface_hub lays it out: the bytes in blobs/<sha>, each
    snapshot's files relative links into blobs/ (some in subfolders), refs/main a file."""
    model = cache / "models--org--name"
    files = {
        "config.json": b'{"hidden": 64}',
        "model.safetensors": os.urandom(3 << 20),  # several blocks: a block upload
        "tokenizer/vocab.txt": b"hello\nworld\n",
    }
    (model / "blobs").mkdir(parents=True)
    (model / "refs").mkdir()
    (model / "refs" / "main").write_text("abc123")
    expected: dict[str, bytes] = {"refs/main": b"abc123"}
    for rev in ("abc123", "def456"):
        for name, data in files.items():
            data = data if rev == "abc123" or name != "config.json" else b'{"hidden": 128}'
            sha = f"{abs(hash(data)):x}"
            blob = model / "blobs" / sha
            blob.write_bytes(data)
            link = model / "snapshots" / rev / name
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(blob, link.parent))
            expected[f"snapshots/{rev}/{name}"] = data
            expected[f"blobs/{sha}"] = data
    return model, expected


def test_a_hugging_face_snapshot_publishes_and_pulls_whole(
    azurite: Azurite, blob_env: str, tmp_path: Path
) -> None:
    model, expected = _hf_snapshot(tmp_path / "hub")
    up = f"{blob_env}/models/org-name"
    published = stage(str(model), up, block_size=1 << 20, follow_symlinks=True)
    assert published.ok and published.files_copied == len(expected), published.failed
    container = azurite.client(blob_env)
    assert blob_tree(container, "models/org-name/") == expected

    pulled = cache_pull(up, tmp_path / "cache", name="org-name")
    assert pulled.pulled
    assert _files(Path(pulled.path)) == expected  # every file, byte for byte
    # and straight from the local snapshot (links followed, always)
    local = cache_pull(str(model / "snapshots" / "abc123"), tmp_path / "cache", name="abc")
    assert _files(Path(local.path)) == {
        k.removeprefix("snapshots/abc123/"): v
        for k, v in expected.items()
        if k.startswith("snapshots/abc123/")
    }


@pytest.mark.parametrize("flag", [False, True])
def test_verify_reads_links_as_stage_did(tmp_path: Path, flag: bool) -> None:
    src = _tree(tmp_path / "src")
    assert stage(str(src), str(tmp_path / "dst"), follow_symlinks=flag).ok
    assert verify(str(src), str(tmp_path / "dst"), follow_symlinks=flag).ok


def test_the_demo_snapshot_pulls_into_the_cache_as_plain_files(tmp_path: Path) -> None:
    """`make demo`'s step: examples/hf_snapshot.py, then `stoker cache pull SNAPSHOT ROOT`."""
    import runpy

    example = Path(__file__).resolve().parents[1] / "examples" / "hf_snapshot.py"
    snapshot = runpy.run_path(str(example))["write_snapshot"](tmp_path / "hub")
    assert all(p.is_symlink() for p in snapshot.iterdir())
    runner = CliRunner()
    result = runner.invoke(app, ["cache", "pull", str(snapshot), str(tmp_path / "models")])
    assert result.exit_code == 0, result.output
    pulled = Path(result.output.split(" (")[0].strip())
    assert _files(pulled) == {p.name: p.read_bytes() for p in snapshot.iterdir()}
    assert not any(p.is_symlink() for p in pulled.iterdir())
