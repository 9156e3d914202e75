"""Run under torchrun by test_preempt.py: OUT DURABLE FAST0 IMDS0 FAST1 IMDS1 [one-node]. Each
rank plays one node: its own node-local fast tier and its own IMDS (so each is its node's local
rank 0 and polls); with ``one-node``, both ranks are one node (torchrun's LOCAL_RANK: only rank 0
polls) on FAST0 and IMDS0. The result goes to OUT/rank-N.json."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from stoker.checkpoint import Checkpointer


def main() -> None:
    out, durable = Path(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    one_node = sys.argv[-1] == "one-node"
    node = 0 if one_node else rank
    fast, imds = sys.argv[3 + 2 * node], sys.argv[4 + 2 * node]
    if not one_node:
        os.environ["LOCAL_RANK"] = "0"  # one rank per emulated node
    ckpt = Checkpointer(fast, durable, keep_last=3)
    state = {"w": torch.zeros(1 << 20), "rank": rank, "step": 0}
    watcher = ckpt.watch_preemption(lambda: state, endpoint=imds, poll_s=0.02)
    stopped = None
    for step in range(1, 3000):
        state["w"].fill_(float(rank * 10_000 + step))
        state["step"] = step
        if watcher.should_stop(step):
            stopped = step
            break
        time.sleep(0.01)
    report = watcher.last
    result = {
        "rank": rank,
        "stopped": stopped,
        "step": report and report.step,
        "fast": report and report.fast,
        "durable": report and report.durable,
        "acknowledged": report and report.acknowledged,
        "events": report and len(report.events),
        "note": report and report.note,
        "poller": watcher.vm_name is not None,
    }
    (out / f"rank-{rank}.json").write_text(json.dumps(result))
    watcher.close()
    ckpt.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
