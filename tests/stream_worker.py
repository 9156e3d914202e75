"""Run under torchrun by test_stream_dist.py and test_stream_groups.py:
DATASET OUT [STOP_AFTER|-] [STATE_IN|-] [GROUPS]

Each rank writes OUT/rank-N.json with the sample ids it consumed, batch by batch, an XXH3 of
each batch's bytes, its data-parallel group, and (when it stops early) the loader state.
GROUPS says how ranks map to data-parallel groups, with model replicas of TP ranks each
("world": every rank its own; "dp:TP": dp_rank= and dp_size=; "mesh:TP": a device mesh
("dp", "tp"), checked against the same groups made as process groups)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist
import xxhash

from stoker.stream import StreamingDataset, StreamingLoader


def dataset(root: str, groups: str) -> StreamingDataset:
    rank, world = dist.get_rank(), dist.get_world_size()
    kind, _, tp_text = groups.partition(":")
    tp = int(tp_text or 1)
    if kind == "dp":
        return StreamingDataset(root, seed=11, dp_rank=rank // tp, dp_size=world // tp)
    if kind == "mesh":
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (world // tp, tp), mesh_dim_names=("dp", "tp"))
        # The same groups as process groups: every rank makes every group, in one order.
        dp_groups = [dist.new_group(list(range(t, world, tp))) for t in range(tp)]
        by_group = StreamingDataset(root, seed=11, process_group=dp_groups[rank % tp])
        ds = StreamingDataset(root, seed=11, device_mesh=mesh, mesh_dim="dp")
        assert ds.group == by_group.group, (ds.group, by_group.group)
        return ds
    return StreamingDataset(root, seed=11)


def main() -> None:
    root, out = sys.argv[1], Path(sys.argv[2])
    stop_after = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] != "-" else None
    state_in = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] != "-" else None
    groups = sys.argv[5] if len(sys.argv) > 5 else "world"
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ds = dataset(root, groups)
    loader = StreamingLoader(ds, 6, num_workers=2, collate_fn=list)
    if state_in:
        loader.load_state_dict(json.loads(Path(state_in).read_text()))
    batches, hashes = [], []
    for k, batch in enumerate(loader):
        batches.append([s["id"] for s in batch])
        hashes.append(xxhash.xxh3_64_hexdigest(b"".join(s["data"] for s in batch)))
        if stop_after is not None and k + 1 == stop_after:
            break
    dist.barrier()  # ranks run in lockstep, as a training loop with DDP does
    result = {
        "batches": batches,
        "hashes": hashes,
        "group": [ds.group.rank, ds.group.size],
        "state": loader.state_dict(),
    }
    (out / f"rank-{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
