"""Two ranks under torchrun (gloo on CPU): one shard per rank, one commit, the same step for
everyone; a DCP save through stoker read back by one process (resharded 2 -> 1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp

from stoker.checkpoint import Checkpointer
from stoker.checkpoint._manifest import CheckpointManifest, step_dir
from stoker.errors import CheckpointError

WORKER = Path(__file__).with_name("ckpt_worker.py")


def _torchrun(mode: str, out: Path, *args: str) -> list[dict]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2"]
    cmd += ["--master-port=0", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
    out.mkdir(exist_ok=True)
    run = subprocess.run(
        [*cmd, str(WORKER), mode, str(out), *args], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return [json.loads((out / f"rank-{r}.json").read_text()) for r in (0, 1)]


def test_two_ranks_save_one_commit_and_load_their_own_shard(blob_env: str, tmp_path: Path) -> None:
    fast, durable = tmp_path / "fast", f"{blob_env}/dist"
    results = _torchrun("save", tmp_path / "out", str(fast), durable)
    assert results == [
        {"rank": 0, "step": 3, "ok": True, "who": 0},
        {"rank": 1, "step": 3, "ok": True, "who": 1},
    ]
    manifest = CheckpointManifest.from_json(
        (fast / step_dir(3) / "manifest.json").read_bytes(), "test"
    )
    assert manifest.world_size == 2
    assert [f.name for f in manifest.files] == [
        "shard-00000-of-00002.bin",
        "shard-00001-of-00002.bin",
    ]
    with Checkpointer(fast, durable, job_id="ckpt-worker") as ckpt:  # (the worker's JOB)
        assert {i.step: i.tiers["durable"] for i in ckpt.list()} == {3: "ok", 2: "ok"}
        with pytest.raises(CheckpointError, match="saved by 2 ranks, this job has 1"):
            ckpt.load()


def test_dcp_save_through_stoker_reshards_from_two_ranks_to_one(tmp_path: Path) -> None:
    fast = tmp_path / "fast"
    results = _torchrun("dcp", tmp_path / "out", str(fast))
    assert [r["steps"] for r in results] == [[7], [7]]
    manifest = CheckpointManifest.from_json(
        (fast / step_dir(7) / "manifest.json").read_bytes(), "test"
    )
    assert manifest.kind == "dcp" and ".metadata" in {f.name for f in manifest.files}
    fresh = {"version": 1, "epoch": 0, "position": 0, "dataset": "ab12", "shuffle": False}
    state = {"w": torch.zeros(8, 2), "epoch": 0, "loader": fresh}  # a new loader's state_dict()
    with Checkpointer(fast, job_id="ckpt-worker") as ckpt:
        dcp.load(state, storage_reader=ckpt.dcp_reader(), no_dist=True)
        with pytest.raises(CheckpointError, match="torch.distributed.checkpoint"):
            ckpt.load()
    assert torch.equal(state["w"], torch.arange(16, dtype=torch.float32).reshape(8, 2))
    assert state["epoch"] == 4
    assert state["loader"] == {  # as docs/stream.md says: the loader goes along, resharded
        "version": 1,
        "epoch": 4,
        "position": 96,
        "dataset": "ab12",
        "shuffle": True,
    }
