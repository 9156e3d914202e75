"""The stage, verify and cache CLI verbs, run for real against Azurite."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import pytest
from typer.testing import CliRunner

from azurite import read_tree
from stoker.cli import app
from stoker.errors import StageError
from stoker.stage import cache_pull

runner = CliRunner()


def _dataset(root: Path) -> None:
    for i in range(12):
        path = root / f"part-{i % 3}" / f"{i:03d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(10_000 + i))


def test_stage_verify_round_trip_with_json(blob_env: str, tmp_path: Path) -> None:
    src, back = tmp_path / "src", tmp_path / "back"
    _dataset(src)
    out = runner.invoke(app, ["stage", str(src), f"{blob_env}/ds", "--json"])
    assert out.exit_code == 0, out.output
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert events[0]["event"] == "start" and events[-1]["event"] == "summary"
    assert events[-1]["files_copied"] == 12 and events[-1]["failed"] == []
    assert runner.invoke(app, ["stage", f"{blob_env}/ds", str(back)]).exit_code == 0
    ok = runner.invoke(app, ["verify", f"{blob_env}/ds", str(back)])
    assert ok.exit_code == 0 and "12 objects compared (12 by MD5" in ok.stdout
    (back / "part-1" / "001.bin").write_bytes(b"x" * 10_001)  # same size, other bytes
    (back / "part-2" / "002.bin").unlink()
    bad = runner.invoke(app, ["verify", f"{blob_env}/ds", str(back)])
    assert bad.exit_code == 1
    assert "MISMATCH part-1/001.bin: MD5" in bad.stdout
    assert "MISMATCH part-2/002.bin: missing from the destination" in bad.stdout


def test_dry_run_moves_nothing_and_says_how_much(blob_env: str, tmp_path: Path) -> None:
    src = tmp_path / "src"
    _dataset(src)
    out = runner.invoke(app, ["stage", str(src), f"{blob_env}/ds", "--dry-run"])
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith("would copy 12 files")
    lines = runner.invoke(app, ["stage", str(src), f"{blob_env}/ds", "--dry-run", "--json"])
    [summary] = [json.loads(line) for line in lines.stdout.splitlines()]  # one JSON line
    assert summary["event"] == "summary" and summary["files_copied"] == 12
    listing = runner.invoke(app, ["verify", str(src), f"{blob_env}/ds", "--json"])
    report = json.loads(listing.stdout)
    assert len(report["mismatches"]) == 12  # nothing was uploaded


def test_bad_url_is_one_clear_line(tmp_path: Path) -> None:
    out = runner.invoke(app, ["stage", "az://only-container", str(tmp_path)])
    assert out.exit_code == 2  # no account in the environment for az://CONTAINER
    assert "AZURE_STORAGE_ACCOUNT_NAME" in out.stderr and "Traceback" not in out.output


def test_cache_pull_cli(blob_env: str, tmp_path: Path) -> None:
    src = tmp_path / "m"
    _dataset(src)
    assert runner.invoke(app, ["stage", str(src), f"{blob_env}/models/tiny"]).exit_code == 0
    out = runner.invoke(
        app, ["cache", "pull", f"{blob_env}/models/tiny", str(tmp_path / "rwx"), "--json"]
    )
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["pulled"] is True and Path(result["path"]).is_dir()


def test_a_sas_signature_shows_nowhere_not_in_the_bar_nor_a_cache_name(
    azurite: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    container = azurite.container()
    container.upload_blob("model/weights.bin", os.urandom(50_000))
    sas = azurite.sas(container.container_name, read=True, list=True)
    signature = parse_qs(sas)["sig"][0]
    url = f"{azurite.endpoint}/{container.container_name}/model?{sas}"
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")  # draw the progress bar as on a terminal
    monkeypatch.setenv("COLUMNS", "400")  # wide enough for the whole description
    staged = runner.invoke(app, ["stage", url, str(tmp_path / "copy")])
    pulled = runner.invoke(app, ["cache", "pull", url, str(tmp_path / "cache")])
    for out in (staged, pulled):
        assert out.exit_code == 0, out.output
        assert container.container_name in out.stderr  # the bar was drawn, with the source
        for form in (signature, quote(signature, safe=""), signature[:12]):
            assert form not in out.output
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["model"]


def test_cache_names_that_would_leave_the_root_are_refused(blob_env: str, tmp_path: Path) -> None:
    for name in ("../escape", "a/b", ".."):
        out = runner.invoke(
            app, ["cache", "pull", f"{blob_env}/m", str(tmp_path / "c"), "--name", name]
        )
        assert out.exit_code == 2 and "is not a plain folder name" in out.stderr
    assert not (tmp_path / "escape").exists() and not (tmp_path / "c").exists()


def test_a_missing_or_empty_source_is_an_error_and_deletes_nothing(
    blob_env: str, tmp_path: Path
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _dataset(src)
    assert runner.invoke(app, ["stage", str(src), str(dst)]).exit_code == 0
    assert runner.invoke(app, ["stage", str(src), f"{blob_env}/copy"]).exit_code == 0
    for source, target in (
        (str(tmp_path / "no-such-dir"), str(dst)),  # a mistyped path
        (str(src / "part-0" / "000.bin"), str(dst)),  # a file
        (f"{blob_env}/typo-prefix", str(dst)),  # a prefix that lists nothing
        (f"{blob_env}/typo-prefix", f"{blob_env}/copy"),
    ):
        out = runner.invoke(app, ["stage", source, target, "--delete"])
        assert out.exit_code == 2, out.output
        assert (
            "does not exist" in out.stderr
            or "is a file" in out.stderr
            or ("lists no objects" in out.stderr and "nothing was copied or deleted" in out.stderr)
        )
    assert len(list(dst.rglob("*.bin"))) == 12  # nothing deleted
    again = runner.invoke(app, ["verify", f"{blob_env}/copy", str(src)])
    assert again.exit_code == 0, again.output  # nor there
    out = runner.invoke(app, ["verify", str(tmp_path / "nope-a"), str(tmp_path / "nope-b")])
    assert out.exit_code == 2 and "does not exist" in out.stderr
    out = runner.invoke(app, ["stage", str(tmp_path / "nope-a"), str(dst), "--json"])
    last = json.loads(out.stdout.splitlines()[-1])  # automation reads why, on stdout too
    assert out.exit_code == 2 and last["event"] == "error" and last["fatal"] is True
    assert "does not exist" in last["message"]


def test_stage_refuses_bad_settings_and_a_copy_into_its_source(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _dataset(src)
    (tmp_path / "afile").write_text("x")
    for args, said in (
        ([str(src), str(tmp_path / "o"), "--block-size", "1 KiB"], "use 64 KiB to 4000 MiB"),
        ([str(src), str(tmp_path / "o"), "--block-size", "10 GiB"], "use 64 KiB to 4000 MiB"),
        ([str(src), str(src / "copy")], "is inside"),
        ([str(src), str(src)], "is inside"),
        ([str(src), str(tmp_path / "afile")], "must be a folder this user can write"),
    ):
        out = runner.invoke(app, ["stage", *args])
        assert out.exit_code == 2 and said in out.stderr, out.output
        assert "Traceback" not in out.output
    assert not (src / "copy").exists() and (tmp_path / "afile").read_text() == "x"
    with pytest.raises(StageError, match="--timeout -1: use 0 or more"):
        cache_pull(str(src), str(tmp_path / "c"), timeout_s=-1)  # the API twin checks it too
    with pytest.raises(StageError, match="--stale-after 0: use more than 0"):
        cache_pull(str(src), str(tmp_path / "c"), stale_after_s=0)


def test_dry_run_with_delete_says_what_would_go_and_folder_markers_are_no_files(
    blob_env: str, azurite: Any, tmp_path: Path
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _dataset(src)
    assert runner.invoke(app, ["stage", str(src), str(dst)]).exit_code == 0
    for path in list(src.rglob("00[0-2].bin")):
        path.unlink()
    out = runner.invoke(app, ["stage", str(src), str(dst), "--delete", "--dry-run"])
    assert out.exit_code == 0 and "would delete 3;" in out.stdout, out.output
    assert len(list(dst.rglob("*.bin"))) == 12  # a dry run deletes nothing
    fresh = tmp_path / "fresh"
    out = runner.invoke(app, ["stage", str(src), str(fresh), "--dry-run"])
    assert out.exit_code == 0 and "would copy 9 files" in out.stdout, out.output
    assert not fresh.exists()  # nor writes anything: not even its manifest
    container = azurite.client(blob_env)
    container.upload_blob("tree/folder/", b"")  # a folder marker, as Storage Explorer makes
    container.upload_blob("tree/folder/a.bin", b"a")
    out = runner.invoke(app, ["stage", f"{blob_env}/tree", str(tmp_path / "tree")])
    assert out.exit_code == 0, out.output
    assert read_tree(tmp_path / "tree") == {"folder/a.bin": b"a"}


def test_verify_takes_the_share_that_stage_took(blob_env: str, tmp_path: Path) -> None:
    src, mine = tmp_path / "src", tmp_path / "mine"
    _dataset(src)
    assert runner.invoke(app, ["stage", str(src), f"{blob_env}/ds"]).exit_code == 0
    share = ["--rank", "0", "--world-size", "2"]
    assert runner.invoke(app, ["stage", f"{blob_env}/ds", str(mine), *share]).exit_code == 0
    assert 0 < len(list(mine.rglob("*.bin"))) < 12
    ok = runner.invoke(app, ["verify", f"{blob_env}/ds", str(mine), *share])
    assert ok.exit_code == 0 and "all match" in ok.stdout, ok.output
    whole = runner.invoke(app, ["verify", f"{blob_env}/ds", str(mine)])
    assert whole.exit_code == 1 and "missing from the destination" in whole.stdout
    some = runner.invoke(
        app, ["verify", f"{blob_env}/ds", str(mine), *share, "--exclude", "part-1/*"]
    )
    assert some.exit_code == 0 and some.stdout.count("objects compared") == 1


def test_a_failed_file_is_named_once_and_counted_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stoker.errors import StoreError
    from stoker.stage._engine import Engine

    src = tmp_path / "src"
    _dataset(src)
    copy = Engine._copy

    async def one_fails(self: Any, key: str, *args: Any) -> Any:
        if key == "part-1/004.bin":
            raise StoreError(f"reading {key}: the disk said no")
        return await copy(self, key, *args)

    monkeypatch.setattr(Engine, "_copy", one_fails)
    out = runner.invoke(app, ["stage", str(src), str(tmp_path / "dst")])
    assert out.exit_code == 1
    assert out.stderr.count("the disk said no") == 1, out.stderr
    assert "error: 1 file failed (named above); the same command copies them again" in out.stderr


def test_verify_reports_its_progress(tmp_path: Path) -> None:
    """verify hashes whole datasets: it shows how far it is, as stage does (it showed nothing)."""
    from stoker.stage import Reporter, stage, verify

    class Seen(Reporter):
        def __init__(self) -> None:
            self.total, self.done, self.files, self.summary = (0, 0), 0, 0, None

        def grow(self, files: int, nbytes: int) -> None:
            self.total = (files, nbytes)

        def advance(self, nbytes: int) -> None:
            self.done += nbytes

        def file_done(self) -> None:
            self.files += 1

        def finish(self, summary: dict[str, Any]) -> None:
            self.summary = summary

    src = tmp_path / "src"
    _dataset(src)
    stage(str(src), str(tmp_path / "dst"))
    seen = Seen()
    assert verify(str(src), str(tmp_path / "dst"), reporter=seen).ok
    nbytes = sum(p.stat().st_size for p in src.rglob("*.bin"))
    assert seen.total == (12, nbytes) and seen.done == nbytes and seen.files == 12
    assert seen.summary is not None and seen.summary["checked"] == 12


def test_bad_options_are_named_by_their_option(tmp_path: Path) -> None:
    _dataset(tmp_path / "src")
    for verb, args, option in [
        (["stage"], ["--block-size", "banana"], "--block-size"),
        (["stage"], ["--block-size", "0"], "--block-size"),
        (["stage"], ["--concurrency", "0"], "--concurrency"),
        (["cache", "pull"], ["--stale-after", "0"], "--stale-after"),
        (["cache", "pull"], ["--timeout", "-1"], "--timeout"),
    ]:
        out = runner.invoke(app, [*verb, str(tmp_path / "src"), str(tmp_path / "dst"), *args])
        assert out.exit_code == 2 and f"'{option}'" in out.output, (args, out.output)
    assert not (tmp_path / "dst").exists()


def test_the_summary_gives_a_small_copys_rate_in_readable_units(tmp_path: Path) -> None:
    """Three bytes in ~0.1 s printed "(1.8e-05 MB/s)"."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_bytes(b"hi\n")
    out = runner.invoke(app, ["stage", str(tmp_path / "src"), str(tmp_path / "dst")])
    assert out.exit_code == 0, out.output
    assert "copied 1 file, 3 B in " in out.stdout and "e-0" not in out.stdout
    assert re.search(r"\(\d+(\.\d+)? (k?B)/s\)", out.stdout), out.stdout
