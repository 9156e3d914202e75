"""``bench_loader``: the MLPerf Storage method with stoker's loader.

Emulated accelerators sleep the workload's compute time per batch; accelerator utilization is
the emulated compute time over the wall time, the first step left out (MLPerf Storage, DLIO).
N accelerators fed by one reader process are emulated as one loader whose batch is N of the
workload's batches and whose step sleeps one compute time: they run in parallel, so that is
what the reader must keep up with. Presets carry the published batch sizes, record sizes,
A100/H100 compute times and pass thresholds (../shared/facts/azure.md: MLPerf Storage v2.0 /
DLIO workload configs).

As MLPerf Storage does, the run must read from storage, not from the page cache: a local
dataset's files (or a remote one's node cache) are dropped from the page cache first
(``posix_fadvise(DONTNEED)``), and a result notes a dataset smaller than the machine's RAM
(MLPerf Storage sizes it at ~5x RAM, so that later epochs cannot come from the cache either).
The clock stops after the last step's compute: the end-of-epoch teardown is not training time.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import StokerError
from ._history import History


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
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise StokerError(f"--generate {samples}: write at least 1 sample")
    if "://" not in out and (Path(out) / "index.json").exists():
        raise StokerError(
            f"{out} already holds a dataset: drop --generate to measure it as it is, or "
            "--generate into a new folder"
        )
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
    steps_asked: int | None = None  # --steps; more than ``steps`` when the dataset ran out
    samples_in_dataset: int = 0
    dataset_bytes: int = 0
    notes: list[str] = field(default_factory=list)  # what makes the figure less than MLPerf's
    # (t, steps done, bytes read) over the run, for save_json's series; not in to_dict
    history: list[tuple[float, ...]] = field(default_factory=list, repr=False)

    @property
    def measured_steps(self) -> int:
        return max(0, self.steps - 1)  # the first step is left out

    @property
    def passed(self) -> bool:
        return self.utilization is not None and self.utilization >= self.threshold

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["history"]
        return d | {"passed": self.passed, "measured_steps": self.measured_steps}

    def save_json(self, path: str | os.PathLike[str]) -> Path:
        """Write the run as a ``stoker.measured/1`` record (AU and MB/s over time) for
        ``stoker report --measured`` (docs/report.md)."""
        from .records import loader_record

        name = f"{self.workload} x{self.accelerators} ({self.accelerator})"
        return loader_record(self, self.history, name).save_json(path)


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
    progress: Callable[[str, int, int], None] | None = None,
) -> LoaderResult:
    """One epoch (or ``steps`` steps) of emulated training on ``data`` (stoker shards).
    ``progress`` hears (what runs, steps done, steps in all) after each step."""
    from ..stream import StreamingDataset, StreamingLoader

    p = preset(workload)
    if compute_s is None:
        if accelerator not in p.compute_s:
            raise StokerError(f"accelerator {accelerator!r}: use one of {', '.join(p.compute_s)}")
        compute_s = p.compute_s[accelerator]
    if accelerators < 1:
        raise StokerError(f"--accelerators {accelerators}: emulate at least 1")
    if steps is not None and steps < 2:
        raise StokerError(f"--steps {steps}: run at least 2 (the first step is not measured)")
    if workers < 0:
        raise StokerError(f"--workers {workers}: use 0 (read in this process) or more")
    if "://" not in data and not Path(data).is_dir():
        what = "does not exist" if not Path(data).exists() else "is not a folder"
        raise StokerError(f"{data} {what}: give the folder of a stoker dataset (index.json)")
    batch = p.batch * accelerators
    ds = StreamingDataset(data, cache, shuffle=True, seed=0)
    if ds.index.samples < 2 * batch:
        raise StokerError(
            f"{data} holds {ds.index.samples} samples; {accelerators} x {workload} needs at "
            f"least {2 * batch} (two steps): generate more"
        )
    dataset_bytes, notes = _drop_from_page_cache(ds)
    loader = StreamingLoader(ds, batch, num_workers=workers, collate_fn=_sizes)
    began, done, nbytes, after_first = time.perf_counter(), 0, 0, None
    history = History()
    ended = began
    total_steps = min(steps or len(loader), len(loader)) if progress else 0
    for sizes in loader:
        nbytes += sum(sizes)
        time.sleep(compute_s)  # the emulated accelerators compute in parallel
        ended = time.perf_counter()  # the last compute's end: teardown after it does not count
        done += 1
        history.offer(done, nbytes)
        if progress:
            progress(f"x{accelerators}, step", done, total_steps)
        if done == 1:
            after_first = ended  # MLPerf leaves the first step out
        if steps is not None and done >= steps:
            break
    history.offer(done, nbytes, force=True)  # the last window ends with the run
    total, m = ended - began, loader.metrics
    if steps is not None and done < steps:
        notes.append(
            f"{steps} steps asked, the dataset held {done} ({done - 1} measured): "
            "generate more samples for the figure asked for"
        )
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
        steps_asked=steps,
        samples_in_dataset=ds.index.samples,
        dataset_bytes=dataset_bytes,
        notes=notes,
        history=history.points,
    )


def _drop_from_page_cache(ds: Any) -> tuple[int, list[str]]:
    """Evict the dataset's local files (or its node cache) from the page cache, so the run
    reads the device; returns the dataset's size and a note when it fits in RAM."""
    from ..units import format_bytes
    from .storage import evict

    folder = Path(ds.remote) if ds.in_place else ds.local
    if folder is not None and folder.is_dir():
        for path in folder.rglob("*"):
            if path.is_file():
                evict(path)
    size = ds.index.bytes
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    notes = []
    if size < ram:
        notes.append(
            f"the dataset ({format_bytes(size)}) is smaller than RAM ({format_bytes(ram)}): "
            "after the first epoch reads may come from the page cache (MLPerf Storage uses "
            "~5x RAM)"
        )
    return size, notes


def _sizes(samples: list[bytes]) -> list[int]:
    """What the emulated accelerator gets: the bytes were read and checked; sizes suffice."""
    return [len(s) for s in samples]


def most_accelerators(
    data: str, workload: str, *, limit: int = 64, **options: Any
) -> tuple[int, list[LoaderResult], str | None]:
    """The largest number of emulated accelerators this reader keeps at the workload's
    threshold: doubling, then bisection. Returns it (0 if even one fails), every run, and why
    the search stopped short (the dataset too small to test more; the true maximum may be
    higher) or None."""
    runs: list[LoaderResult] = []
    capped: str | None = None
    samples: int | None = None

    def passes(n: int) -> bool:
        runs.append(run_loader(data, workload, accelerators=n, **options))
        return runs[-1].passed

    if not passes(1):
        return 0, runs, None
    good, bad = 1, None
    while bad is None and good < limit:
        n = min(good * 2, limit)
        if samples is None:
            samples = runs[0].samples_in_dataset
        if samples < 2 * n * preset(workload).batch:  # too small for that many: stop there
            capped = (
                f"capped by the dataset: {samples} samples cannot feed {n} accelerators for two "
                f"steps ({2 * n * preset(workload).batch} needed); the maximum may be higher"
            )
            break
        good, bad = (n, None) if passes(n) else (good, n)
    while bad is not None and bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if passes(mid) else (good, mid)
    return good, runs, capped
