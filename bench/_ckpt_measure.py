"""The parent side of ``checkpoint_bench.py``'s parts: fresh worker processes, dd's ceiling
beside each, the first-save rounds, preemptions served by a local Scheduled Events server, and
DDP under torchrun."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from datetime import UTC, datetime
from pathlib import Path

from _ckpt_config import (
    DDP_RANKS,
    DDP_SIZES,
    FIRST_ROUNDS,
    PREEMPT_NOTICE_S,
    PREEMPT_POLL_S,
    PREEMPT_STEP_S,
    MiB,
)
from _machine import cpu_mark, others_cpu_share

SCRIPT = Path(__file__).resolve().with_name("checkpoint_bench.py")  # runs a worker on --worker


def spawn_worker(cfg: dict) -> dict:
    """Run one worker process; its result, or {"error": ...} with the end of its stderr (whose
    lines are passed on as they come: they are the progress)."""
    start_cpu = cpu_mark()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), "--worker", json.dumps(cfg)],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
        )
        tail: deque[str] = deque(maxlen=40)
        for line in proc.stderr:
            sys.stderr.write(line)
            tail.append(line)
        proc.wait()
        out.seek(0)
        lines = [ln for ln in out.read().splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        return {"error": f"worker exited {proc.returncode}: {''.join(tail)[-1500:]}"}
    result = json.loads(lines[-1][len("RESULT ") :])
    result["cpu_elsewhere"] = others_cpu_share(start_cpu)
    return result


def dd_ceiling(nbytes: int, folder: Path) -> dict:
    """Seconds for dd to write ``nbytes`` to the same disk with O_DIRECT and a final fsync
    (the ceiling held to the target), and the same through the page cache (for comparison:
    the kernel's writeback keeps more requests in flight than dd's one O_DIRECT write)."""
    folder.mkdir(parents=True, exist_ok=True)
    path, block = folder / "dd.bin", 8 * MiB
    count = max(1, -(-nbytes // block))
    written = count * block
    out = {}
    for name, flags in (("direct", ["oflag=direct"]), ("buffered", [])):
        os.sync()
        start = time.perf_counter()
        argv = ["dd", "if=/dev/zero", f"of={path}", "bs=8M", f"count={count}", *flags]
        done = subprocess.run([*argv, "conv=fsync"], check=True, capture_output=True, text=True)
        wall = time.perf_counter() - start
        path.unlink()
        said = re.search(r"copied, ([\d.]+) s", done.stderr)
        out[name] = {
            "seconds": wall * nbytes / written,  # scaled to the state's bytes
            "dd_says_s": float(said.group(1)) * nbytes / written if said else None,
            "mb_s": written / wall / 1e6,
        }
    return {**out["direct"], "buffered": out["buffered"]}


def stoker_available() -> str | None:
    """None when stoker.checkpoint imports, else why not (its last error line)."""
    proc = subprocess.run(
        [sys.executable, "-c", "from stoker.checkpoint import Checkpointer"],
        capture_output=True,
        text=True,
    )
    if proc.returncode == 0:
        return None
    return (proc.stderr.strip().splitlines() or ["unknown error"])[-1]


def measure_first_save(
    states: list[str], mode: str, reps: int, folder: Path, rounds: int = FIRST_ROUNDS
) -> dict:
    """Per state, side by side: ``torch.save`` (its median blocking), then ``rounds`` fresh
    processes each of stoker without a reservation and with ``reserve_like=state``, taking
    turns (a first save is one sample per process: the rounds give it a median)."""
    out = {}
    for state in states:
        print(f"first save: {state}", flush=True)
        base = {"state": state, "mode": mode, "reps": reps, "dir": str(folder)}
        row: dict = {"torch.save": spawn_worker({**base, "tool": "torch.save", "warmup": 1})}
        for _ in range(rounds):
            for variant in ("none", "reserve"):
                cfg = {**base, "first": True, "variant": variant}
                row.setdefault(variant, []).append(spawn_worker(cfg))
        out[state] = row
    return out


def preempt_run(root: Path, nbytes: int, in_flight: bool, rng: random.Random) -> dict:
    """One Preempt served by a local Scheduled Events server to a loop that calls
    ``should_stop`` every step; ``in_flight``: the event comes while a periodic save of the same
    state is still being written (the worst case: that write is finished first)."""
    import torch

    from stoker.checkpoint import Checkpointer
    from stoker.checkpoint._events_server import EventsServer

    shutil.rmtree(root, ignore_errors=True)
    state = {"w": torch.zeros(nbytes // 4), "step": 0}
    os.sync()
    with EventsServer("bench-vm") as server, Checkpointer(fast=str(root), keep_last=2) as ckpt:
        ckpt.save(1, state)  # a periodic save before: the buffer exists, a write was measured
        ckpt.wait()
        watcher = ckpt.watch_preemption(lambda: state, endpoint=server.url, poll_s=PREEMPT_POLL_S)
        while watcher.polls < 1:
            time.sleep(0.01)
        time.sleep(rng.uniform(0, PREEMPT_POLL_S))  # the event is posted anywhere in a poll cycle
        step = 1
        if in_flight:
            step = 2
            ckpt.save(step, state)
        posted = time.perf_counter()
        event = server.schedule("Preempt", notice_s=PREEMPT_NOTICE_S)
        while True:
            step += 1
            state["w"][0] = step
            state["step"] = step
            time.sleep(PREEMPT_STEP_S)
            if watcher.should_stop(step):
                break
        r, stats = watcher.last, ckpt.last_save
        served, acked = server.first_served[event], server.acks[0][0]
        watcher.close()
    shutil.rmtree(root, ignore_errors=True)
    assert r is not None and r.fast_at is not None and r.seen_at is not None and stats is not None
    return {
        "posted_to_fast_s": r.fast_at - posted,
        "served_to_fast_s": r.fast_at - served,
        "poll_wait_s": served - posted,
        "seen_after_served_s": r.seen_at - served,
        "loop_s": stats.started - r.seen_at,
        "blocking_s": stats.blocking_s,
        "write_s": (stats.fast_s or 0.0) - stats.blocking_s,
        "ack_after_commit_s": acked - r.fast_at,
        "acknowledged": r.acknowledged,
        "note": r.note,
    }


def measure_preempt(runs: int, nbytes: int, folder: Path) -> dict:
    """``runs`` preemptions with no save in flight and ``runs`` with one, each followed by dd's
    write of the same bytes to the same disk (the ceiling)."""
    rng = random.Random(23)
    start_cpu = cpu_mark()
    out: dict = {
        "bytes": nbytes,
        "runs": runs,
        "when": datetime.now(UTC).isoformat(timespec="minutes"),
    }
    for variant, in_flight in (("idle", False), ("in_flight", True)):
        rows = []
        for i in range(runs):
            row = preempt_run(folder / "preempt", nbytes, in_flight, rng)
            row["ceiling"] = dd_ceiling(nbytes, folder)
            print(
                f"preempt {variant} {i + 1}/{runs}: event served -> fast commit "
                f"{row['served_to_fast_s']:.2f} s (write {row['write_s']:.2f} s; dd "
                f"{row['ceiling']['seconds']:.2f} s)",
                flush=True,
            )
            rows.append(row)
        out[variant] = rows
    out["cpu_elsewhere"] = others_cpu_share(start_cpu)
    return out


def measure_ddp(mode: str, reps: int, folder: Path) -> dict:
    """Both variants under torchrun (4 ranks, gloo), each followed by dd writing the model's
    bytes once to the same disk (the ceiling)."""
    start_cpu = cpu_mark()
    out: dict = {"ranks": DDP_RANKS, "when": datetime.now(UTC).isoformat(timespec="minutes")}
    for variant, replicated in (("each", False), ("once", True)):
        shutil.rmtree(folder / f"ddp-{variant}", ignore_errors=True)
        result = folder / f"ddp-{variant}.json"
        cfg = {
            "ddp": True,
            "replicated": replicated,
            "bytes": DDP_SIZES[mode],
            "reps": reps,
            "dir": str(folder),
            "out": str(result),
        }
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={DDP_RANKS}"]
        cmd += ["--master-port=0", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
        run = subprocess.run(
            [*cmd, str(SCRIPT), "--worker", json.dumps(cfg)], capture_output=True, text=True
        )
        if run.returncode:
            out[variant] = {"error": run.stderr[-1500:]}
            print(f"ddp {variant}: FAILED {run.stderr[-800:]}", flush=True)
            continue
        entry = json.loads(result.read_text())
        entry["ceiling"] = dd_ceiling(entry["tensor_bytes"], folder)
        saves = entry["saves"][1:] or entry["saves"]  # the first save makes the buffers
        entry["written"] = statistics.median(r["written"] for r in saves)
        entry["fast_s"] = statistics.median(r["fast_s"] for r in saves)
        entry["blocking_s"] = statistics.median(r["blocking_s"] for r in saves)
        entry["durable_s"] = statistics.median(r.get("durable_s", 0.0) for r in saves)
        out[variant] = entry
        shutil.rmtree(folder / f"ddp-{variant}", ignore_errors=True)
        print(
            f"ddp {variant}: {entry['written'] / entry['tensor_bytes']:.2f}x the model's bytes "
            f"per save, durable on the fast tiers {entry['fast_s']:.2f} s (dd "
            f"{entry['ceiling']['seconds']:.2f} s)",
            flush=True,
        )
    out["cpu_elsewhere"] = others_cpu_share(start_cpu)
    return out
