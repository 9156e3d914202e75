"""The tools compared (``torch.save``, DCP ``save`` and ``async_save``, stoker), the memory
probes and the small CPU training loop that steps beside a background save."""

from __future__ import annotations

import os
import re
import shutil
import sys
import threading
import time
import warnings
from pathlib import Path

from _ckpt_config import MLP_BATCH, MLP_WIDTH

from stoker.store._posix import fsync_dir


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


def quiet_warnings() -> None:
    """torch warns that numpy is missing and that DCP runs without a process group: both
    known, both noise in the progress lines."""
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
