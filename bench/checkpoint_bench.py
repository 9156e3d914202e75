"""``stoker.checkpoint`` against ``torch.save`` and torch's distributed checkpoint (DCP), one run.

Three states: 1) one 1 GiB float32 tensor; 2) a GPT-2-small-shaped model (124M parameters) with
Adam state (``exp_avg``, ``exp_avg_sq`` and ``step`` per parameter, ~1.5 GB); 3) 10,000 tensors
of 1-64 KiB plus Python objects (``--quick``: 128 MiB, ~10M parameters, 1,000 tensors). Tools:

* ``torch.save`` into a temporary file, flush, ``fsync``, rename, ``fsync`` of the folder: the
  honest synchronous baseline;
* ``dcp.save`` with a ``FileSystemWriter`` (its defaults: one thread, ``sync_files=True``);
* ``dcp.async_save``, same writer (staging into fresh CPU memory, then a writer thread);
* stoker: ``Checkpointer(fast=dir, durable=None, keep_last=2)``, ``save()`` then ``wait()``.

Each (state, tool) pair runs in a fresh process (so that one tool's allocator or cached buffers
cannot skew the next one's memory), with ``torch.set_num_threads(1)``: on 2 cores the training
loop takes one and the background save the other. Per save, after ``os.sync()`` (the page cache
cannot be dropped without privileges):

* blocking: the save call (``torch.save``: all of it, ``fsync`` included; ``dcp.save``: the call;
  ``async_save``: until it returns; stoker: until ``save()`` returns);
* durable: from the save call until the data is ``fsync``'d (sync tools: the call; ``async_save``:
  until ``future.result()`` returns; stoker: ``wait()``, and its own ``last_save.fast_s``);
* memory: the peak resident memory during the save (the kernel's VmHWM, reset through
  ``/proc/self/clear_refs`` before each save, and a 5 ms sampler) less the process's memory
  before the tool was created, over the state's tensor bytes: cached staging buffers count.

Each tool's first save is kept out of the medians (its figures are shown apart), then come
``--reps`` saves. After each tool's process, ``dd if=/dev/zero oflag=direct conv=fsync`` writes
the same bytes to the same disk: the ceiling, measured between the tools to follow the disk's
drift (and dd through the page cache, for comparison).

Interference (async tools only; sync tools block the loop instead): a CPU training loop (MLP of
two 1024-wide layers, batch 64) steps idle for a second, then the tool starts a save and the loop
keeps stepping until it is durable (a helper thread waits on it), saving again while fewer than
30 steps fell inside; the figure is the median step time during the saves against the idle
second before. Growth: stoker saves the tensor state 20 times (5 with ``--quick``) and the
process's RSS after the first and the last save are compared. Crash safety (``--crash N``): a
child saves a 32 MiB state holding its step number in a loop through stoker (keep_last=2) and
prints "committed STEP" after each ``wait()``; it is SIGKILLed 0.05-1.5 s after it says "ready",
and a fresh process loads the newest checkpoint from the same folder, N times over (so the
folder gathers the debris of every kill). First save (``--parts first``; the tensor and model
states): per state, ``torch.save``'s median blocking in its own process, then fresh processes in
turns of stoker without a reservation and with ``reserve_like=state``: the MLP steps for a
second, the Checkpointer is made, the MLP steps 10 s more, then the first save and 3 later ones;
the median of the first saves against the median of the later ones (3 rounds, 2 with
``--quick``). A run of some parts keeps the other parts' figures.

    .venv/bin/python bench/checkpoint_bench.py [--quick] [--states tensor,model,small]
        [--reps 3] [--crash 50] [--dir .bench/ckpt] [--parts compare,first,...]
        [--write BENCHMARKS.md]

Results: ``bench/results/checkpoint.json`` (``--quick``: ``.bench/results/checkpoint.json``,
never published); a run of some states, tools or parts updates only those entries, each part
stamped with its own date and command, and ``bench/_render_checkpoint.py`` writes the section
from the file. The measuring lives in ``_ckpt_*.py``: settings, states, tools, the worker
processes, the parent side of each part, crash safety.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from importlib.metadata import version
from pathlib import Path

import _ckpt_config as cfgmod
from _ckpt_config import FIRST_ROUNDS, FIRST_STATES, PARTS, SIZES, STATES, TOOLS
from _markdown import publish
from _results import RESULTS, load, now, own_command, save
from render import render

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / ".bench"
NAME = "checkpoint"


def machine(folder: Path) -> dict:
    mem = Path("/proc/meminfo").read_text().split()[1]
    return {
        "nproc": os.cpu_count(),
        "ram_gib": int(mem) / (1 << 20),
        "python": sys.version.split()[0],
        "torch": version("torch"),
        "dir": str(folder.relative_to(ROOT)) if folder.is_relative_to(ROOT) else str(folder),
    }


def earlier(folder: Path, mode: str) -> dict:
    """The results a run of some parts adds to: the last run's, in the same mode."""
    if (folder / f"{NAME}.json").exists():
        old = load(NAME, folder)["results"]
        if old.get("mode") == mode:
            return old
    return {"mode": mode, "states": {}, "parts": {}}


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="128 MiB, ~10M params, 1,000 tensors")
    parser.add_argument("--states", default=",".join(STATES), help="which of tensor,model,small")
    parser.add_argument("--tools", default=",".join(TOOLS), help="which of " + ",".join(TOOLS))
    parser.add_argument("--reps", type=int, help="timed saves per tool (default 3, 2 with --quick)")
    parser.add_argument("--warmup", type=int, default=1, help="first saves kept out of the medians")
    parser.add_argument(
        "--crash", type=int, help="kill-and-load rounds (default 50, 5 with --quick; 0 skips)"
    )
    parser.add_argument(
        "--growth", type=int, help="saves in the growth check (default 20, 5 with --quick; 0 skips)"
    )
    parser.add_argument("--dir", type=Path, default=BENCH / "ckpt", help="where checkpoints go")
    parser.add_argument(
        "--write", type=Path, help="replace the '## checkpoint:' section of this file"
    )
    parser.add_argument(
        "--parts", default=",".join(PARTS), help="which of " + ",".join(PARTS) + " to run"
    )
    parser.add_argument(
        "--preempt-runs", type=int, help="preemptions per case (default 3, 1 with --quick)"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.states = [s for s in args.states.split(",") if s]
    args.tools = [t for t in args.tools.split(",") if t]
    args.parts = [p for p in args.parts.split(",") if p]
    if (
        unknown := (set(args.states) - set(STATES))
        | (set(args.tools) - set(TOOLS))
        | (set(args.parts) - set(PARTS))
    ):
        parser.error(f"unknown states, tools or parts: {', '.join(sorted(unknown))}")
    if args.quick and args.write:
        parser.error("--quick results are not published: run without --write (they print)")
    return args


def main() -> None:
    args = parse()
    if args.worker:
        from _ckpt_tools import quiet_warnings

        quiet_warnings()  # before torch is imported: it warns on import
        import _ckpt_worker

        print("RESULT " + json.dumps(_ckpt_worker.run(json.loads(args.worker))), flush=True)
        return
    from _ckpt_crash import measure_crash
    from _ckpt_measure import (
        dd_ceiling,
        measure_ddp,
        measure_first_save,
        measure_preempt,
        spawn_worker,
        stoker_available,
    )

    mode = "quick" if args.quick else "full"
    reps = args.reps or (2 if args.quick else 3)
    crash = args.crash if args.crash is not None else (5 if args.quick else 50)
    growth = args.growth if args.growth is not None else SIZES[mode][3]
    folder, states, tools, parts = args.dir.resolve(), args.states, args.tools, args.parts
    out = BENCH / "results" if args.quick else RESULTS
    stamp, command = now(), own_command()

    res = earlier(out, mode)
    res.update(machine=machine(folder), reps=reps, config=cfgmod.as_dict())
    res.setdefault("parts", {})

    def done(part: str) -> None:
        res["parts"][part] = {"measured": stamp, "command": command}
        save(NAME, res, command=command, measured=stamp, folder=out)

    skipped = stoker_available() if "stoker" in tools else None
    res["stoker_skipped"] = skipped and f"`import stoker.checkpoint` failed ({skipped})"
    if skipped:
        print(f"stoker skipped: import stoker.checkpoint failed: {skipped}", flush=True)
        tools.remove("stoker")
        for st in res["states"].values():  # an older run's figures would read as today's
            st["tools"].pop("stoker", None)

    for state in states if "compare" in parts else []:
        st = res["states"].setdefault(state, {"tools": {}})
        for tool in tools:
            cfg = {
                "state": state,
                "tool": tool,
                "mode": mode,
                "reps": reps,
                "warmup": args.warmup,
                "dir": str(folder),
            }
            print(f"{state} / {tool}", flush=True)
            entry = spawn_worker(cfg)
            if "bytes" in entry:
                st["bytes"] = entry["bytes"]
                entry["ceiling"] = dd_ceiling(entry["bytes"], folder)
                c = entry["ceiling"]
                print(f"  dd ceiling: {c['seconds']:.2f} s ({c['mb_s']:.0f} MB/s)", flush=True)
            else:
                print(f"  FAILED: {entry['error'][-500:]}", flush=True)
            st["tools"][tool] = entry
        done(f"compare {state}")

    if "stoker" in tools and "tensor" in states and growth and "growth" in parts:
        print(f"growth: {growth} stoker saves of the tensor state", flush=True)
        cfg = {"growth": True, "mode": mode, "count": growth, "dir": str(folder)}
        res["growth"] = spawn_worker(cfg)
        done("growth")
    if "stoker" in tools and crash and "crash" in parts:
        print(f"crash safety: {crash} kills", flush=True)
        res["crash"] = measure_crash(crash, folder / "crash")
        done("crash")
    if skipped:
        for part in ("growth", "crash", "preempt", "ddp", "first_save"):
            res.pop(part, None)
    first_states = [s for s in states if s in FIRST_STATES]
    if "stoker" in tools and "preempt" in parts and not skipped:
        runs = args.preempt_runs or (1 if args.quick else 3)
        res["preempt"] = measure_preempt(runs, SIZES[mode][0], folder)
        done("preempt")
    if "stoker" in tools and "ddp" in parts and not skipped:
        res["ddp"] = measure_ddp(mode, max(reps, 2), folder)
        done("ddp")
    if "stoker" in tools and "first" in parts and first_states:
        rounds = 2 if args.quick else FIRST_ROUNDS
        res["first_save"] = measure_first_save(first_states, mode, max(reps, 3), folder, rounds)
        done("first")
    save(NAME, res, command=command, measured=stamp, folder=out)
    publish(render(NAME, out), args.write)


if __name__ == "__main__":
    main()
