"""Run under torchrun by test_checkpoint_dist.py: MODE OUT FAST [DURABLE]; each rank writes
its result to OUT/rank-N.json (stdout of two ranks interleaves)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from stoker.checkpoint import Checkpointer


def main() -> None:
    mode, out, fast = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    durable = sys.argv[4] if len(sys.argv) > 4 else None
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ckpt = Checkpointer(fast, durable, keep_last=2)
    if mode == "save":
        for step in (1, 2, 3):
            ckpt.save(step, {"x": torch.full((1000,), float(rank * 100 + step)), "rank": rank})
        ckpt.wait()
        restored = ckpt.load()
        ok = torch.all(restored.state["x"] == rank * 100 + 3).item()
        result = {"rank": rank, "step": restored.step, "ok": ok, "who": restored.state["rank"]}
    elif mode == "dcp":
        import torch.distributed.checkpoint as dcp
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor

        mesh = init_device_mesh("cpu", (world,))
        full = torch.arange(16, dtype=torch.float32).reshape(8, 2)
        loader = {"version": 1, "epoch": 4, "position": 96, "dataset": "ab12", "shuffle": True}
        state = {"w": distribute_tensor(full, mesh, [Shard(0)]), "epoch": 4, "loader": loader}
        dcp.save(state, storage_writer=ckpt.dcp_writer(7))
        ckpt.wait()
        result = {"rank": rank, "steps": [i.step for i in ckpt.list()]}
    (out / f"rank-{rank}.json").write_text(json.dumps(result))
    ckpt.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
