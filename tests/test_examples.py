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


def test_train_stream_under_torchrun_resumes_without_repeats(tmp_path: Path) -> None:
    """Two ranks: each wrote the dataset into one folder at once and saved as if alone into
    one checkpoint folder; the second failed with "step 3 is before step 21"."""
    src = _files(tmp_path / "src")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2"]
    cmd += ["--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
    cmd += [str(EXAMPLES / "train_stream.py"), "--source", str(src), "--batch", "4"]
    cmd += ["--data", str(tmp_path / "shards"), "--ckpt", str(tmp_path / "ckpt")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("samples in") == 1  # rank 0 alone writes and reports
    assert "56 samples consumed, 56 distinct, 56 expected -> ok" in out.stdout  # 7 x (2 x 4)


def test_train_stream_runs_again_on_its_own_folders_and_leaves_others_alone(
    tmp_path: Path,
) -> None:
    src = _files(tmp_path / "src")
    args = [sys.executable, str(EXAMPLES / "train_stream.py"), "--source", str(src)]
    args += ["--data", str(tmp_path / "shards"), "--batch", "4", "--workers", "0"]
    for _ in range(2):  # the second run continues the dataset and empties its checkpoints
        out = subprocess.run(
            [*args, "--ckpt", str(tmp_path / "ckpt")], capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr[-3000:]
        assert "60 samples in" in out.stdout and "60 distinct, 60 expected -> ok" in out.stdout
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "model.pt").write_bytes(b"weights")
    refused = subprocess.run(
        [*args, "--ckpt", str(mine)], capture_output=True, text=True, timeout=300
    )
    assert refused.returncode != 0 and f"--ckpt {mine} is not empty" in refused.stderr
    assert (mine / "model.pt").read_bytes() == b"weights"


def test_train_checkpoint_restores_identical_weights(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "train_checkpoint.py"), str(tmp_path / "ckpt")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "weights identical: True" in out.stdout


def test_checkpoint_nodes_answers_the_eviction_and_loads_on_three_ranks(tmp_path: Path) -> None:
    """make demo's multi-node step: node 1's eviction is acknowledged only after every rank
    committed the step it saved, and three ranks load that step from the durable tier."""
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "checkpoint_nodes.py"), str(tmp_path / "nodes")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    preempted = [ln for ln in lines if ": preempted at step " in ln]
    assert len(preempted) == 4 and len({ln.split(":")[1] for ln in preempted}) == 1
    assert all("committed on the fast tier and the durable tier" in ln for ln in preempted)
    assert sum("acknowledged" in ln for ln in preempted) == 1  # node 1 alone, once
    assert "rank 2:" in next(ln for ln in preempted if "acknowledged" in ln)
    step = preempted[0].split("preempted at step ")[1].split(":")[0]
    loaded = [ln for ln in lines if "load(reshard=True): step" in ln]
    assert len(loaded) == 3 and all(f"step {step} from the durable tier" in ln for ln in loaded)
    said = [
        ln
        for ln in lines
        if ln.startswith("rank ") and "; model " in ln or "model " in ln and "load(" in ln
    ]
    models = {ln.rsplit("model ", 1)[1].split(",")[0] for ln in said}
    assert len(models) == 1  # every rank saved, and every rank loaded, the same model
