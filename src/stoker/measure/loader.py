"""``bench_loader``: the MLPerf Storage method with stoker's loader.

Emulated accelerators sleep the workload's compute time per batch; accelerator utilization is
the emulated compute time over the wall time, the first step left out (MLPerf Storage, DLIO).
N accelerators fed by one reader process are emulated as one loader whose batch is N of the
workload's batches and whose step sleeps one compute time: they run in parallel, so that is
what the reader must keep up with. Presets carry the published batch sizes, record sizes,
A100/H100 compute times and pass thresholds (../shared/facts/azure.md: MLPerf Storage v2.0 /
DLIO workload configs).
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import StokerError


@dataclass(frozen=True)
class Preset:
    name: str
    sample_bytes: int
    sample_sd: int  # standard deviation of the sample size (0: fixed)
    batch: int
    compute_s: dict[str, float]  # per accelerator type
    threshold: float  # AU that passes


PRESETS = {
    "unet3d": Preset("unet3d", 146_600_000, 68_300_000, 7, {"a100": 0.636, "h100": 0.323}, 0.90),
    "resnet50": Preset("resnet50", 114_660, 0, 400, {"a100": 0.435, "h100": 0.224}, 0.90),
    "cosmoflow": Preset("cosmoflow", 2_830_000, 0, 1, {"a100": 0.00551, "h100": 0.00350}, 0.70),
}


def preset(name: str) -> Preset:
    if name not in PRESETS:
        raise StokerError(f"workload {name!r}: use one of {', '.join(PRESETS)}")
    return PRESETS[name]


def generate(workload: str, out: str, samples: int, *, seed: int = 0) -> Any:
    """A dataset of the workload's record shape (random bytes) as stoker shards at ``out``."""
    from ..stream import ShardWriter

    p, rng = preset(workload), random.Random(seed)
    with ShardWriter(out, shard_size="64MiB", codec="bytes") as w:
        for _ in range(samples):
            size = (
                p.sample_bytes if not p.sample_sd else int(rng.gauss(p.sample_bytes, p.sample_sd))
            )
            w.write(os.urandom(max(4096, size)))
    return w.index


@dataclass
class LoaderResult:
    workload: str
    accelerator: str
    accelerators: int
    batch: int  # samples per step, all accelerators together
    compute_s: float  # per step
    steps: int
    utilization: float | None
    threshold: float
    first_batch_s: float | None
    wait_s: float
    samples_per_s: float
    mb_per_s: float

    @property
    def passed(self) -> bool:
        return self.utilization is not None and self.utilization >= self.threshold

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"passed": self.passed}


def run_loader(
    data: str,
    workload: str,
    *,
    accelerator: str = "h100",
    accelerators: int = 1,
    steps: int | None = None,
    workers: int = 2,
    cache: str | None = None,
    compute_s: float | None = None,
) -> LoaderResult:
    """One epoch (or ``steps`` steps) of emulated training on ``data`` (stoker shards)."""
    from ..stream import StreamingDataset, StreamingLoader

    p = preset(workload)
    if compute_s is None:
        if accelerator not in p.compute_s:
            raise StokerError(f"accelerator {accelerator!r}: use one of {', '.join(p.compute_s)}")
        compute_s = p.compute_s[accelerator]
    batch = p.batch * accelerators
    ds = StreamingDataset(data, cache, shuffle=True, seed=0)
    if ds.index.samples < 2 * batch:
        raise StokerError(
            f"{data} holds {ds.index.samples} samples; {accelerators} x {workload} needs at "
            f"least {2 * batch} (two steps): generate more"
        )
    loader = StreamingLoader(ds, batch, num_workers=workers, collate_fn=_sizes)
    began, done, nbytes, after_first = time.perf_counter(), 0, 0, None
    for sizes in loader:
        nbytes += sum(sizes)
        time.sleep(compute_s)  # the emulated accelerators compute in parallel
        done += 1
        if done == 1:
            after_first = time.perf_counter()  # MLPerf leaves the first step out
        if steps is not None and done >= steps:
            break
    ended = time.perf_counter()
    total, m = ended - began, loader.metrics
    # AU as MLPerf Storage and DLIO count it: the emulated compute over the wall time, both
    # after the first step (the loop's own bookkeeping is not compute).
    measured = ended - after_first if after_first is not None and done > 1 else 0.0
    utilization = (done - 1) * compute_s / measured if measured > 0 else None
    return LoaderResult(
        workload=workload,
        accelerator=accelerator,
        accelerators=accelerators,
        batch=batch,
        compute_s=compute_s,
        steps=done,
        utilization=utilization,
        threshold=p.threshold,
        first_batch_s=m.first_batch_s,
        wait_s=m.wait_s,
        samples_per_s=done * batch / total,
        mb_per_s=nbytes / total / 1e6,
    )


def _sizes(samples: list[bytes]) -> list[int]:
    """What the emulated accelerator gets: the bytes were read and checked; sizes suffice."""
    return [len(s) for s in samples]


def most_accelerators(
    data: str, workload: str, *, limit: int = 64, **options: Any
) -> tuple[int, list[LoaderResult]]:
    """The largest number of emulated accelerators this reader keeps at the workload's
    threshold: doubling, then bisection. Returns it (0 if even one fails) and every run."""
    runs: list[LoaderResult] = []

    def passes(n: int) -> bool:
        runs.append(run_loader(data, workload, accelerators=n, **options))
        return runs[-1].passed

    if not passes(1):
        return 0, runs
    good, bad = 1, None
    while bad is None and good < limit:
        n = min(good * 2, limit)
        try:
            ok = passes(n)
        except StokerError:  # the dataset is too small for that many: stop there
            break
        good, bad = (n, None) if ok else (good, n)
    while bad is not None and bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if passes(mid) else (good, mid)
    return good, runs
