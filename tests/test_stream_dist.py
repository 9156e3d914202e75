"""Two ranks under torchrun (gloo on CPU): disjoint, complete, equal and repeatable; then a
resume from two ranks onto one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stoker.stream import ShardWriter

WORKER = Path(__file__).with_name("stream_worker.py")
N = 500


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stream") / "ds"
    with ShardWriter(root, shard_size="8KiB", codec="pickle") as w:
        for i in range(N):
            w.write({"id": i, "data": bytes(300)})
    return root


def _run(nproc: int, out: Path, root: Path, *extra: str) -> list[dict]:
    out.mkdir()
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}"]
    cmd += ["--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
    cmd += [str(WORKER), str(root), str(out), *extra]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return [json.loads((out / f"rank-{r}.json").read_text()) for r in range(nproc)]


def test_two_ranks_disjoint_complete_equal_and_repeatable(dataset: Path, tmp_path: Path) -> None:
    first = _run(2, tmp_path / "a", dataset)
    again = _run(2, tmp_path / "b", dataset)
    per_rank = [[i for b in r["batches"] for i in b] for r in first]
    assert len(first[0]["batches"]) == len(first[1]["batches"]) == N // 12
    assert not set(per_rank[0]) & set(per_rank[1])
    assert len(set(per_rank[0]) | set(per_rank[1])) == N // 12 * 12
    assert [r["batches"] for r in again] == [r["batches"] for r in first]


def test_resume_from_two_ranks_onto_one(dataset: Path, tmp_path: Path) -> None:
    half = _run(2, tmp_path / "a", dataset, "7")
    state = tmp_path / "state.json"
    state.write_text(json.dumps(half[0]["state"]))
    assert half[0]["state"] == half[1]["state"]  # every rank holds the same global position
    rest = _run(1, tmp_path / "b", dataset, "-", str(state))
    seen = [i for r in half for b in r["batches"] for i in b]
    seen += [i for b in rest[0]["batches"] for i in b]
    assert len(seen) == len(set(seen))  # no sample twice
    assert len(seen) == 7 * 12 + (N - 7 * 12) // 6 * 6  # none skipped
