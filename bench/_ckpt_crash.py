"""Crash safety: a child saving through stoker in a loop is SIGKILLed at a random moment, the
newest step is damaged, ``stoker checkpoint prune --keep-last 1`` runs, and a fresh process
must load the newest step left whole; N times over the same folder."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from _ckpt_config import CRASH_BYTES, CRASH_KILL_S
from _ckpt_tools import _log

LOGS = Path(__file__).resolve().parents[1] / ".bench" / "logs"


CRASH_CHILD = r"""
import sys, torch
from stoker.checkpoint import Checkpointer
folder, first, numel = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ckpt = Checkpointer(fast=folder, durable=None, keep_last=2)
print("ready", flush=True)
for step in range(first, first + 999):
    ckpt.save(step, {"t": torch.full((numel,), float(step)), "step": step, "note": f"step {step}"})
    ckpt.wait()
    print(f"committed {step}", flush=True)
print("done", flush=True)
"""

CRASH_LOADER = r"""
import json, sys, time
import torch
from stoker.checkpoint import Checkpointer
start = time.perf_counter()
ckpt = None
try:
    ckpt = Checkpointer(fast=sys.argv[1], durable=None, keep_last=2)
    r = ckpt.load()
    t = r.state["t"]
    out = {"ok": True, "step": r.step, "tier": str(r.tier), "state_step": r.state.get("step"),
           "numel": t.numel(), "min": float(t.min()), "max": float(t.max())}
except Exception as e:
    out = {"ok": False, "error": f"{type(e).__name__}: {e}"[:400]}
finally:
    if ckpt is not None:
        try:
            ckpt.close()
        except Exception as e:
            out["close_error"] = f"{type(e).__name__}: {e}"[:400]
out["seconds"] = time.perf_counter() - start
print("RESULT " + json.dumps(out))
"""


def crash_once(folder: Path, first: int, log: Path, until_committed: int = 0) -> dict:
    """Start a saving child, SIGKILL it at a random moment (or once it has committed
    ``until_committed`` steps); what it had committed."""
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", CRASH_CHILD, str(folder), str(first), str(CRASH_BYTES // 4)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,  # its own process group: helpers it starts can be found
        )
    ready, committed = threading.Event(), []

    def read() -> None:
        for line in proc.stdout:
            if line.startswith("ready"):
                ready.set()
            elif line.startswith("committed "):
                committed.append(int(line.split()[1]))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 120  # imports take seconds; a child that never says ready
    while not ready.wait(0.1) and proc.poll() is None and time.monotonic() < deadline:
        pass
    delay = random.uniform(*CRASH_KILL_S)
    if ready.is_set() and until_committed:
        while len(committed) < until_committed and proc.poll() is None:
            time.sleep(0.01)
    elif ready.is_set():
        time.sleep(delay)
    exited_first = proc.poll() is not None
    if not exited_first:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    survivors = _kill_group(proc.pid)
    reader.join(timeout=10)
    said = log.read_text(errors="replace").strip().splitlines()
    return {
        "ready": ready.is_set(),
        "child_error": None if ready.is_set() or not said else said[-1][:300],
        "kill_after_s": delay,
        "exited_before_kill": exited_first,
        "returncode": proc.returncode,
        "committed": list(committed),
        "survivors": survivors,
    }


def _kill_group(pgid: int) -> bool:
    """True when processes of the child's group outlived it (stoker helpers); they are killed."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    os.killpg(pgid, signal.SIGKILL)
    return True


def measure_crash(count: int, folder: Path) -> dict:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    logs = LOGS
    logs.mkdir(parents=True, exist_ok=True)
    rng_seed = int(time.time())
    random.seed(rng_seed)
    # A first step, committed before any kill: a load after a kill that came before any commit
    # has nothing to load, which says nothing about the tool.
    seed = crash_once(folder, 0, logs / "checkpoint-crash-seed.err", until_committed=1)
    last_committed: int | None = seed["committed"][-1] if seed["committed"] else None
    damaged: set[int] = set()  # steps this harness damaged (kept by prune for inspection)
    rows = []
    for i in range(count):
        first = (i + 1) * 1000  # steps rise across children, so "newest" is well defined
        kill = crash_once(folder, first, logs / f"checkpoint-crash-{i}.err")
        if kill["committed"]:
            last_committed = kill["committed"][-1]
        in_flight = (kill["committed"][-1] + 1) if kill["committed"] else first
        # Then the newest step is damaged (a torn manifest, or one flipped byte in its shard),
        # `stoker checkpoint prune --keep-last 1` runs, and the load must take the newest step
        # left whole: retention must not have deleted it.
        damage = damage_newest(folder, "torn manifest" if i % 2 else "flipped byte", damaged)
        if damage:
            damaged.add(damage["step"])
        # the newest whole step, before the prune: the one the load must take
        expected = max((s for s in committed_on_disk(folder) if s not in damaged), default=None)
        pruned = subprocess.run(
            [STOKER_CLI, "checkpoint", "prune", str(folder), "--keep-last", "1", "--json"],
            capture_output=True,
            text=True,
        )
        kept = expected is None or expected in committed_on_disk(folder)
        proc = subprocess.run(
            [sys.executable, "-c", CRASH_LOADER, str(folder)], capture_output=True, text=True
        )
        found = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        load = json.loads(found[-1][7:]) if found else {"ok": False, "error": proc.stderr[-400:]}
        verdict = judge_load(load, last_committed, in_flight, harness_error=not found)
        # A step older than the last commit is right when every newer one was damaged here:
        # the load must take exactly the newest whole step, which the prune must have kept.
        if verdict == "stale" and load["step"] == expected:
            verdict = "ok"
        if load.get("ok") and expected is not None and load["step"] != expected:
            verdict = "lost the newest whole step"
        if not kept:
            verdict = "lost the newest whole step"
        rows.append(
            {
                **kill,
                "load": load,
                "last_committed": last_committed,
                "verdict": verdict,
                "damaged": damage,
                "expected": expected,
                "prune_exit": pruned.returncode,
                "prune": pruned.stdout[-400:] or pruned.stderr[-400:],
            }
        )
        _log(
            f"  crash {i + 1}/{count}: killed {kill['kill_after_s']:.2f} s after ready, "
            f"{len(kill['committed'])} committed, damaged {damage and damage['step']}, prune "
            f"exit {pruned.returncode}, load -> {load.get('step', load.get('error'))} "
            f"(expected {expected}) [{verdict}]"
        )
    entries = [p for p in folder.rglob("*")]
    result = {
        "count": count,
        "seed": rng_seed,
        "runs": rows,
        "folder_bytes": sum(p.stat().st_size for p in entries if p.is_file()),
        "folder_entries": len(entries),
        "folder_listing": sorted(  # what the kills left behind, for whoever reads the JSON
            f"{p.relative_to(folder)} {p.stat().st_size if p.is_file() else 'dir'}" for p in entries
        )[:60],
        "state_bytes": CRASH_BYTES,
    }
    shutil.rmtree(folder, ignore_errors=True)
    return result


STOKER_CLI = str(Path(sys.executable).with_name("stoker"))


def committed_on_disk(folder: Path) -> list[int]:
    return sorted(int(p.parent.name[5:]) for p in folder.glob("step-*/manifest.json"))


def damage_newest(folder: Path, how: str, damaged: set[int]) -> dict | None:
    """Damage the newest whole committed step, when an older one is left whole to fall back on
    (a lone step damaged leaves nothing to load, which no tool can help)."""
    steps = [s for s in committed_on_disk(folder) if s not in damaged]
    if len(steps) < 2:
        return None
    step_folder = folder / f"step-{steps[-1]:012d}"
    if how == "torn manifest":
        manifest = step_folder / "manifest.json"
        data = manifest.read_bytes()
        manifest.write_bytes(data[: len(data) // 2])
    else:
        shard = next(step_folder.glob("shard-*.bin"))
        with open(shard, "r+b") as f:
            f.seek(4096)
            byte = f.read(1)
            f.seek(4096)
            f.write(bytes([byte[0] ^ 0x01]))
    return {"step": steps[-1], "how": how}


def judge_load(load: dict, last_committed: int | None, in_flight: int, harness_error: bool) -> str:
    """ok, or what is wrong with what the fresh process loaded after the kill."""
    if harness_error:
        return "loader crashed"
    if not load["ok"]:
        return "failed, nothing committed yet (allowed)" if last_committed is None else "failed"
    step = load["step"]
    if load["numel"] != CRASH_BYTES // 4 or not (load["min"] == load["max"] == float(step)):
        return "corrupt"
    if load["state_step"] != step:
        return "corrupt"
    if last_committed is not None and step < last_committed:
        return "stale"
    if step > in_flight:
        return "from the future"
    return "ok"
