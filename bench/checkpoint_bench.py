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
``--quick``). A run without the ``compare`` part rewrites only its parts' subsections.

    .venv/bin/python bench/checkpoint_bench.py [--quick] [--states tensor,model,small]
        [--reps 3] [--crash 50] [--dir .bench/ckpt] [--parts compare,first,...]
        [--write BENCHMARKS.md]

Raw results: .bench/results/checkpoint.json (checkpoint-quick.json with ``--quick``); a run of
some states or tools updates only those entries, and the section is written from the file.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import deque
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from _machine import cpu_mark, others_cpu_share
from _markdown import replace_section

from stoker.store._posix import fsync_dir

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / ".bench"
MiB, GiB = 1 << 20, 1 << 30
STATES = ("tensor", "model", "small")
TOOLS = ("torch.save", "dcp.save", "dcp.async_save", "stoker")
ASYNC_TOOLS = ("dcp.async_save", "stoker")
PARTS = (
    "compare",
    "growth",
    "crash",
    "first",
    "preempt",
    "ddp",
)  # --parts: which figures a run measures
FIRST_STATES = ("tensor", "model")  # the first-save part's states
TARGET_BLOCKING, TARGET_CEILING, TARGET_MEMORY, TARGET_GROWTH = 0.1, 1.1, 1.1, 0.02
MLP_WIDTH, MLP_BATCH, IDLE_S = 1024, 64, 1.0
WINDOW_STEPS, WINDOW_SAVES = 30, 20  # short saves repeat until this many steps fall inside
CRASH_BYTES, CRASH_KILL_S = 32 * MiB, (0.05, 1.5)

# (tensor bytes, GPT shape: vocab, context, width, layers, small tensors, growth saves)
SIZES = {
    "full": (GiB, (50257, 1024, 768, 12), 10_000, 20),
    "quick": (128 * MiB, (32000, 512, 256, 2), 1_000, 5),
}


# --------------------------------------------------------------------------------- states
def build_state(kind: str, mode: str) -> dict:
    import torch

    torch.manual_seed(0)
    tensor_bytes, gpt, small, _ = SIZES[mode]
    if kind == "tensor":
        return {"weights": torch.rand(tensor_bytes // 4), "step": 1000}
    if kind == "model":
        return gpt_state(*gpt)
    return small_state(small)


def gpt_state(vocab: int, context: int, width: int, layers: int) -> dict:
    """GPT-2's parameter shapes (tied head), random values, and Adam's state for each."""
    import torch
    from torch import nn

    def block() -> nn.Module:
        return nn.ModuleDict(
            {
                "ln_1": nn.LayerNorm(width),
                "attn": nn.ModuleDict(
                    {"c_attn": nn.Linear(width, 3 * width), "c_proj": nn.Linear(width, width)}
                ),
                "ln_2": nn.LayerNorm(width),
                "mlp": nn.ModuleDict(
                    {"c_fc": nn.Linear(width, 4 * width), "c_proj": nn.Linear(4 * width, width)}
                ),
            }
        )

    with torch.device("meta"):  # skip the default init: filling once below is enough
        model = nn.ModuleDict(
            {
                "wte": nn.Embedding(vocab, width),
                "wpe": nn.Embedding(context, width),
                "h": nn.ModuleList(block() for _ in range(layers)),
                "ln_f": nn.LayerNorm(width),
            }
        )
    model = model.to_empty(device="cpu")
    params = dict(model.named_parameters())
    with torch.no_grad():
        for p in params.values():
            p.uniform_(-0.02, 0.02)
    # Keyed by parameter name, as DCP's get_optimizer_state_dict gives it (DCP wants str keys).
    optim = {
        "state": {
            name: {
                "step": torch.tensor(1000.0),
                "exp_avg": torch.empty_like(p).uniform_(-1e-3, 1e-3),
                "exp_avg_sq": torch.empty_like(p).uniform_(0, 1e-6),
            }
            for name, p in params.items()
        },
        "param_groups": [
            {
                "lr": 3e-4,
                "betas": (0.9, 0.999),
                "eps": 1e-8,
                "weight_decay": 0.1,
                "amsgrad": False,
                "params": list(params),
            }
        ],
    }
    return {"model": model.state_dict(), "optim": optim, "step": 1000}


def small_state(count: int) -> dict:
    import torch

    rng = random.Random(1)
    tensors = {
        f"layer{i // 100:03d}.t{i:05d}": torch.rand(rng.randint(256, 16384))  # 1-64 KiB
        for i in range(count)
    }
    objects = {
        "epoch": 3,
        "tokens_seen": 123_456_789_000,
        "run": "gpt-bench",
        "lr_schedule": [3e-4 * 0.99**i for i in range(100)],
        "data": {"shard": "shard-0042", "offset": 1234567, "seen": list(range(0, 1000, 7))},
        "rng": {"seed": 1234, "python": list(range(32)), "name": "mt19937"},
        "flags": [True, False, None],
    }
    return {"tensors": tensors, "objects": objects, "step": 1000}


def tensor_bytes(obj) -> int:
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def same_state(a, b, where: str = "") -> str | None:
    """None when ``b`` holds what ``a`` does, else where they first differ."""
    import torch

    if isinstance(a, torch.Tensor):
        ok = isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
        return None if ok else f"tensor {where or '/'}"
    if isinstance(a, dict):
        if not isinstance(b, dict) or set(a) != set(b):
            return f"keys of {where or '/'}"
        for k in a:
            if problem := same_state(a[k], b[k], f"{where}/{k}"):
                return problem
        return None
    if isinstance(a, list | tuple):
        if not isinstance(b, list | tuple) or len(a) != len(b):
            return f"length of {where}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if problem := same_state(x, y, f"{where}/{i}"):
                return problem
        return None
    return None if a == b else f"value {where}"


# --------------------------------------------------------------------------------- tools


class TorchSave:
    def __init__(self, root: Path) -> None:
        self.root = root

    def save(self, step: int, state: dict) -> None:
        import torch

        final = self.root / f"step-{step}.pt"
        tmp = final.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, final)
        fsync_dir(self.root)

    def wait(self) -> None:
        pass

    def stats(self) -> dict:
        return {}

    def close(self) -> None:
        pass


class DcpSave(TorchSave):
    def save(self, step: int, state: dict) -> None:
        import torch.distributed.checkpoint as dcp

        writer = dcp.FileSystemWriter(self.root / f"step-{step}")
        dcp.save(state, storage_writer=writer, no_dist=True)


class DcpAsyncSave(TorchSave):
    future = None

    def save(self, step: int, state: dict) -> None:
        import torch.distributed.checkpoint as dcp

        writer = dcp.FileSystemWriter(self.root / f"step-{step}")
        self.future = dcp.async_save(state, storage_writer=writer, no_dist=True)

    def wait(self) -> None:
        self.future.result()


class Stoker:
    def __init__(self, root: Path) -> None:
        from stoker.checkpoint import Checkpointer

        self.root = root
        self.ckpt = Checkpointer(fast=str(root), durable=None, keep_last=2)

    def save(self, step: int, state: dict) -> None:
        self.ckpt.save(step, state)

    def wait(self) -> None:
        self.ckpt.wait()

    def stats(self) -> dict:
        s = self.ckpt.last_save
        fields = ("step", "bytes", "blocking_s", "fast_s", "durable_s")
        return {f"stoker_{k}": getattr(s, k, None) for k in fields}

    def close(self) -> None:
        self.ckpt.close()


TOOL_CLASSES = {
    "torch.save": TorchSave,
    "dcp.save": DcpSave,
    "dcp.async_save": DcpAsyncSave,
    "stoker": Stoker,
}


def prune(root: Path, tool: str, step: int) -> None:
    """Peers keep only the newest checkpoint (untimed, between saves); stoker prunes itself."""
    if tool == "stoker":
        return
    for p in root.iterdir():
        if p.name not in (f"step-{step}", f"step-{step}.pt"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()


def on_disk(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# --------------------------------------------------------------------------------- memory
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * PAGE


def hwm_bytes() -> int:
    found = re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text())
    return int(found.group(1)) * 1024 if found else 0


def reset_hwm() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:  # the 5 ms sampler alone then
        pass


class PeakRss:
    """Peak resident memory over a ``with`` block: VmHWM (reset on entry) and a 5 ms sampler."""

    def __enter__(self) -> PeakRss:
        reset_hwm()
        self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, rss_bytes())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes(), hwm_bytes())


# --------------------------------------------------------------------------------- training loop
def training_step():
    """One step of a small CPU MLP, returning its seconds: the stand-in for a training loop."""
    import torch
    from torch import nn

    net = nn.Sequential(nn.Linear(MLP_WIDTH, MLP_WIDTH), nn.ReLU(), nn.Linear(MLP_WIDTH, MLP_WIDTH))
    opt = torch.optim.SGD(net.parameters(), lr=1e-4)
    x = torch.randn(MLP_BATCH, MLP_WIDTH)

    def step() -> float:
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        net(x).pow(2).mean().backward()
        opt.step()
        return time.perf_counter() - start

    for _ in range(5):  # warm the allocator and the kernels
        step()
    return step


def steps_for(step, seconds: float) -> list[float]:
    times, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 20:
        times.append(step())
    return times


def wait_in_thread(tool) -> tuple[threading.Thread, threading.Event, list]:
    """Run ``tool.wait()`` in a helper thread: neither tool can be polled without blocking
    the same way (stoker has no ``done()``), so both get the same helper."""
    done, errors = threading.Event(), []

    def run() -> None:
        try:
            tool.wait()
        except BaseException as e:  # re-raised in the main thread
            errors.append(e)
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done, errors


# --------------------------------------------------------------------------------- worker
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


def quiet_warnings() -> None:
    """torch warns that numpy is missing and that DCP runs without a process group: both
    known, both noise in the progress lines."""
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------- parent side
def spawn_worker(cfg: dict) -> dict:
    """Run one worker process; its result, or {"error": ...} with the end of its stderr (whose
    lines are passed on as they come: they are the progress)."""
    start_cpu = cpu_mark()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", json.dumps(cfg)],
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


# --------------------------------------------------------------------------------- crash safety
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
    logs = BENCH / "logs"
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


# --------------------------------------------------------------------------------- report
NAMES = {
    "torch.save": "`torch.save`",
    "dcp.save": "DCP `save`",
    "dcp.async_save": "DCP `async_save`",
    "stoker": "stoker",
}
LABELS = {"tensor": "1 tensor", "model": "GPT model + Adam", "small": "small tensors + objects"}


def timed(entry: dict, field: str) -> float:
    return statistics.median(r[field] for r in entry["runs"] if not r["warmup"])


def first(entry: dict, field: str) -> str:
    found = [r[field] for r in entry["runs"] if r["warmup"]]
    return f"{_s(found[0])} s" if found else "-"  # none with --warmup 0


def has(st: dict, tool: str) -> bool:
    return tool in st["tools"] and "error" not in st["tools"][tool]


def _s(x: float) -> str:
    return f"{x:.3f}" if x < 1 else f"{x:.2f}"


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def cell(st: dict, tool: str, fn) -> str:
    if tool not in st["tools"]:
        return "-"
    if "error" in st["tools"][tool]:
        return "failed"
    return fn(st["tools"][tool])


def ceiling_s(st: dict) -> float | None:
    runs = [e["ceiling"]["seconds"] for e in st["tools"].values() if "ceiling" in e]
    return statistics.median(runs) if runs else None


def state_label(name: str, st: dict) -> str:
    return f"{LABELS[name]}, {st['bytes'] / 1e9:.2f} GB"


def blocking_table(states: dict, misses: list[str]) -> str:
    out = (
        "| state | "
        + " | ".join(NAMES[t] for t in TOOLS)
        + " | stoker / `torch.save` | target | met | first save: `async_save`, stoker |\n"
        "|---|" + "---:|" * len(TOOLS) + "---:|---|---|---|\n"
    )
    for name, st in states.items():
        cells = [cell(st, t, lambda e: _s(timed(e, "blocking_s"))) for t in TOOLS]
        ratio = met = "-"
        if has(st, "stoker") and has(st, "torch.save"):
            r = timed(st["tools"]["stoker"], "blocking_s") / timed(
                st["tools"]["torch.save"], "blocking_s"
            )
            ratio, ok = f"{r:.3f}x", r <= TARGET_BLOCKING
            met = _yes(ok) if name != "small" else ("yes" if ok else "no (not a target)")
            if not ok and name != "small":
                misses.append(
                    f"blocking, {LABELS[name]}: {r:.3f}x `torch.save` (target {TARGET_BLOCKING}x)"
                )
        firsts = ", ".join(cell(st, t, lambda e: first(e, "blocking_s")) for t in ASYNC_TOOLS)
        out += (
            f"| {state_label(name, st)} | "
            + " | ".join(cells)
            + f" | {ratio} | <= {TARGET_BLOCKING}x | {met} | {firsts} |\n"
        )
    return out


def durable_table(states: dict, misses: list[str]) -> str:
    out = (
        "| state | dd ceiling | "
        + " | ".join(NAMES[t] for t in TOOLS)
        + " | stoker `fast_s` | stoker `fast_s` / ceiling | target | met |\n"
        "|---|---:|" + "---:|" * len(TOOLS) + "---:|---:|---|---|\n"
    )
    for name, st in states.items():
        ceiling = ceiling_s(st)
        cells = [cell(st, t, lambda e: _s(timed(e, "durable_s"))) for t in TOOLS]
        fast = ratio = met = "-"
        if has(st, "stoker") and ceiling:
            f = timed(st["tools"]["stoker"], "stoker_fast_s")
            r = f / ceiling
            fast, ratio, ok = _s(f), f"{r:.2f}x", r <= TARGET_CEILING
            met = _yes(ok)
            if not ok:
                misses.append(
                    f"durable, {LABELS[name]}: stoker {f:.2f} s, {r:.2f}x the dd ceiling {ceiling:.2f} s (target {TARGET_CEILING}x)"
                )
        ceil = _s(ceiling) if ceiling else "-"
        out += (
            f"| {state_label(name, st)} | {ceil} | "
            + " | ".join(cells)
            + f" | {fast} | {ratio} | <= {TARGET_CEILING}x | {met} |\n"
        )
    return out


def interference_table(states: dict) -> str:
    out = (
        "| state | idle step | "
        + " | ".join(NAMES[t] for t in TOOLS)
        + " | stoker rise vs `async_save` rise |\n|---|---:|"
        + "---:|" * len(TOOLS)
        + "---|\n"
    )

    def rise(e: dict) -> float | None:
        # each rep against the idle steps just before it: the machine's load drifts
        rows = [r for r in e["interference"]["runs"] if r["during_ms"]]
        return statistics.median(r["during_ms"] / r["idle_ms"] - 1 for r in rows) if rows else None

    for name, st in states.items():
        idles = [
            e["interference"]["idle_ms"]
            for t, e in st["tools"].items()
            if t in ASYNC_TOOLS and "interference" in e
        ]
        cells = []
        for t in TOOLS:
            if t not in ASYNC_TOOLS:
                cells.append(cell(st, t, lambda e: f"n/a (blocks {_s(timed(e, 'blocking_s'))} s)"))
            else:
                cells.append(
                    cell(
                        st,
                        t,
                        lambda e: (
                            f"{e['interference']['during_ms']:.1f} ms ({rise(e):+.0%}, {e['interference']['steps']} steps)"
                            if rise(e) is not None
                            else "no steps"
                        ),
                    )
                )
        versus = "-"
        if has(st, "stoker") and has(st, "dcp.async_save"):
            a, b = rise(st["tools"]["stoker"]), rise(st["tools"]["dcp.async_save"])
            if a is not None and b is not None:
                versus = f"{a:+.0%} vs {b:+.0%} ({100 * (a - b):+.0f} points)"
        idle = f"{statistics.median(idles):.1f} ms" if idles else "-"
        out += f"| {state_label(name, st)} | {idle} | " + " | ".join(cells) + f" | {versus} |\n"
    return out


def memory_table(states: dict, misses: list[str]) -> str:
    out = (
        "| state | "
        + " | ".join(NAMES[t] for t in TOOLS)
        + " | target (stoker) | met |\n|---|"
        + "---:|" * len(TOOLS)
        + "---|---|\n"
    )

    def ratio(e: dict) -> float:
        return max(r["peak_extra_bytes"] for r in e["runs"]) / e["bytes"]

    for name, st in states.items():
        cells = [cell(st, t, lambda e: f"{ratio(e):.2f}x") for t in TOOLS]
        met = "-"
        if has(st, "stoker"):
            r = ratio(st["tools"]["stoker"])
            met = _yes(r <= TARGET_MEMORY)
            if r > TARGET_MEMORY:
                misses.append(
                    f"memory, {LABELS[name]}: stoker peaks at {r:.2f}x the state (target {TARGET_MEMORY}x)"
                )
        out += (
            f"| {state_label(name, st)} | "
            + " | ".join(cells)
            + f" | <= {TARGET_MEMORY}x | {met} |\n"
        )
    return out


def growth_text(g: dict | None, misses: list[str]) -> str:
    if not g:
        return "Not measured (needs stoker and the tensor state).\n"
    if "error" in g:
        return f"Failed: {g['error'].strip().splitlines()[-1][:300]}\n"
    after = g["rss_after"]
    grew = after[-1] - after[0]
    ok = grew <= TARGET_GROWTH * g["bytes"]
    if not ok:
        misses.append(f"growth: RSS rose {grew / MiB:,.0f} MiB over {len(after)} saves")
    return (
        f"stoker saving the {g['bytes'] / MiB:,.0f} MiB tensor {len(after)} times: RSS after the "
        f"first save {after[0] / MiB:,.0f} MiB, after the last {after[-1] / MiB:,.0f} MiB "
        f"({grew / MiB:+,.0f} MiB; highest {max(after) / MiB:,.0f} MiB; before the Checkpointer "
        f"existed {g['base_rss'] / MiB:,.0f} MiB). No growth (under {TARGET_GROWTH:.0%} of the "
        f"state): {_yes(ok)}.\n"
    )


def crash_text(c: dict | None, misses: list[str]) -> str:
    if not c:
        return "Not run (`--crash 0`, or stoker was not importable).\n"
    rows = c["runs"]
    verdicts: dict[str, int] = {}
    for r in rows:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    with_commit = sum(1 for r in rows if r["last_committed"] is not None)
    bad = sum(n for v, n in verdicts.items() if not v.startswith(("ok", "failed, nothing")))
    corrupt = verdicts.get("corrupt", 0)
    survivors = sum(1 for r in rows if r["survivors"])
    if bad or survivors:
        misses.append(
            f"crash safety: {bad} bad loads of {len(rows)} ({corrupt} corrupt), {survivors} kills left processes behind"
        )
    loads = [r["load"]["seconds"] for r in rows if r["load"].get("ok")]
    damaged_n = sum(1 for r in rows if r.get("damaged"))
    prune_0 = sum(1 for r in rows if r.get("prune_exit") == 0)
    prune_1 = sum(1 for r in rows if r.get("prune_exit") == 1)
    prune_other = len(rows) - prune_0 - prune_1
    counts = ", ".join(f"{v}: {n}" for v, n in sorted(verdicts.items()))
    unready = [r for r in rows if not r["ready"]]
    unready_note = (
        f" **{len(unready)} children never said ready** (first: {unready[0]['child_error']})."
        if unready
        else ""
    )
    return (
        f"{len(rows)} kills of a child saving a {c['state_bytes'] / MiB:.0f} MiB state in a loop "
        f'(SIGKILL {CRASH_KILL_S[0]}-{CRASH_KILL_S[1]} s after "ready"; '
        f"{sum(len(r['committed']) for r in rows)} commits reported in all; one step committed "
        f"before the first kill). After each kill the "
        f"newest committed step is damaged (torn manifest and flipped shard byte, in turn; "
        f"{damaged_n} times: in the others the child had committed nothing since the last prune, "
        f"so no older whole step was left), `stoker checkpoint prune "
        f"--keep-last 1` runs (exit 1 when it kept a damaged step: {prune_1} times; exit 0: "
        f"{prune_0}; other: {prune_other}), and a fresh process loads, which must take the newest "
        f"step left whole; {with_commit} loads came after at least one commit.\n\n"
        f"| loads | ok | failed with a commit before | stale or lost the newest whole step | partial or corrupt | helpers outliving the kill | met |\n"
        f"|---:|---:|---:|---:|---:|---:|---|\n"
        f"| {len(rows)} | {verdicts.get('ok', 0)} | {verdicts.get('failed', 0)} | "
        f"{verdicts.get('stale', 0) + verdicts.get('from the future', 0) + verdicts.get('lost the newest whole step', 0)} | {corrupt} | {survivors} | "
        f"{_yes(not bad and not survivors)} |\n\n"
        f"Verdicts: {counts}.{unready_note} "
        f"Median load {statistics.median(loads):.2f} s. After all kills the folder held "
        f"{c['folder_bytes'] / MiB:,.0f} MiB in {c['folder_entries']} entries (keep_last=2 "
        f"means about {2 * c['state_bytes'] / MiB:,.0f} MiB).\n"
        if loads
        else f"No load succeeded. Verdicts: {counts}.\n"
    )


def markdown(res: dict) -> str:
    misses: list[str] = []
    m = res["machine"]
    quick = " --quick" if res["mode"] == "quick" else ""
    states = {k: res["states"][k] for k in STATES if k in res["states"]}
    skipped = (
        f"\n**stoker was not measured**: {res['stoker_skipped']}.\n"
        if res.get("stoker_skipped")
        else ""
    )
    others = [e.get("cpu_elsewhere", 0) for st in states.values() for e in st["tools"].values()]
    busy = max(others) if others else 0
    quiet = (
        f"Other processes used at most {busy:.0%} of the CPU during any tool's run."
        if busy < 0.05
        else f"**Other processes used up to {busy:.0%} of the machine's CPU during the runs**: the figures are skewed."
    )
    fast_vs_wait = []
    for name, st in states.items():
        if has(st, "stoker"):
            e = st["tools"]["stoker"]
            fast_vs_wait.append(
                f"{LABELS[name]} {_s(timed(e, 'stoker_fast_s'))} s vs {_s(timed(e, 'durable_s'))} s"
            )
    verified = []
    for name, st in states.items():
        if has(st, "stoker"):
            v = st["tools"]["stoker"]["verified"]
            said = "every tensor and object equal" if v["ok"] else f"**{v['problem']}**"
            verified.append(f"{LABELS[name]}: {said} (load {v['load_s']:.2f} s)")

    def rates(st: dict, buffered: bool) -> str:
        found = [e["ceiling"] for e in st["tools"].values() if "ceiling" in e]
        return ", ".join(f"{(c['buffered'] if buffered else c)['mb_s']:.0f}" for c in found)

    ceilings = "; ".join(f"{LABELS[n]} {rates(st, False)} MB/s" for n, st in states.items())
    buffered = "; ".join(f"{LABELS[n]} {rates(st, True)} MB/s" for n, st in states.items())
    direct = [
        e["ceiling"]["mb_s"]
        for st in states.values()
        for e in st["tools"].values()
        if "ceiling" in e
    ]
    spread = (
        f"dd with O_DIRECT ranged {min(direct):.0f}-{max(direct):.0f} MB/s over this run: compare "
        "each tool with the ceiling measured beside it rather than across states or runs."
        if direct
        else ""
    )
    errors = "".join(
        f"- {LABELS[n]}, {t}: {e['error'].strip().splitlines()[-1][:300]}\n"
        for n, st in states.items()
        for t, e in st["tools"].items()
        if "error" in e
    )
    tables = (
        f"### Blocking time, s (the training loop waits this long)\n\n{blocking_table(states, misses)}\n"
        f"### Until durable on the fast tier, s\n\n{durable_table(states, misses)}\n"
        f"stoker's own `last_save.fast_s` against the time until its `wait()` returned: "
        f"{'; '.join(fast_vs_wait) or '-'}. dd with O_DIRECT ran at (one run after each tool): {ceilings}; the same bytes through the page cache, then `fsync` (not the target's ceiling; the kernel's writeback keeps more requests in flight than dd's one direct write): {buffered}.\n\n"
        f"### Training steps during a background save (median step, rise over idle)\n\n{interference_table(states)}\n"
        f"### Peak extra memory during a save, over the state's tensor bytes\n\n{memory_table(states, misses)}\n"
    )
    growth = growth_text(res.get("growth"), misses)
    first_save = first_save_text(res.get("first_save"), misses)
    preempt = preempt_text(res.get("preempt"), misses)
    ddp = ddp_text(res.get("ddp"), misses)
    crash = crash_text(res.get("crash"), misses)
    missed = "".join(f"- {x}\n" for x in misses) or "- none\n"
    return f"""## checkpoint: async saves against `torch.save` and DCP (targets: blocking 0.1x `torch.save`, durable 1.1x the disk)

Reproduce: `.venv/bin/python bench/checkpoint_bench.py{quick} --write BENCHMARKS.md`. Machine:
{m["nproc"]} cores, {m["ram_gib"]:.0f} GiB RAM, Python {m["python"]}, torch {m["torch"]};
checkpoints on the repository's disk ({m["dir"]}); measured {res["when"]}.
{skipped}
How: every (state, tool) pair runs in a fresh process with `torch.set_num_threads(1)`: a
first save (shown apart), then {res["reps"]} more whose medians are shown, each after
`os.sync()` (the page cache cannot be dropped here). Blocking: the save call (`torch.save` into a
temporary file, flush, `fsync`, rename, `fsync` of the folder; DCP `save` with its
`FileSystemWriter` defaults, `sync_files=True`; `async_save` until it returns; stoker until
`save()` returns). Durable: from the call until the data is `fsync`'d (`future.result()` for
`async_save`, `wait()` for stoker, whose own `fast_s` is shown too and is the figure held to the
target). The ceiling is `dd if=/dev/zero oflag=direct conv=fsync bs=8M` writing the same bytes
to the same disk, once after each tool, median. Interference: a CPU MLP (2 x {MLP_WIDTH} wide,
batch {MLP_BATCH}) steps for {IDLE_S:.0f} s idle, then through the save until it is durable (a
helper thread waits on it; saves repeat back to back until {WINDOW_STEPS} steps fell inside
them), in {res["reps"]} rounds; the table gives the median step during the saves and the median over
the rounds of its rise over the idle second just before. Sync tools stop the loop for their
whole save instead. Memory: the peak resident memory during each save (VmHWM reset before it,
and a 5 ms sampler) less the process's memory before the tool was created, so buffers a tool
keeps between saves count; the worst save is shown. stoker's round trip after its saves:
{"; ".join(verified) or "-"}.

{tables}{FIRST_HEADING}

{first_save}
### Memory over repeated saves

{growth}
### Crash safety

{crash}
{PREEMPT_HEADING}

{preempt}
{DDP_HEADING}

{ddp}
### Where stoker misses a target

{missed}
{quiet} {spread}
{("Failed runs:" + chr(10) + errors) if errors else ""}"""


# --------------------------------------------------------------------------------- first save
FIRST_TRAIN_S = 10.0  # training steps between the Checkpointer's making and its first save
TARGET_FIRST = 1.2  # first save's blocking over the median of the later ones
FIRST_ROUNDS = 3  # fresh processes per variant (2 with --quick)


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


def first_save_text(fs: dict | None, misses: list[str]) -> str:
    if not fs:
        return "Not measured (`--parts first`).\n"
    out = (
        f"Each stoker process: a CPU MLP steps for {IDLE_S:.0f} s idle, the `Checkpointer` is "
        f"made (with `reserve_like=state` or without), the MLP steps until {FIRST_TRAIN_S:.0f} s "
        "after that (the training that runs before a first save), then come the first save and "
        "the later ones, each after the previous one was durable and `os.sync()`. Fresh "
        "processes in turns, several per row: first save = the median of their first saves, "
        "later = the median of all their later saves. `torch.save`: the same state's median "
        "blocking in its own process, just before.\n\n"
        "| state | stoker | first save, s | later saves, s | first / later | target "
        "| met | later / `torch.save` | target | met | training step while the pages go in |\n"
        "|---|---|---:|---:|---:|---|---|---:|---|---|---|\n"
    )
    notes = []
    for name, row in fs.items():
        torch_s = (
            timed(row["torch.save"], "blocking_s") if "runs" in row.get("torch.save", {}) else None
        )
        for variant, title in (("none", "no reserve"), ("reserve", "`reserve_like=state`")):
            runs = [e for e in row.get(variant, []) if "blocking_s" in e]
            if not runs:
                out += f"| {LABELS[name]} | {title} | failed | | | | | | | | |\n"
                misses.append(f"first save, {LABELS[name]}, {title}: the run failed")
                continue
            firsts = [e["blocking_s"][0] for e in runs]
            laters = [b for e in runs for b in e["blocking_s"][1:]]
            first_s, later = statistics.median(firsts), statistics.median(laters)
            r = first_s / later
            steady = later / torch_s if torch_s else None
            held = variant == "reserve"
            ok_first = r <= TARGET_FIRST
            ok_steady = steady is not None and steady <= TARGET_BLOCKING
            if held and not ok_first:
                misses.append(
                    f"first save, {LABELS[name]}: {first_s:.3f} s, {r:.2f}x the later saves' "
                    f"median {later:.3f} s (target {TARGET_FIRST}x)"
                )
            if held and not ok_steady:
                misses.append(
                    f"first save part, {LABELS[name]}: later saves {steady or 0:.3f}x `torch.save` "
                    f"(target {TARGET_BLOCKING}x)"
                )
            steps = "-"
            busy = [e for e in runs if e.get("prefaulting_ms")]
            if busy:
                steps = (
                    f"{statistics.median(e['prefaulting_ms'] for e in busy):.1f} ms "
                    f"({sum(e['prefaulting_steps'] for e in busy)} steps; idle "
                    f"{statistics.median(e['idle_ms'] for e in runs):.1f} ms, after "
                    f"{statistics.median(e['after_ms'] or 0 for e in busy):.1f} ms)"
                )
            out += (
                f"| {state_label(name, {'bytes': runs[0]['bytes']})} | {title} | {_s(first_s)} "
                f"({', '.join(_s(f) for f in firsts)}) | {_s(later)} ({len(laters)} saves) | "
                f"{r:.2f}x | {f'<= {TARGET_FIRST}x' if held else '-'} | "
                f"{_yes(ok_first) if held else '-'} | "
                f"{f'{steady:.3f}x of {_s(torch_s)} s' if steady else '-'} | <= {TARGET_BLOCKING}x | "
                f"{_yes(ok_steady)} | {steps} |\n"
            )
            faulted = [e for e in runs if e.get("prefault_s") is not None]
            if held and faulted:
                late = sum(1 for e in faulted if not e["ready_at_save"])
                notes.append(
                    f"{LABELS[name]}: the background thread faulted the buffer in "
                    f"({faulted[0]['method']}) in "
                    + ", ".join(f"{e['prefault_s']:.2f}" for e in faulted)
                    + " s, "
                    + (
                        "each done before the first save"
                        if not late
                        else f"**{late} not done by the first save**"
                    )
                    + f" (the `Checkpointer` was made in "
                    f"{statistics.median(1e3 * e['made_s'] for e in faulted):.0f} ms)"
                )
    others = [
        e.get("cpu_elsewhere", 0)
        for row in fs.values()
        for runs in row.values()
        for e in (runs if isinstance(runs, list) else [runs])
    ]
    if others:
        notes.append(
            f"other processes took up to {max(others):.0%} of the machine's CPU during these "
            "runs" + (" (the figures are skewed)" if max(others) >= 0.05 else "")
        )
    out += (
        "\nWhere the first save's time goes without a reservation (a profile of one 1 GiB save): "
        "all of it is the page faults of the fresh host buffer (copying into it took 2.5-5.4 s, "
        "into the same buffer once faulted 0.10-0.15 s; layout and pickling the skeleton 3 ms). "
        "With `reserve()`/`reserve_like=` the buffer is made when the `Checkpointer` is and "
        "faulted in (`MADV_POPULATE_WRITE`) by a background thread while training runs; that "
        "costs CPU time, which the training steps of the last column show on these 2 cores. "
        + ("; ".join(notes) + "." if notes else "")
        + "\n\nGPU tensors (issue 23 part 6) are copied into the buffer, pinned with "
        "`cudaHostRegister`, on a side CUDA stream that the writer waits on: the path is "
        "unit-tested on the CPU through a fake CUDA seam "
        "(tests/test_checkpoint_device_copy.py) and **has not run on a GPU** (no device was "
        "lent to this session).\n"
    )
    return out


def replace_subsection(path: Path, heading: str, body: str) -> None:
    """Swap ``heading``'s subsection of the '## checkpoint:' section of ``path`` for ``body``
    (or add it before '### Where stoker misses a target'), keeping the rest: a run of one
    part must not drop the figures of the others."""
    text = path.read_text()
    start = text.index("## checkpoint:")
    end = text.find("\n## ", start + 1)
    end = len(text) if end < 0 else end + 1
    section = text[start:end]
    block = f"{heading}\n\n{body.rstrip()}\n\n"
    if heading + "\n" in section:
        a = section.index(heading + "\n")
        b = section.find("\n### ", a + len(heading))
        section = section[:a] + block + (section[b + 1 :] if b >= 0 else "")
    elif "### Where stoker misses a target" in section:
        a = section.index("### Where stoker misses a target")
        section = section[:a] + block + section[a:]
    else:
        section = section.rstrip("\n") + "\n\n" + block
    path.write_text(text[:start] + section + text[end:])


CRASH_HEADING = "### Crash safety"
FIRST_HEADING = "### First save: blocking time against the later saves"


# --------------------------------------------------------------------------------- preemption
PREEMPT_HEADING = "### Save on preemption: from the event to the step committed on the fast tier"
PREEMPT_NOTICE_S = 30.0  # a Spot eviction's notice (Preempt)
TARGET_PREEMPT_S = PREEMPT_NOTICE_S / 2  # "well inside the notice": half of it at most
PREEMPT_POLL_S = 1.0  # the watcher's default, as Azure recommends
PREEMPT_STEP_S = 0.1  # a training step (on the GPU, say): the loop reaches should_stop this often


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


def preempt_text(p: dict | None, misses: list[str]) -> str:
    if not p:
        return "Not measured (`--parts preempt`).\n"

    def med(rows: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    out = (
        f"A local Scheduled Events server (stoker.checkpoint._events_server, the documented "
        f"documents) posts a Preempt with {PREEMPT_NOTICE_S:.0f} s of notice at a random moment "
        f"of the watcher's {PREEMPT_POLL_S:g} s poll cycle; the training loop steps every "
        f"{PREEMPT_STEP_S * 1e3:.0f} ms and calls `watcher.should_stop(step)`, which saves the "
        f"{p['bytes'] / GiB:.2f} GiB state, waits for the fast tier's commit and acknowledges. "
        f"Before each run a periodic save of the same state was made (the buffer exists, as in "
        f"steady training); 'during a save' posts the event right after a periodic save started, "
        f"so that save's write is finished before the new one. Medians of {p['runs']} runs each "
        f"(measured {p['when']}); the ceiling is dd writing the same bytes with O_DIRECT and "
        "`fsync` to the same disk after each run. Target: the event served to the fast commit "
        f"within {TARGET_PREEMPT_S:.0f} s, half the Spot notice.\n\n"
        "| the event comes | served -> fast commit, s | posted -> fast commit, s | target | met "
        "| poll wait | loop to save | save blocks | write | dd ceiling, s | write / ceiling "
        "| ack after commit |\n"
        "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    for variant, title in (("idle", "between saves"), ("in_flight", "during a save")):
        rows = p.get(variant) or []
        if not rows:
            continue
        total = med(rows, "served_to_fast_s")
        ceiling = statistics.median(r["ceiling"]["seconds"] for r in rows)
        ok = total <= TARGET_PREEMPT_S
        if not ok:
            misses.append(
                f"preemption {title}: {total:.1f} s from the event to the fast commit "
                f"(target {TARGET_PREEMPT_S:.0f} s)"
            )
        out += (
            f"| {title} | {_s(total)} | {_s(med(rows, 'posted_to_fast_s'))} | "
            f"<= {TARGET_PREEMPT_S:.0f} | {_yes(ok)} | {_s(med(rows, 'poll_wait_s'))} | "
            f"{_s(med(rows, 'loop_s'))} | {_s(med(rows, 'blocking_s'))} | "
            f"{_s(med(rows, 'write_s'))} | {_s(ceiling)} | "
            f"{med(rows, 'write_s') / ceiling:.2f}x | {1e3 * med(rows, 'ack_after_commit_s'):.0f} ms |\n"
        )
    acked = all(r["acknowledged"] for v in ("idle", "in_flight") for r in p.get(v) or [])
    out += (
        "\n'save blocks' includes, during a save, the wait for the write in flight. Every event was "
        + ("acknowledged after its commit" if acked else "**not always acknowledged**")
        + ". With a durable tier the watcher also waits for the upload when the notice leaves "
        "time for the upload measured last (not measured here: the durable tier's rate is the "
        "stage and storage benches'). "
        + (
            f"Other processes used {p['cpu_elsewhere']:.0%} of the CPU during these runs."
            if p.get("cpu_elsewhere") is not None
            else ""
        )
        + "\n"
    )
    return out


# --------------------------------------------------------------------------------- ddp
DDP_HEADING = "### DDP on 4 ranks: replicated state written once"
DDP_RANKS, DDP_PER_NODE = 4, 2  # two emulated nodes of two ranks, each node's own fast folder
TARGET_DDP_BYTES, TARGET_DDP_DURABLE = 1.0, 1.1
DDP_SIZES = {"full": 512 * MiB, "quick": 128 * MiB}


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
            [*cmd, __file__, "--worker", json.dumps(cfg)], capture_output=True, text=True
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


def ddp_text(d: dict | None, misses: list[str]) -> str:
    if not d:
        return "Not measured (`--parts ddp`).\n"
    rows = []
    for variant, label in (
        ("each", "`save(step, state)`"),
        ("once", "`save(..., replicated=True)`"),
    ):
        e = d.get(variant) or {}
        if "error" in e or not e:
            rows.append(f"| {label} | failed | | | | | |")
            continue
        ratio = e["written"] / e["tensor_bytes"]
        vs = e["fast_s"] / e["ceiling"]["seconds"]
        rows.append(
            f"| {label} | {ratio:.2f}x | {e['blocking_s']:.2f} | {e['fast_s']:.2f} | "
            f"{e['ceiling']['seconds']:.2f} | {vs:.2f}x | {e.get('durable_s', 0.0):.2f} |"
        )
        if variant == "once":
            if ratio > TARGET_DDP_BYTES + 0.01:
                misses.append(f"DDP bytes per save {ratio:.2f}x the model's (target 1.0x)")
            if vs > TARGET_DDP_DURABLE:
                misses.append(
                    f"DDP durable on the fast tiers {vs:.2f}x dd's ceiling (target "
                    f"{TARGET_DDP_DURABLE}x)"
                )
    once = d.get("once") or {}
    size = once.get("tensor_bytes") or (d.get("each") or {}).get("tensor_bytes") or 0
    other = d.get("cpu_elsewhere")
    return (
        f"{d['ranks']} ranks under torchrun (gloo, CPU) as two emulated nodes of two, each node's "
        f"fast tier its own folder on the same disk; every rank holds the same "
        f"{size / MiB:.0f} MiB of model and optimizer tensors (DDP) and saves it; medians of the "
        "saves after the first. The durable tier is a folder on the same disk (a node-local "
        "fast tier needs one for `replicated=`); each save is waited for before the next. "
        "Written: the bytes of the step's shard files on both fast tiers, over the model's "
        "tensor bytes. Durable: from the `save()` call until the step is committed on the fast "
        "tiers (every rank's file fsynced), slowest rank: the figure held to the target. "
        "Ceiling: `dd oflag=direct conv=fsync` writing the model's bytes once to the same "
        "disk, right after each variant. Last column: until committed on the durable tier "
        "too (the same bytes copied once more on the same disk).\n\n"
        "| save | written per save | blocking, s | durable, s | dd ceiling, s | durable / ceiling | on the durable tier too, s |\n"
        "|---|---|---|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n\n"
        + (
            f"Other processes used {other:.0%} of the CPU during these runs.\n"
            if other is not None
            else ""
        )
    )


# --------------------------------------------------------------------------------- driver
def machine(folder: Path) -> dict:
    mem = Path("/proc/meminfo").read_text().split()[1]
    return {
        "nproc": os.cpu_count(),
        "ram_gib": int(mem) / (1 << 20),
        "python": sys.version.split()[0],
        "torch": version("torch"),
        "dir": str(folder.relative_to(ROOT)) if folder.is_relative_to(ROOT) else str(folder),
    }


def load_results(path: Path, mode: str) -> dict:
    if path.exists():
        old = json.loads(path.read_text())
        if old.get("mode") == mode:
            return old
    return {"mode": mode, "states": {}}


def main() -> None:
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
    if args.worker:
        quiet_warnings()  # before torch is imported: it warns on import
        cfg = json.loads(args.worker)
        if cfg.get("ddp"):
            result = ddp_worker(cfg)
        elif cfg.get("first"):
            result = first_save_worker(cfg)
        else:
            result = growth_worker(cfg) if cfg.get("growth") else worker(cfg)
        print("RESULT " + json.dumps(result), flush=True)
        return

    mode = "quick" if args.quick else "full"
    reps = args.reps or (2 if args.quick else 3)
    crash = args.crash if args.crash is not None else (5 if args.quick else 50)
    growth = args.growth if args.growth is not None else SIZES[mode][3]
    folder = args.dir.resolve()
    states = [s for s in args.states.split(",") if s]
    tools = [t for t in args.tools.split(",") if t]
    parts = [p for p in args.parts.split(",") if p]
    if (
        unknown := (set(states) - set(STATES))
        | (set(tools) - set(TOOLS))
        | (set(parts) - set(PARTS))
    ):
        parser.error(f"unknown states, tools or parts: {', '.join(sorted(unknown))}")

    out_path = BENCH / "results" / f"checkpoint{'-quick' if args.quick else ''}.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    res = load_results(out_path, mode)
    res.update(
        machine=machine(folder), reps=reps, when=datetime.now(UTC).isoformat(timespec="minutes")
    )
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
                print(
                    f"  dd ceiling: {entry['ceiling']['seconds']:.2f} s ({entry['ceiling']['mb_s']:.0f} MB/s)",
                    flush=True,
                )
            else:
                print(f"  FAILED: {entry['error'][-500:]}", flush=True)
            st["tools"][tool] = entry
        out_path.write_text(json.dumps(res, indent=1))

    if "stoker" in tools and "tensor" in states and growth and "growth" in parts:
        print(f"growth: {growth} stoker saves of the tensor state", flush=True)
        cfg = {"growth": True, "mode": mode, "count": growth, "dir": str(folder)}
        res["growth"] = spawn_worker(cfg)
    if "stoker" in tools and crash and "crash" in parts:
        print(f"crash safety: {crash} kills", flush=True)
        res["crash"] = measure_crash(crash, folder / "crash")
    if skipped:
        res.pop("growth", None)
        res.pop("crash", None)
    first_states = [s for s in states if s in FIRST_STATES]
    if "stoker" in tools and "preempt" in parts and not skipped:
        res["preempt"] = measure_preempt(
            args.preempt_runs or (1 if args.quick else 3), SIZES[mode][0], folder
        )
    if "stoker" in tools and "ddp" in parts and not skipped:
        res["ddp"] = measure_ddp(mode, max(reps, 2), folder)
    if "stoker" in tools and "first" in parts and first_states:
        rounds = 2 if args.quick else FIRST_ROUNDS
        res["first_save"] = measure_first_save(first_states, mode, max(reps, 3), folder, rounds)
    out_path.write_text(json.dumps(res, indent=1))
    res["states"] = {k: v for k, v in res["states"].items() if "bytes" in v}
    if "compare" not in parts:  # one part's figures: its subsection, the others' stay
        texts = {
            "crash": (CRASH_HEADING, crash_text, "crash"),
            "ddp": (DDP_HEADING, ddp_text, "ddp"),
            "preempt": (PREEMPT_HEADING, preempt_text, "preempt"),
            "first": (FIRST_HEADING, first_save_text, "first_save"),
        }
        for part, (heading, text, key) in texts.items():
            if part not in parts:
                continue
            misses: list[str] = []
            body = text(res.get(key), misses)
            body += "".join(f"\nMissed: {x}." for x in misses)
            if args.write:
                replace_subsection(args.write, heading, body)
            print(f"{heading}\n\n{body}")
        return
    section = markdown(res)
    if args.write:
        replace_section(args.write, section)
    print(section)


if __name__ == "__main__":
    main()
