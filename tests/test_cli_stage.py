"""The stage, verify and cache CLI verbs, run for real against Azurite."""

from __future__ import annotations

import json
import os
from pathlib import Path

from typer.testing import CliRunner

from stoker.cli import app

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
    listing = runner.invoke(app, ["verify", str(src), f"{blob_env}/ds", "--json"])
    report = json.loads(listing.stdout)
    assert len(report["mismatches"]) == 12  # nothing was uploaded


def test_bad_url_is_one_clear_line(tmp_path: Path) -> None:
    out = runner.invoke(app, ["stage", "az://only-account", str(tmp_path)])
    assert out.exit_code == 2
    assert "az://ACCOUNT/CONTAINER/PREFIX" in out.stderr and "Traceback" not in out.output


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
