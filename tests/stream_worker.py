"""Run under torchrun by test_stream_dist.py: DATASET OUT [STOP_AFTER] [STATE_IN].

Each rank writes OUT/rank-N.json with the sample ids it consumed, batch by batch, and (when it
stops early) the loader state."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist

from stoker.stream import StreamingDataset, StreamingLoader


def main() -> None:
    root, out = sys.argv[1], Path(sys.argv[2])
    stop_after = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] != "-" else None
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    loader = StreamingLoader(StreamingDataset(root, seed=11), 6, num_workers=2, collate_fn=list)
    if len(sys.argv) > 4:
        loader.load_state_dict(json.loads(Path(sys.argv[4]).read_text()))
    batches = []
    for k, batch in enumerate(loader):
        batches.append([s["id"] for s in batch])
        if stop_after is not None and k + 1 == stop_after:
            break
    dist.barrier()  # ranks run in lockstep, as a training loop with DDP does
    result = {"batches": batches, "state": loader.state_dict()}
    (out / f"rank-{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
