"""What runs inside each fresh worker process of ``checkpoint_bench.py``: one (state, tool)
pair's timed saves, the growth check, one first-save process, one DDP rank."""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
import time
from pathlib import Path

from _ckpt_config import (
    ASYNC_TOOLS,
    DDP_PER_NODE,
    DDP_RANKS,
    FIRST_TRAIN_S,
    IDLE_S,
    WINDOW_SAVES,
    WINDOW_STEPS,
    MiB,
)
from _ckpt_states import build_state, same_state, tensor_bytes
from _ckpt_tools import (
    TOOL_CLASSES,
    PeakRss,
    Stoker,
    _log,
    on_disk,
    prune,
    rss_bytes,
    steps_for,
    training_step,
    wait_in_thread,
)


def run(cfg: dict) -> dict:
    """The worker ``cfg`` asks for."""
    if cfg.get("ddp"):
        return ddp_worker(cfg)
    if cfg.get("first"):
        return first_save_worker(cfg)
    return growth_worker(cfg) if cfg.get("growth") else worker(cfg)


def worker(cfg: dict) -> dict:
    """One (state, tool) pair in this fresh process: timed saves, interference, memory."""
    import torch

    torch.set_num_threads(1)
    state = build_state(cfg["state"], cfg["mode"])
    nbytes = tensor_bytes(state)
    root = Path(cfg["dir"]) / cfg["state"] / cfg["tool"]
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    gc.collect()
    base = rss_bytes()  # before the tool exists: buffers it keeps between saves count
    tool = TOOL_CLASSES[cfg["tool"]](root)
    label = f"{cfg['state']:<6} {cfg['tool']:<15}"
    step, runs = 0, []
    for rep in range(cfg["warmup"] + cfg["reps"]):
        step += 1
        os.sync()
        with PeakRss() as mem:
            start = time.perf_counter()
            tool.save(step, state)
            blocked = time.perf_counter()
            tool.wait()
            durable = time.perf_counter()
        row = {
            "rep": rep,
            "warmup": rep < cfg["warmup"],
            "blocking_s": blocked - start,
            "durable_s": durable - start,
            "peak_extra_bytes": mem.peak - base,
            **tool.stats(),
        }
        if cfg["tool"] != "stoker":
            row["on_disk_bytes"] = on_disk(next(root.glob(f"step-{step}*")))
        runs.append(row)
        prune(root, cfg["tool"], step)
        _log(
            f"  {label} save {rep + 1}{' (first)' if row['warmup'] else ''}: blocking "
            f"{row['blocking_s']:.3f} s, durable {row['durable_s']:.2f} s, "
            f"extra RSS {row['peak_extra_bytes'] / nbytes:.2f}x the state"
        )
    result = {"bytes": nbytes, "base_rss": base, "runs": runs}
    if cfg["tool"] == "stoker":
        result["verified"] = verify_stoker(tool, step, state)
        _log(f"  {label} load: {result['verified']}")
    if cfg["tool"] in ASYNC_TOOLS:
        result["interference"] = interference(cfg["tool"], tool, state, step, cfg["reps"], label)
    tool.close()
    shutil.rmtree(root, ignore_errors=True)
    return result


def verify_stoker(tool: Stoker, step: int, state: dict) -> dict:
    """Load the newest checkpoint back and compare it with the state (every tensor, every
    object), so that the figures are of saves that round-trip."""
    start = time.perf_counter()
    restored = tool.ckpt.load()
    seconds = time.perf_counter() - start
    problem = same_state(state, restored.state)
    if restored.step != step:
        problem = f"loaded step {restored.step}, expected {step}"
    return {
        "ok": problem is None,
        "problem": problem,
        "load_s": seconds,
        "tier": str(restored.tier),
    }


def interference(name: str, tool, state: dict, step: int, reps: int, label: str) -> dict:
    step_fn = training_step()
    idle, during, rows = [], [], []
    for _ in range(reps):
        os.sync()
        idle_now = steps_for(step_fn, IDLE_S)
        times, blocked, window, saves = [], [], 0.0, 0
        # One save of a small state is over in a few steps: save again (as a loop that
        # checkpoints often would) until the median has enough steps under it.
        while len(times) < WINDOW_STEPS and saves < WINDOW_SAVES:
            saves, step = saves + 1, step + 1
            start = time.perf_counter()
            tool.save(step, state)
            blocked.append(time.perf_counter() - start)
            thread, done, errors = wait_in_thread(tool)
            while not done.is_set():
                times.append(step_fn())
            window += time.perf_counter() - start
            thread.join()
            if errors:
                raise errors[0]
            prune(tool.root, name, step)
        idle += idle_now
        during += times
        rows.append(
            {
                "saves": saves,
                "blocking_s": statistics.median(blocked),
                "window_s": window,
                "steps": len(times),
                "idle_ms": 1e3 * statistics.median(idle_now),
                "during_ms": 1e3 * statistics.median(times) if times else None,
            }
        )
        _log(
            f"  {label} under training: {saves} save(s), {len(times)} steps in "
            f"{window:.2f} s, median {rows[-1]['during_ms'] or 0:.1f} ms "
            f"(idle {rows[-1]['idle_ms']:.1f} ms)"
        )
    return {
        "idle_ms": 1e3 * statistics.median(idle),
        "during_ms": 1e3 * statistics.median(during) if during else None,
        "steps": len(during),
        "runs": rows,
    }


def growth_worker(cfg: dict) -> dict:
    """stoker saving the tensor state over and over: RSS after each save, once durable."""
    import torch

    torch.set_num_threads(1)
    state = build_state("tensor", cfg["mode"])
    root = Path(cfg["dir"]) / "growth"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    gc.collect()
    base = rss_bytes()
    tool = Stoker(root)
    after = []
    for i in range(cfg["count"]):
        tool.save(i + 1, state)
        tool.wait()
        gc.collect()
        after.append(rss_bytes())
    tool.close()
    shutil.rmtree(root, ignore_errors=True)
    _log(
        f"  growth: RSS after save 1 {after[0] / MiB:,.0f} MiB, after {len(after)} {after[-1] / MiB:,.0f} MiB"
    )
    return {"bytes": tensor_bytes(state), "base_rss": base, "rss_after": after}


def first_save_worker(cfg: dict) -> dict:
    """One stoker Checkpointer in this fresh process: made (with ``reserve_like=state`` or
    without), a training loop steps for FIRST_TRAIN_S, then the first save and ``reps`` more;
    the blocking time of each."""
    import torch

    torch.set_num_threads(1)
    state = build_state(cfg["state"], cfg["mode"])
    root = Path(cfg["dir"]) / "first" / cfg["variant"]
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    step_fn = training_step()
    gc.collect()
    steps_for(step_fn, IDLE_S)  # warm: the first second's steps run slower
    idle = steps_for(step_fn, IDLE_S)
    from stoker.checkpoint import Checkpointer

    made = time.perf_counter()
    like = state if cfg["variant"] == "reserve" else None
    ckpt = Checkpointer(fast=str(root), durable=None, keep_last=2, reserve_like=like)
    made_s = time.perf_counter() - made
    host = ckpt._snapshot.host if ckpt._snapshot is not None else None
    prefaulting, after = [], []  # training steps while the buffer's pages go in, and after
    while time.perf_counter() < made + FIRST_TRAIN_S:
        busy = host is not None and not host.ready
        (prefaulting if busy else after).append(step_fn())
    ready_at_save = host.ready if host is not None else None
    blocking = []
    for step in range(1, cfg["reps"] + 2):
        os.sync()
        start = time.perf_counter()
        ckpt.save(step, state)
        blocking.append(time.perf_counter() - start)
        ckpt.wait()
    label = (
        f"{cfg['state']:<6} stoker, {'reserve_like=state' if like is not None else 'no reserve'}"
    )
    _log(
        f"  {label}: first save blocks {blocking[0]:.3f} s, later "
        + ", ".join(f"{b:.3f}" for b in blocking[1:])
        + (f" (prefault {host.prefault_s:.2f} s by {host.method})" if host and host.method else "")
    )
    ckpt.close()
    shutil.rmtree(root, ignore_errors=True)
    return {
        "bytes": tensor_bytes(state),
        "blocking_s": blocking,
        "made_s": made_s,
        "prefault_s": host.prefault_s if host is not None else None,
        "method": host.method if host is not None else None,
        "ready_at_save": ready_at_save,
        "idle_ms": 1e3 * statistics.median(idle),
        "prefaulting_ms": 1e3 * statistics.median(prefaulting) if prefaulting else None,
        "prefaulting_steps": len(prefaulting),
        "after_ms": 1e3 * statistics.median(after) if after else None,
        "train_s": FIRST_TRAIN_S,
    }


def ddp_worker(cfg: dict) -> dict:
    """One rank of a DDP job under torchrun: every rank holds the same model (and Adam-like
    state), and saves it ``reps`` + 1 times, with ``replicated=True`` or without. Rank 0
    counts the bytes each step left on the fast tiers (both nodes' folders) after ``wait()``."""
    import torch
    import torch.distributed as dist

    from stoker.checkpoint import Checkpointer

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    gen = torch.Generator().manual_seed(0)
    per = cfg["bytes"] // 4 // 24  # float32 elements per tensor: 24 tensors
    model = {f"layer{i}.weight": torch.randn(per, generator=gen) for i in range(16)}
    optim = {f"layer{i}.exp_avg": torch.randn(per, generator=gen) for i in range(8)}
    state = {"model": model, "optim": optim, "step": 0}
    base = Path(cfg["dir"]) / ("ddp-once" if cfg["replicated"] else "ddp-each")
    fast = base / f"node{rank // DDP_PER_NODE}"
    # node-local fast tiers need a durable one for replicated=: a folder on the same disk here
    ckpt = Checkpointer(fast, base / "durable", keep_last=1)
    rows = []
    for step in range(cfg["reps"] + 1):
        os.sync()
        dist.barrier()
        stats = ckpt.save(step, state, replicated=True if cfg["replicated"] else None)
        ckpt.wait()
        written = sum(
            p.stat().st_size
            for node in base.glob("node*")
            for p in (node / f"step-{step:012d}").glob("*")
            if p.name.startswith("shard-")
        )
        slowest = [None] * DDP_RANKS
        dist.all_gather_object(
            slowest, (stats.blocking_s, stats.fast_s or 0.0, stats.durable_s or 0.0)
        )
        rows.append(
            {
                "written": written,
                "blocking_s": max(b for b, _, _ in slowest),
                "fast_s": max(f for _, f, _ in slowest),
                "durable_s": max(d for _, _, d in slowest),
            }
        )
    ckpt.close()
    tensor = sum(t.numel() * t.element_size() for d in (model, optim) for t in d.values())
    if rank == 0:
        Path(cfg["out"]).write_text(json.dumps({"tensor_bytes": tensor, "saves": rows}))
    dist.destroy_process_group()
    return {}
