"""Run under torchrun by test_checkpoint_retention.py: OUT BASE; rank 1's fast tier cannot be
written (a file stands where its folder would be). Each rank writes what it raised to
OUT/rank-N.json, and must raise without waiting for the other."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist

from stoker.checkpoint import Checkpointer
from stoker.errors import CheckpointError


def main() -> None:
    out, base = Path(sys.argv[1]), Path(sys.argv[2])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    fast = base / f"node{rank}" / "fast"
    if rank == 1:
        fast.parent.mkdir(parents=True, exist_ok=True)
        fast.parent.rmdir()
        fast.parent.write_text("a file where the folder should be")
    try:
        Checkpointer(fast)
        result = {"rank": rank, "raised": None}
    except CheckpointError as exc:
        result = {"rank": rank, "raised": str(exc)}
    (out / f"rank-{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
