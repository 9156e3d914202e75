"""A hostile user's sweep across ``stoker checkpoint`` and the Checkpointer: a FIFO planted as a
manifest or as the claim (a plain open would block forever), durable URLs that climb out of
their prefix, names holding terminal controls, and arguments of the wrong type."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import no_hang
from stoker.checkpoint import Checkpointer
from stoker.checkpoint._manifest import step_dir
from stoker.cli import app
from stoker.errors import CheckpointError, StokerError, StoreError

runner = CliRunner()
RAW = ("\x1b", "\r", "\x07")


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    with no_hang.alarm(60):
        yield


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, Path]:
    fast, durable = tmp_path / "fast", tmp_path / "durable"
    with Checkpointer(fast, durable, keep_last=5) as ckpt:
        for step in (10, 20):
            ckpt.save(step, {"w": torch.full((64,), float(step))})
    return fast, durable


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def test_a_fifo_planted_as_the_claim_is_refused_at_once(saved: tuple[Path, Path]) -> None:
    fast, durable = saved
    _fifo(durable / "stoker-claim.json")
    result = runner.invoke(app, ["checkpoint", "ls", str(fast), "--durable", str(durable)])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "stoker-claim.json: not a regular file" in line
    with pytest.raises(CheckpointError, match="not a regular file"):
        Checkpointer(fast, durable)  # a writer too: never waits on it


@pytest.mark.parametrize("tier", ["fast", "durable"])
def test_a_fifo_planted_as_a_manifest_is_not_read(saved: tuple[Path, Path], tier: str) -> None:
    fast, durable = saved
    _fifo((fast if tier == "fast" else durable) / step_dir(20) / "manifest.json")
    where = [str(fast), "--durable", str(durable), "--json"]
    listed = runner.invoke(app, ["checkpoint", "ls", *where])
    assert listed.exit_code in (0, 1), listed.output
    steps = {c["step"]: c["tiers"][tier] for c in json.loads(listed.stdout)["checkpoints"]}
    assert steps[10] == "ok" and "manifest" in steps[20]  # reported, not waited on
    verified = runner.invoke(app, ["checkpoint", "verify", *where])
    assert verified.exit_code in (0, 1), verified.output
    with Checkpointer(fast, durable, check_writable=False) as ckpt:
        restored = ckpt.load()  # step 20 from the other tier
        assert restored.step == 20 and restored.tier != tier


@pytest.mark.parametrize(
    "url",
    [
        "az://ckpts/run1/../run2",
        "az://ckpts/./run1",
        "https://acct.blob.core.windows.net/ckpts/run1/%2e%2e/run2",
    ],
)
def test_durable_urls_with_dot_segments_are_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(StoreError, match="segment"):
        Checkpointer(tmp_path / "fast", url)
    result = runner.invoke(app, ["checkpoint", "ls", str(tmp_path / "fast"), "--durable", url])
    assert result.exit_code == 2 and "segment" in result.stderr
    assert not (tmp_path / "fast").exists()


def test_control_characters_in_names_are_escaped(saved: tuple[Path, Path]) -> None:
    fast, durable = saved
    (fast / "step-\x1b[2J\r\x07").mkdir()  # not a step folder: ignored, never echoed raw
    result = runner.invoke(app, ["checkpoint", "ls", str(fast), "--durable", str(durable)])
    assert result.exit_code == 0, result.output
    assert not any(c in result.output for c in RAW)
    bad = runner.invoke(app, ["checkpoint", "ls", str(fast), "--durable", str(durable),
                              "--job-id", "a\x1b[2J\r\x07b"])  # fmt: skip
    assert bad.exit_code == 2 and "--job-id" in bad.stderr and "\\x1b" in bad.stderr
    assert not any(c in bad.output for c in RAW)
    folder = fast.parent / "fast\x1b[31m"
    missing = runner.invoke(app, ["checkpoint", "verify", str(folder)])
    assert not any(c in missing.output for c in RAW)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"job_id": 5}, "job_id=5"),
        ({"keep_last": "3"}, "keep_last='3'"),
        ({"keep_last": True}, "keep_last=True"),
        ({"keep_every": 2.5}, "keep_every=2.5"),
        ({"check_writable": "no"}, "check_writable='no'"),
        ({"durable": 7}, "durable=7"),
    ],
)
def test_wrong_types_name_the_argument(tmp_path: Path, kwargs: dict, named: str) -> None:
    with pytest.raises(StokerError) as info:
        Checkpointer(tmp_path / "fast", **kwargs)
    assert str(info.value).startswith(named) and "\n" not in str(info.value)
    with pytest.raises(CheckpointError, match="fast=5"):
        Checkpointer(5)  # type: ignore[arg-type]
