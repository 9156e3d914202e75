"""The example scripts run end to end (the emulator one starts its own Azurite)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _files(root: Path, n: int = 60) -> Path:
    for i in range(n):
        path = root / f"part-{i % 3}" / f"{i:03d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([i]) * 300 + bytes(range(256)) * (i + 1))
    return root


def test_train_stream_over_the_emulator_resumes_without_repeats(tmp_path: Path) -> None:
    src = _files(tmp_path / "src")
    out = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "train_stream.py"),
            "--source",
            str(src),
            "--emulator",
            "--batch",
            "4",
            "--ckpt",
            str(tmp_path / "ckpt"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "60 samples consumed, 60 distinct, 60 expected -> ok" in out.stdout
    assert "tier az" in out.stdout and "final training loss" in out.stdout


def test_train_checkpoint_restores_identical_weights(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "train_checkpoint.py"), str(tmp_path / "ckpt")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "weights identical: True" in out.stdout
