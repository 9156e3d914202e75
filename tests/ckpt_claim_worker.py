"""A zygote for test_checkpoint_claim.py: imports torch and stoker once, then forks one saving
job per line read from stdin (JSON: job, fast, durable, log) and prints its pid. A fork costs
milliseconds where a fresh interpreter costs ~1.3 s, so 50 rounds of kill -9 fit in a minute.

Each job appends to its log: "refused <why>" (its Checkpointer was refused, exit 3), "ready",
"loaded <step> <job the state names>", "durable <step>" after each ``wait()``. SIGCHLD is
ignored, so the kernel reaps the children the test kills."""

from __future__ import annotations

import json
import os
import signal
import sys

import torch

from stoker.checkpoint import Checkpointer
from stoker.errors import CheckpointError


def run(job: str, fast: str, durable: str, log_path: str) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def say(line: str) -> None:
        os.write(log, (line.replace("\n", " ") + "\n").encode())

    try:
        ckpt = Checkpointer(fast, durable, keep_last=2, job_id=job)
    except CheckpointError as exc:
        say(f"refused {exc}")
        os._exit(3)
    say("ready")
    step = 1
    try:
        restored = ckpt.load(fallback=True)
        say(f"loaded {restored.step} {restored.state['job']}")
        step = restored.step + 1
    except CheckpointError:
        pass  # nothing saved yet
    x = torch.empty(256)
    while True:
        x.fill_(step)
        ckpt.save(step, {"x": x, "job": job, "step": step})
        ckpt.wait()
        say(f"durable {step}")
        step += 1


def main() -> None:
    torch.set_num_threads(1)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in sys.stdin:
        order = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                run(order["job"], order["fast"], order["durable"], order["log"])
            except BaseException as exc:  # noqa: BLE001 - said to the test, which fails on it
                with open(order["log"], "a") as log:
                    log.write(f"crashed {type(exc).__name__}: {exc}".replace("\n", " ") + "\n")
            finally:
                os._exit(1)
        print(pid, flush=True)


if __name__ == "__main__":
    main()
