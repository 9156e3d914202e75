"""stoker's streaming loader beside WebDataset, Mosaic Streaming, LitData and a torch DataLoader
over one file per sample: the same bytes, the same consumer, one machine, one run.

Datasets (random bytes; each record's first 8 bytes are its id, little endian). They are
generated once into ``.bench/stream/<mode>/<shape>/files``, one file per sample, and every
other format is written from those files (untimed), so every loader reads the same bytes:

* resnet50: 20,000 records of 114,660 bytes (MLPerf Storage's resnet50 record), batch 400;
* unet3d: 16 samples of 8-150 MB (sizes fixed by a seed), one sample per file, batch 2
  (MLPerf's 7 would leave 2 batches of 16 samples).

``--quick``: 2,000 records, 4 unet3d samples of 8-20 MB, 1 run per figure.

Formats, all ~64 MiB per shard: stoker ``ShardWriter(shard_size="64MiB", codec="bytes")``;
WebDataset tars (``wds.ShardWriter(maxsize=64 MiB)``); Mosaic MDS (``size_limit`` 64 MiB, one
``bytes`` column); LitData ``optimize`` (``chunk_bytes`` 64 MiB, one worker so that chunks keep
the id order); and the files themselves.

Loaders, each run in a fresh process (bench/_stream_peers.py; peers from their own virtual
environment ``.bench/stream-venv``, made on the first run). All get the same batch size,
torch's default prefetch factor (2), and shuffle on; the peers 2 worker processes:

* stoker: ``StreamingDataset(root, dtype=torch.uint8)`` (shards read in place; from Blob, the
  node cache in a fresh folder), ``block_shards=8``, ``StreamingLoader(num_workers=0)``: as its
  docs advise for raw records, each sample is read straight into the batch by 8 reader threads
  of the training process. The row "stoker, 2 worker processes" is the same with
  ``num_workers=2`` (the setting for CPU-heavy transforms);
* DataLoader over files: a map-style dataset that reads one file per sample, ``shuffle=True``;
* WebDataset: ``WebDataset(tars, shardshuffle=<number of tars>, split by worker)``,
  ``.shuffle(8 shards' worth of samples)`` (the same buffer as stoker's block), ``WebLoader``;
* Mosaic Streaming: ``StreamingDataset(local=mds, remote=None, shuffle=True)`` (its defaults),
  torch DataLoader;
* LitData: ``StreamingDataset(dir, shuffle=True)`` (its defaults; a local folder is read in
  place), ``StreamingDataLoader``.

Every loader hands the consumer the same batch: one uint8 tensor ``(batch, 114660)`` for
resnet50, a list of uint8 tensors for unet3d. The peers build it with one collate function (one
copy per sample inside the worker, into shared memory; see _stream_peers.py); stoker reads
into it directly. The consumer reads each sample's
id (its first 8 bytes); the ids are checked (no duplicate, none out of range) and give the
distinct shards per batch.

Figures (medians of the runs; 3 runs, 1 with ``--quick``; the loaders' order rotates per run):

* local disk, cold: every file of the format evicted from the page cache first (``sync``, then
  ``posix_fadvise(POSIX_FADV_DONTNEED)`` on each file; checked with ``fincore``); warm: the same
  run again at once. samples/s and MB/s over the whole epoch, from building the loader (after
  imports) to the last batch, and time to the first batch. Ceilings: ``dd iflag=direct
  bs=16M`` over a 1 GiB file on the same disk, and one core's memory copy bandwidth; and how
  fast one process fills the page cache with memory freed just before and 12 s before (this
  VM hands freed memory back to its host: bench/_machine.py, ``page_cache_fill``). Before
  the first run, every format is read once with ``O_DIRECT`` (past this machine's page cache):
  the host caches this virtual disk, and the first read of freshly written data ran at 20-90
  MB/s for whichever loader came first (2026-12-01), where later cold runs read at 500-1,000.
  Each run also records the machine's memory stalls (direct compaction and reclaim, from
  /proc/vmstat); the section names cold runs that met any.
* Blob: one fresh in-memory Azurite per shape holds the stoker, WebDataset and LitData formats
  (uploaded once with ``stoker.stage``, untimed). stoker reads ``az://`` into a fresh node cache
  folder; WebDataset reads ``pipe:curl -s URL`` (the container is public); LitData reads
  ``azure://`` through its azure-storage-blob downloader pointed at the emulator. Mosaic cannot:
  its Azure downloader hard-codes ``https://<account>.blob.core.windows.net``. Ceilings: obstore
  reading the stoker shards to memory (32 requests in flight, 16 MiB ranges), and the same into
  files in a fresh folder on the local disk (what a node cache pays on top of it).
* emulated accelerator (resnet50, cold): the consumer sleeps 0.435 s per batch of 400 (MLPerf
  Storage's A100 figure, shared/facts/azure.md); AU = compute / total, first batch left out.
  N accelerators are emulated by sleeping 0.435 / N s; the largest N at AU >= 90 % is searched
  from the estimate the cold throughput gives (one run per trial).

    .venv/bin/python bench/stream_bench.py [--quick] [--shapes resnet50,unet3d]
                                           [--parts local,accel,blob] [--write BENCHMARKS.md]

A full run takes about 50 minutes (plus the peers' environment, once); run it on an otherwise
idle machine (the section says how much CPU other processes took meanwhile). Results go to
``.bench/results/<mode>/stream.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import mmap
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from _machine import cpu_mark, others_cpu_share, page_cache_fill
from _markdown import replace_section

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _stream_peers as sp  # noqa: E402
from _peers import ACCOUNT, KEY, Azurite  # noqa: E402

MiB, GiB = 1 << 20, 1 << 30
BENCH = sp.BENCH
WORKER = Path(sp.__file__).resolve()
SEED = 20261201
RECORD = 114_660  # MLPerf Storage resnet50 record
A100_S = 0.435  # MLPerf Storage resnet50 compute per batch of 400 on an A100 (DLIO)
AU_TARGET, N_MAX = 0.90, 64
WORKERS = 2
BLOCK_SHARDS = 8  # stoker's default block; WebDataset's shuffle buffer matches it
LOADERS = ("stoker", "files", "wds", "mosaic", "litdata")
PEERS = LOADERS[1:]
LOCAL_LOADERS = ("stoker", "stoker-workers", *PEERS)
BLOB_LOADERS = ("stoker", "wds", "litdata")
FORMAT = {
    "stoker": "stoker",
    "stoker-workers": "stoker",
    "files": "files",
    "wds": "wds",
    "mosaic": "mosaic",
    "litdata": "litdata",
}
NAMES = {
    "stoker": "stoker",
    "stoker-workers": "stoker, 2 worker processes",
    "files": "DataLoader, file per sample",
    "wds": "WebDataset",
    "mosaic": "Mosaic Streaming",
    "litdata": "LitData",
}
TARGET_PEER, TARGET_DISK = 1.2, 0.8
PARALLEL_DD = 4  # dd processes of the parallel disk ceiling
PARTS = ("local", "accel", "blob")
CEILING_INFLIGHT, CEILING_RANGE = 32, 16 * MiB
RUN_TIMEOUT_S = 1200


# --------------------------------------------------------------------------------- datasets
@dataclass(frozen=True)
class Shape:
    name: str
    label: str
    sizes: tuple[int, ...]
    batch: int
    stack: bool  # one size: a stacked tensor; else a list of tensors
    compute_s: float | None  # the emulated accelerator's time per batch, where it applies

    @property
    def n(self) -> int:
        return len(self.sizes)

    @property
    def nbytes(self) -> int:
        return sum(self.sizes)


def shapes(quick: bool) -> list[Shape]:
    records, unets, (lo, hi) = (2000, 4, (8, 20)) if quick else (20000, 16, (8, 150))
    rng = np.random.default_rng(SEED)
    unet = tuple(int(s) for s in rng.integers(lo * 10**6, hi * 10**6, size=unets))
    return [
        Shape(
            "resnet50",
            f"resnet50: {records:,} x {RECORD:,} B",
            (RECORD,) * records,
            400,
            True,
            A100_S,
        ),
        Shape(
            "unet3d",
            f"unet3d: {unets} x {lo}-{hi} MB ({sum(unet) / 1e9:.2f} GB)",
            unet,
            2,
            False,
            None,
        ),
    ]


def data_dir(mode: str, shape: Shape) -> Path:
    return BENCH / "stream" / mode / shape.name


def generate(shape: Shape, root: Path) -> None:
    """One file per sample, random bytes with the id in front, fixed by the seed."""
    stamp = root.with_suffix(".json")
    want = json.dumps({"sizes": list(shape.sizes), "seed": SEED})
    if stamp.exists() and stamp.read_text() == want:
        return
    shutil.rmtree(root, ignore_errors=True)
    rng = np.random.default_rng([SEED, len(shape.sizes)])
    for i, (path, size) in enumerate(
        zip(sp.file_paths(str(root), shape.n), shape.sizes, strict=True)
    ):
        data = bytearray(rng.bytes(size))
        data[: sp.ID_BYTES] = i.to_bytes(sp.ID_BYTES, "little")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    stamp.write_text(want)


# Bumped when stoker's writer changes what it writes (2: the index keeps each shard's largest
# sample), so that a saved stoker format is written again.
STOKER_WRITER = 2


def ensure_formats(shape: Shape, mode: str, peer_python: Path) -> dict[str, dict]:
    """Every format of the shape, written once from the files: {format: {dir, starts, files}}."""
    base = data_dir(mode, shape)
    files = base / "files"
    generate(shape, files)
    key = hashlib.blake2b(files.with_suffix(".json").read_bytes(), digest_size=8).hexdigest()
    out = {"files": {"dir": str(files), "starts": None}}
    for fmt in ("stoker", "wds", "mosaic", "litdata"):
        root = base / fmt
        stamp = root.with_suffix(".json")
        want = f"{key}-{STOKER_WRITER}" if fmt == "stoker" else key
        if stamp.exists() and json.loads(stamp.read_text())["key"] == want:
            out[fmt] = json.loads(stamp.read_text())
            continue
        shutil.rmtree(root, ignore_errors=True)
        print(f"  writing {shape.name} as {fmt}", flush=True)
        start = time.perf_counter()
        if fmt == "stoker":
            starts = write_stoker(shape, files, root)
        else:
            done = subprocess.run(
                [str(peer_python), str(WORKER), "write", fmt, str(files), str(root), str(shape.n)],
                capture_output=True,
                text=True,
            )
            if done.returncode:
                raise RuntimeError(f"writing {fmt} failed:\n{done.stderr[-3000:]}")
            starts = json.loads(done.stdout.strip().splitlines()[-1])
        info = {
            "dir": str(root),
            "starts": starts,
            "key": want,
            "write_s": time.perf_counter() - start,
        }
        stamp.write_text(json.dumps(info))
        out[fmt] = info
    for info in out.values():
        info["files"] = sorted(str(p) for p in Path(info["dir"]).rglob("*") if p.is_file())
        info["bytes"] = sum(os.path.getsize(p) for p in info["files"])
    return out


def write_stoker(shape: Shape, files: Path, root: Path) -> list[int]:
    from stoker.stream import ShardWriter

    with ShardWriter(root, shard_size="64MiB", codec="bytes") as w:
        for path in sp.file_paths(str(files), shape.n):
            with open(path, "rb") as f:
                w.write(f.read())
    return [w.index.first(i) for i in range(len(w.index.shards))]


# --------------------------------------------------------------------------------- page cache
def evict(paths: list[str]) -> None:
    """Drop these files from the page cache (clean pages only: ``sync`` first)."""
    os.sync()
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def prime(paths: list[str]) -> float:
    """Read every file once with O_DIRECT, past this machine's page cache, so that every
    loader's cold run meets the host's cache of the virtual disk in the same state (see the
    module docstring). Returns the seconds it took."""
    start, buf = time.perf_counter(), mmap.mmap(-1, 16 << 20)  # (page-aligned, as O_DIRECT asks)
    for path in paths:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            pos = 0
            while (n := os.preadv(fd, [buf], pos)) == len(buf):  # short: the end of the file
                pos += n
        finally:
            os.close(fd)
    return time.perf_counter() - start


def resident_bytes(paths: list[str]) -> int | None:
    """Bytes of these files in the page cache (fincore; at most 200 files looked at)."""
    if not shutil.which("fincore"):
        return None
    step = max(1, len(paths) // 200)
    done = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES", *paths[::step]],
        capture_output=True,
        text=True,
    )
    return sum(int(v) for v in done.stdout.split()) * step if done.returncode == 0 else None


# --------------------------------------------------------------------------------- ceilings
def disk_read_ceiling(streams: int = 1) -> float:
    """MB/s of ``dd if=FILE of=/dev/null bs=16M iflag=direct`` over a 1 GiB file here, as one
    stream or as ``streams`` dd processes at once, each over its own part of the file (the loaders
    keep several reads in flight, which this disk serves faster than one)."""
    path = BENCH / "stream" / "dd.bin"
    if not path.exists() or path.stat().st_size != GiB:
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["dd", "if=/dev/urandom", f"of={path}", "bs=16M", "count=64", "conv=fsync"],
            check=True,
            capture_output=True,
        )
    part = 64 // streams  # 16 MiB blocks in each stream's share
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            ["dd", f"if={path}", "of=/dev/null", "bs=16M", "iflag=direct"]
            + ([f"skip={k * part}", f"count={part}"] if streams > 1 else []),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for k in range(streams)
    ]
    if any(proc.wait() for proc in procs):
        raise RuntimeError(f"dd over {path} failed")
    return GiB / (time.perf_counter() - start) / 1e6


def memory_ceiling() -> float:
    """MB/s of one core copying 1 GiB in memory (numpy), best of 3."""
    src = np.ones(GiB, dtype=np.uint8)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return GiB / best / 1e6


# --------------------------------------------------------------------------------- one run
@dataclass
class Ctx:
    """What every run needs: interpreters, logs, the emulator's environment."""

    peer_python: Path
    logs: Path
    quick: bool
    env: dict[str, str]

    def python(self, loader: str) -> str:
        return sys.executable if loader.startswith("stoker") else str(self.peer_python)


def spec_for(shape: Shape, loader: str, info: dict, **over: object) -> dict:
    samples_per_shard = max(1, shape.n // max(1, len(info["starts"] or [0])))
    spec = {
        "loader": loader,
        "source": info["dir"],
        "urls": [p for p in info["files"] if p.endswith(".tar")],
        "n": shape.n,
        "batch": shape.batch,
        "workers": WORKERS,
        "stack": shape.stack,
        "seed": 0,
        "starts": info["starts"],
        "wds_buffer": BLOCK_SHARDS * samples_per_shard,
        "compute_s": 0.0,
    }
    spec.update(over)
    return spec


# Where the kernel made a process wait for memory: direct compaction (a huge page asked for
# while free memory is fragmented: numpy advises huge pages for large arrays) and direct
# reclaim (no free memory at all: the page cache is freed in the faulting thread).
STALLS = ("compact_stall", "allocstall_normal", "allocstall_movable")


def memory_stalls() -> dict[str, int]:
    with open("/proc/vmstat") as f:
        counters = dict(line.split() for line in f)
    return {k: int(counters.get(k, 0)) for k in STALLS}


def run_loader(ctx: Ctx, spec: dict, tag: str, env: dict[str, str] | None = None) -> dict:
    """One epoch in a fresh process; its JSON line, plus the process's own wall time and the
    memory stalls the machine saw meanwhile (the whole machine's: nothing else runs)."""
    log = ctx.logs / f"{tag}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    stalls = memory_stalls()
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "w") as err:
        done = subprocess.run(
            [ctx.python(spec["loader"]), str(WORKER), "run", json.dumps(spec)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=dict(env or ctx.env, **spec.get("env", {})),
            timeout=RUN_TIMEOUT_S,
            cwd=BENCH,
        )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if done.returncode:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{tag} exited {done.returncode}; {log}:\n{tail}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["process_s"], out["cpu_s"] = wall, cpu
    out["memory_stalls"] = {k: v - stalls[k] for k, v in memory_stalls().items()}
    return out


def add_rates(out: dict, shape: Shape) -> dict:
    sizes = np.asarray(shape.sizes)
    out["bytes"] = int(sizes.mean() * out["samples"]) if shape.stack else None
    if out["bytes"] is None:  # unet3d: every sample is delivered once (checked), sizes known
        out["bytes"] = int(sizes.sum() * out["samples"] / shape.n)
    out["samples_s"] = out["samples"] / out["epoch_s"]
    out["mb_s"] = out["bytes"] / out["epoch_s"] / 1e6
    return out


def check(out: dict, shape: Shape, problems: list[str], what: str) -> None:
    short = shape.n - out["samples"]
    if out["duplicates"] or out["out_of_range"] or short >= shape.batch * WORKERS:
        problems.append(
            f"{what}: {out['samples']} samples of {shape.n}, {out['duplicates']} duplicates, "
            f"{out['out_of_range']} ids out of range"
        )


def show(what: str, out: dict) -> None:
    au = f", AU {out['au']:.1%}" if out.get("au") is not None else ""
    print(
        f"  {what:<34} {out['samples_s']:9.1f} samples/s {out['mb_s']:8.1f} MB/s  first batch "
        f"{out['first_batch_s']:.2f} s{au}",
        flush=True,
    )


# --------------------------------------------------------------------------------- local disk
def rotated(items: tuple[str, ...], rep: int) -> list[str]:
    k = rep % len(items)
    return list(items[k:] + items[:k])


def measure_local(shape: Shape, formats: dict, ctx: Ctx, reps: int, workers0: bool) -> dict:
    runs: dict[str, dict[str, list[dict]]] = {lo: {} for lo in LOCAL_LOADERS}
    problems: list[str] = []
    ceilings, parallel = [], []
    files = [p for lo in LOCAL_LOADERS for p in formats[FORMAT[lo]]["files"]]
    took = prime(sorted(set(files)))
    print(f"  read every format once with O_DIRECT   {took:9.1f} s", flush=True)
    for rep in range(reps):
        ceilings.append(disk_read_ceiling())
        print(f"  disk ceiling (dd O_DIRECT)          {ceilings[-1]:9.1f} MB/s", flush=True)
        parallel.append(disk_read_ceiling(PARALLEL_DD))
        print(f"  same, {PARALLEL_DD} dd at once             {parallel[-1]:9.1f} MB/s", flush=True)
        for loader in rotated(LOCAL_LOADERS, rep):
            info = formats[FORMAT[loader]]
            spec = spec_for(shape, loader, info)
            evict(info["files"])
            left = resident_bytes(info["files"])
            kinds = [("cold", spec), ("warm", spec)]
            if workers0 and loader in PEERS:  # stoker's own run already has 0 workers
                kinds.append(("warm, 0 workers", dict(spec, workers=0)))
            for kind, sp_ in kinds:
                tag = f"{shape.name}-{loader}-{kind.replace(', ', '-').replace(' ', '')}-{rep}"
                out = add_rates(run_loader(ctx, sp_, tag), shape)
                if kind == "cold":
                    out["resident_before"] = left
                check(out, shape, problems, f"{loader} {kind}")
                runs[loader].setdefault(kind, []).append(out)
                show(f"{shape.name} {loader} {kind}", out)
    return {
        "runs": runs,
        "disk_mb_s": ceilings,
        "disk_parallel_mb_s": parallel,
        "problems": problems,
    }


# --------------------------------------------------------------------------------- accelerator
def measure_accelerator(shape: Shape, formats: dict, ctx: Ctx, reps: int, local: dict) -> dict:
    """AU at one emulated A100 (cold), then the most accelerators each loader keeps >= 90 %."""
    out: dict = {"compute_s": shape.compute_s, "batch": shape.batch, "au": {}, "search": {}}
    problems: list[str] = []
    for rep in range(reps):
        for loader in rotated(LOADERS, rep):
            info = formats[FORMAT[loader]]
            evict(info["files"])
            spec = spec_for(shape, loader, info, compute_s=shape.compute_s)
            got = add_rates(run_loader(ctx, spec, f"au-{loader}-{rep}"), shape)
            check(got, shape, problems, f"{loader} AU")
            out["au"].setdefault(loader, []).append(got)
            show(f"{shape.name} {loader} 1 accelerator", got)
    for loader in LOADERS:
        rate = statistics.median(r["samples_s"] for r in local["runs"][loader]["cold"])
        out["search"][loader] = search_n(shape, formats, ctx, loader, rate)
    out["problems"] = problems
    return out


def search_n(shape: Shape, formats: dict, ctx: Ctx, loader: str, rate: float) -> dict:
    """Largest N with AU >= 90 % at compute / N, starting where the cold rate says it lies."""
    info = formats[FORMAT[loader]]
    demand_one = shape.batch / shape.compute_s  # samples/s one accelerator consumes
    guess = max(1, min(N_MAX, int(rate * AU_TARGET / demand_one)))
    trials: dict[int, float] = {}

    def au(n: int) -> float:
        if n not in trials:
            evict(info["files"])
            spec = spec_for(shape, loader, info, compute_s=shape.compute_s / n)
            got = add_rates(run_loader(ctx, spec, f"search-{loader}-{n}"), shape)
            trials[n] = got["au"]
            show(f"{shape.name} {loader} {n} accelerators", got)
        return trials[n]

    n = guess
    if au(n) >= AU_TARGET:
        while n < N_MAX and au(n + 1) >= AU_TARGET:
            n += 1
        best = n
    else:
        while n > 1 and au(n - 1) < AU_TARGET:
            n -= 1
        best = n - 1  # 0: not even one accelerator
    return {"n": best, "trials": {str(k): v for k, v in sorted(trials.items())}, "guess": guess}


# --------------------------------------------------------------------------------- Blob
def public_container(az: Azurite, name: str) -> None:
    from azure.storage.blob import BlobServiceClient

    with BlobServiceClient.from_connection_string(az.connection_string) as svc:
        svc.create_container(name, public_access="container")


def upload(az: Azurite, container: str, fmt: str, info: dict) -> None:
    from stoker.stage import stage

    os.environ["AZURE_STORAGE_CONNECTION_STRING"] = az.connection_string
    with tempfile.TemporaryDirectory(dir=BENCH) as state:
        summary = stage(
            info["dir"], f"az://{container}/{fmt}", state_dir=Path(state), allow_http=True
        )
    if not summary.ok:
        raise RuntimeError(f"upload of {fmt} failed: {summary.failed[:3]}")


def anonymous_get_ok(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=30) as r:  # noqa: S310 - loopback emulator
            return r.status == 200
    except OSError:
        return False


async def _read_all(store, keys: list[tuple[str, int]], into: Path | None = None) -> None:
    """Every key, by ranges, to memory; or, with ``into``, each into a file there (written as
    it arrives, as a node cache writes it)."""
    import obstore

    gate = asyncio.Semaphore(CEILING_INFLIGHT)
    fds = {}
    if into is not None:
        fds = {
            k: os.open(into / f"{n}", os.O_WRONLY | os.O_CREAT, 0o644)
            for n, (k, _) in enumerate(keys)
        }

    async def one(key: str, start: int, end: int) -> None:
        async with gate:
            got = await obstore.get_range_async(store, key, start=start, end=end)
            if into is not None:
                os.pwrite(fds[key], got, start)

    ranges = [
        (k, s, min(size, s + CEILING_RANGE))
        for k, size in keys
        for s in range(0, size, CEILING_RANGE)
    ]
    try:
        await asyncio.gather(*(one(*r) for r in ranges))
    finally:
        for fd in fds.values():
            os.close(fd)


def blob_ceiling(az: Azurite, container: str, info: dict, to_disk: bool = False) -> float:
    """MB/s of obstore reading the stoker shards from the emulator to memory, or into files
    in a fresh folder on this disk (what any node cache pays on top: the page cache's fill)."""
    from obstore.store import AzureStore

    store = AzureStore(
        container,
        config={"account_name": ACCOUNT, "account_key": KEY, "endpoint": az.endpoint},
        client_options={"allow_http": True},
    )
    keys = [
        (f"stoker/{os.path.relpath(p, info['dir'])}", os.path.getsize(p)) for p in info["files"]
    ]
    into = Path(tempfile.mkdtemp(prefix="ceiling-", dir=BENCH / "stream")) if to_disk else None
    try:
        start = time.perf_counter()
        asyncio.run(_read_all(store, keys, into))
        return sum(s for _, s in keys) / (time.perf_counter() - start) / 1e6
    finally:
        if into is not None:
            shutil.rmtree(into)


def measure_blob(shape: Shape, formats: dict, ctx: Ctx, reps: int) -> dict:
    runs: dict[str, list[dict]] = {lo: [] for lo in BLOB_LOADERS}
    problems: list[str] = []
    ceilings, to_disk = [], []
    container = "stream"
    with Azurite() as az:
        public_container(az, container)
        for fmt in BLOB_LOADERS:
            upload(az, container, fmt, formats[fmt])
        base = f"{az.endpoint}/{container}"
        wds = formats["wds"]
        urls = [f"{base}/wds/{os.path.relpath(p, wds['dir'])}" for p in wds["urls_local"]]
        public = anonymous_get_ok(f"{base}/wds/{os.path.relpath(wds['urls_local'][0], wds['dir'])}")
        if not public:
            sas = az.container_sas(container)
            urls = [f"{u}?{sas}" for u in urls]
        env = dict(ctx.env, AZURE_STORAGE_CONNECTION_STRING=az.connection_string)
        storage = {
            "account_url": az.endpoint,
            "credential": {"account_name": ACCOUNT, "account_key": KEY},
        }
        for rep in range(reps):
            ceilings.append(blob_ceiling(az, container, formats["stoker"]))
            print(f"  Blob ceiling (obstore, to memory)   {ceilings[-1]:9.1f} MB/s", flush=True)
            to_disk.append(blob_ceiling(az, container, formats["stoker"], to_disk=True))
            print(f"  same, into files on this disk       {to_disk[-1]:9.1f} MB/s", flush=True)
            for loader in rotated(BLOB_LOADERS, rep):
                cache = Path(tempfile.mkdtemp(prefix=f"cache-{loader}-", dir=BENCH / "stream"))
                over: dict = {"cache": str(cache)}
                if loader == "stoker":
                    over["source"] = f"az://{container}/stoker"
                elif loader == "wds":
                    over["urls"] = [f"pipe:curl -s -f {u}" for u in urls]
                else:
                    over["source"] = f"azure://{container}/litdata"
                    over["storage_options"] = storage
                    # Its default async path builds obstore's AzureStore with no endpoint or key
                    # (downloader.py: "TODO: Check how to pass storage options"): use the
                    # azure-storage-blob path, which takes them.
                    over["env"] = {"LITDATA_ASYNC_CHUNK_PREFETCH": "0"}
                spec = spec_for(shape, loader, formats[FORMAT[loader]], **over)
                try:
                    out = add_rates(
                        run_loader(ctx, spec, f"blob-{shape.name}-{loader}-{rep}", env), shape
                    )
                finally:
                    shutil.rmtree(cache, ignore_errors=True)
                check(out, shape, problems, f"{loader} Blob")
                runs[loader].append(out)
                show(f"{shape.name} {loader} Blob", out)
        rss = az.rss_mib()
    return {
        "runs": runs,
        "ceiling_mb_s": ceilings,
        "ceiling_disk_mb_s": to_disk,
        "problems": problems,
        "wds_access": "public container" if public else "container SAS",
        "azurite_rss_mib": rss,
    }


# --------------------------------------------------------------------------------- figures
def med(runs: list[dict], field: str) -> float:
    return statistics.median(r[field] for r in runs)


def _f(v: float) -> str:
    return f"{v:,.0f}" if v >= 20 else f"{v:.1f}"


def _s(v: float) -> str:
    return f"{v:.2f} s" if v < 10 else f"{v:.1f} s"


def _yes(ok: bool) -> str:
    return "met" if ok else "**missed**"


class Targets:
    """Rows of the targets table: what, measured, wanted, met."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, bool]] = []

    def add(self, what: str, measured: str, wanted: str, ok: bool) -> None:
        self.rows.append((what, measured, wanted, ok))

    def peer(self, what: str, runs: dict[str, list[dict]], peers: tuple[str, ...]) -> str:
        """stoker / the fastest peer in samples/s (>= 1.2x), and first batch (<= the best)."""
        rate = {lo: med(runs[lo], "samples_s") for lo in ("stoker", *peers)}
        best = max(peers, key=rate.__getitem__)
        ratio = rate["stoker"] / rate[best]
        self.add(
            f"{what}: stoker / fastest peer",
            f"{ratio:.2f}x ({NAMES[best]})",
            f">= {TARGET_PEER}x",
            ratio >= TARGET_PEER,
        )
        first = {lo: med(runs[lo], "first_batch_s") for lo in ("stoker", *peers)}
        quickest = min(peers, key=first.__getitem__)
        self.add(
            f"{what}: stoker's first batch",
            f"{first['stoker']:.2f} s; {NAMES[quickest]} {first[quickest]:.2f} s",
            "<= the quickest peer's",
            first["stoker"] <= first[quickest],
        )
        return f"stoker / fastest peer ({NAMES[best]}): **{ratio:.2f}x**"

    def table(self) -> str:
        return "| target | measured | wanted | |\n|---|---|---|---|\n" + "".join(
            f"| {a} | {b} | {c} | {_yes(d)} |\n" for a, b, c, d in self.rows
        )


def _shards_cell(lo: str, runs: list[dict]) -> str:
    if lo == "files":
        return "(each sample its own file)"
    vals = [r["distinct_shards"] for r in runs if r["distinct_shards"] is not None]
    return f"{statistics.median(vals):.1f}" if vals else "-"


def local_section(sh: dict, targets: Targets) -> str:
    runs = sh["local"]["runs"]
    zero = "warm, 0 workers" in runs["files"]
    out = (
        "| loader | cold samples/s | cold MB/s | cold first batch | warm samples/s | warm MB/s "
        "| warm first batch | warm CPU s | "
        + ("0 workers, warm samples/s | " if zero else "")
        + "distinct shards per batch |\n|---|"
        + "---:|" * (8 + zero)
        + "\n"
    )
    for lo in (lo for lo in LOCAL_LOADERS if lo in runs):  # older results lack a row
        c, w = runs[lo]["cold"], runs[lo]["warm"]
        cells = [
            _f(med(c, "samples_s")),
            _f(med(c, "mb_s")),
            _s(med(c, "first_batch_s")),
            _f(med(w, "samples_s")),
            _f(med(w, "mb_s")),
            _s(med(w, "first_batch_s")),
            f"{med(w, 'cpu_s'):.1f}",
        ]
        if zero:
            zero_runs = runs[lo].get("warm, 0 workers")
            cells.append(
                _f(med(zero_runs, "samples_s"))
                if zero_runs
                else ("(its warm run)" if lo == "stoker" else "-")
            )
        out += f"| {NAMES[lo]} | " + " | ".join(cells) + f" | {_shards_cell(lo, c)} |\n"
    disk = statistics.median(sh["local"]["disk_mb_s"])
    label = sh["label"].split(":")[0]
    notes = []
    for kind in ("cold", "warm"):
        by = {lo: runs[lo][kind] for lo in LOADERS}
        notes.append(f"{kind}: " + targets.peer(f"{label}, local {kind}", by, PEERS))
    if zero:
        by = {lo: runs[lo]["warm, 0 workers"] for lo in PEERS} | {"stoker": runs["stoker"]["warm"]}
        rate = {lo: med(by[lo], "samples_s") for lo in LOADERS}
        best = max(PEERS, key=rate.__getitem__)
        notes.append(
            f"0 workers, warm: stoker / fastest peer ({NAMES[best]}): "
            f"{rate['stoker'] / rate[best]:.2f}x"
        )
    cold_mb = med(runs["stoker"]["cold"], "mb_s")
    targets.add(
        f"{label}, local cold: stoker / disk ceiling",
        f"{cold_mb / disk:.2f}x ({_f(cold_mb)} of {_f(disk)} MB/s)",
        f">= {TARGET_DISK}x",
        cold_mb / disk >= TARGET_DISK,
    )
    left = [r.get("resident_before") for lo in runs for r in runs[lo]["cold"]]
    left_mb = max((v for v in left if v is not None), default=None)
    return out + (
        f"\n{'; '.join(notes)}. Disk ceiling (`dd iflag=direct bs=16M`, 1 GiB, median of "
        f"{len(sh['local']['disk_mb_s'])}): {_f(disk)} MB/s; stoker cold: "
        f"**{cold_mb / disk:.2f}x** of it."
        + _parallel_note(sh["local"], runs)
        + (
            f" Before the cold runs, fincore found at most {left_mb / 1e6:,.1f} MB of a "
            "format in the page cache."
            if left_mb is not None
            else ""
        )
        + _stalls_note(runs)
        + "\n"
    )


def _stalls_note(runs: dict) -> str:
    """Which cold runs the kernel stalled for memory, and how often (older results: none)."""
    seen = []
    for lo in runs:
        counts = [sum(r.get("memory_stalls", {}).values()) for r in runs[lo]["cold"]]
        if any(counts):
            seen.append(f"{NAMES[lo]} {', '.join(map(str, counts))}")
    if not seen:
        return ""
    return (
        " The kernel stalled cold runs for memory (direct compaction or reclaim, per run): "
        + "; ".join(seen)
        + ". Such stalls come when free memory runs low (the page cache holds the other "
        "formats) and fall on whichever process faults in new memory then."
    )


def _parallel_note(local: dict, runs: dict) -> str:
    """The disk with several reads in flight, as the loaders read it, and whether 1.2x the
    fastest peer's cold rate is above even that."""
    if not local.get("disk_parallel_mb_s"):  # older results
        return ""
    parallel = statistics.median(local["disk_parallel_mb_s"])
    best = max(PEERS, key=lambda lo: med(runs[lo]["cold"], "mb_s"))
    wanted = TARGET_PEER * med(runs[best]["cold"], "mb_s")
    cold_mb = med(runs["stoker"]["cold"], "mb_s")
    return (
        f" With {PARALLEL_DD} dd at once over quarters of the file, the disk gives {_f(parallel)} "
        f"MB/s; stoker cold reads at {cold_mb / parallel:.2f}x of that"
        + (
            f", and {TARGET_PEER}x the fastest peer ({NAMES[best]}) would be {_f(wanted)} MB/s, "
            f"{wanted / parallel:.2f}x what the disk gives."
            if wanted > parallel
            else "."
        )
    )


def blob_section(sh: dict, targets: Targets) -> str:
    b = sh["blob"]
    runs = b["runs"]
    ceiling = statistics.median(b["ceiling_mb_s"])
    out = (
        "| loader | runs | samples/s | MB/s | first batch | CPU s | / ceiling |\n"
        "|---|---:|---:|---:|---:|---:|---:|\n"
    )
    for lo in BLOB_LOADERS:
        r = runs[lo]
        out += (
            f"| {NAMES[lo]} | {len(r)} | {_f(med(r, 'samples_s'))} | {_f(med(r, 'mb_s'))} | "
            f"{_s(med(r, 'first_batch_s'))} | {med(r, 'cpu_s'):.1f} | "
            f"{med(r, 'mb_s') / ceiling:.2f}x |\n"
        )
    out += "| Mosaic Streaming | - | cannot read the emulator (see notes) | | | | |\n"
    out += (
        f"| ceiling: obstore to memory, {CEILING_INFLIGHT} in flight | {len(b['ceiling_mb_s'])} "
        f"| | {_f(ceiling)} | | | 1.00x |\n"
    )
    disk = b.get("ceiling_disk_mb_s")
    if disk:
        out += (
            f"| same, each object into a file on this disk | {len(disk)} | | "
            f"{_f(statistics.median(disk))} | | | {statistics.median(disk) / ceiling:.2f}x |\n"
        )
    note = targets.peer(f"{sh['label'].split(':')[0]}, Blob", runs, BLOB_LOADERS[1:])
    own = statistics.median(r["stoker_metrics"]["first_batch_s"] for r in runs["stoker"])
    total = med(runs["stoker"], "first_batch_s")
    return out + (
        f"\n{note}. Of stoker's {total:.2f} s to the first batch, its own meter (from the "
        f"loader's first request) counts {own:.2f} s: the rest is building the dataset (reading "
        "index.json). stoker reads the first batch by ranged GETs, 32 in flight, so it does not "
        "wait for the whole shards it draws from: one GET per shard's tables and one per sample "
        "(408 for resnet50), where WebDataset streams one tar per worker. Azurite serves GETs "
        "on one thread at ~1.5-3 ms of CPU each (its CPU during stoker's first batch, probed "
        "by hand, was about the batch's whole time), and that cost drifts: between epochs of "
        "the same loader, the same 408 GETs cost it 1.05, 1.31, 1.49 and 2.27 s of CPU in four "
        "runs (probed 2026-12-01). A real Blob account spreads GETs over many servers. Fewer, "
        "larger GETs did not help here: merging samples of a shard less than 0-512 KiB apart "
        "gave first batches within the noise of one GET per sample, 1 MiB apart (~150 GETs "
        "and ~3x the bytes) was slower (2.5 and 2.9 s in 2 of 3 runs); probed again on "
        "2026-12-02 (8 shards x 50 samples, to memory), one GET per sample took 0.49-0.83 s, "
        "ranges merged across gaps up to 2 MiB (75-84 GETs, 6x the bytes) 0.60-0.61 s. "
        f"{_cache_note(b)}CPU s: "
        "the loader's process and the workers it waited for (the emulator's CPU is not "
        "counted).\n"
    )


def _cache_note(b: dict) -> str:
    disk = b.get("ceiling_disk_mb_s")
    if not disk:
        return ""
    runs, into = b["runs"], statistics.median(disk)
    fastest = max(med(runs[lo], "mb_s") for lo in BLOB_LOADERS[1:])
    return (
        "stoker keeps every shard it fetches in its node cache (a later epoch reads local "
        "disk; WebDataset and LitData fetch again), so its ceiling is the one into files: "
        f"{_f(into)} MB/s, stoker at {med(runs['stoker'], 'mb_s') / into:.2f}x of it; 1.2x the "
        f"fastest peer would be {_f(TARGET_PEER * fastest)} MB/s, "
        f"{TARGET_PEER * fastest / into:.2f}x that ceiling. Between the "
        "two ceilings lies the page cache's fill, slow on this VM for memory freed seconds "
        "before (see the page cache fill above). With no node cache at all (an experiment, "
        "not kept: resnet50's shards downloaded into recycled memory and read from there), "
        "stoker read 384 MB/s against WebDataset's 343 in the same run (1.12x, 3 runs each, "
        "2026-12-02). "
    )


def accel_section(sh: dict, targets: Targets) -> str:
    a = sh["accel"]
    out = (
        f"| loader | AU, 1 accelerator ({a['compute_s']} s per batch of {a['batch']}) "
        "| time between steps, 1 accelerator | largest N at AU >= 90 % "
        "| AU at N, N+1 (one run each) |\n|---|---:|---:|---:|---|\n"
    )
    gaps = {}
    for lo in LOADERS:
        s = a["search"][lo]
        trial = [s["trials"].get(str(n)) for n in (s["n"], s["n"] + 1)]
        cell = ", ".join(f"{v:.1%}" if v is not None else "-" for v in trial)
        au = med(a["au"][lo], "au")
        gaps[lo] = a["compute_s"] * (1 / au - 1) * 1e3  # ms per step not spent computing
        out += f"| {NAMES[lo]} | {au:.1%} | {gaps[lo]:.0f} ms | {s['n']} | {cell} |\n"
    out += (
        f"\nEven with every batch ready, each step spends {min(gaps.values()):.0f}-"
        f"{max(gaps.values()):.0f} ms outside the emulated compute. For the peers that is taking "
        "the batch over from a worker and, above all, releasing the previous one (46 MB of "
        "shared memory, ~15 ms here); stoker reads on threads of the training process into "
        "batch buffers it reuses, so it maps and releases nothing per step. At N accelerators "
        f"the step is {a['compute_s'] * 1e3:.0f} / N ms, so that fixed cost, as much as the "
        "loaders' rates, decides N on this machine.\n"
    )
    label = sh["label"].split(":")[0]
    au = med(a["au"]["stoker"], "au")
    targets.add(
        f"{label}, one emulated A100: stoker's AU",
        f"{au:.1%}",
        f">= {AU_TARGET:.0%}",
        au >= AU_TARGET,
    )
    ours = a["search"]["stoker"]["n"]
    best = max(PEERS, key=lambda p: a["search"][p]["n"])
    targets.add(
        f"{label}: emulated accelerators one reader keeps at AU >= 90 %",
        f"stoker {ours}; {NAMES[best]} {a['search'][best]['n']}",
        ">= the best peer's",
        ours >= a["search"][best]["n"],
    )
    return out


def _fill_note(info: dict) -> str:
    fill = info.get("page_cache_fill")
    if not fill:
        return ""
    return (
        f" Page cache fill (1 GiB written by one process): {_f(fill['recycled_mb_s'])} MB/s "
        f"into memory freed just before, {_f(fill['returned_mb_s'])} MB/s into memory freed "
        f"{fill['pause_s']:.0f} s before: this VM hands freed memory back to its host, so a "
        "loader that takes fresh memory (a page cache fill, new buffers) pays by how long ago "
        "another process freed it."
    )


def markdown(mode: str, info: dict, shapes_: list[dict]) -> str:
    targets = Targets()
    quick = " --quick" if mode == "quick" else ""
    v = info["versions"]
    parts = []
    for sh in shapes_:
        head = f"### {sh['label']}, batch {sh['batch']}"
        if "local" in sh:
            parts.append(f"{head}: local disk\n\n" + local_section(sh, targets))
        if "accel" in sh:
            parts.append(f"{head}: emulated accelerator, cold\n\n" + accel_section(sh, targets))
        if "blob" in sh:
            parts.append(f"{head}: from Blob (Azurite on loopback)\n\n" + blob_section(sh, targets))
    problems = [
        f"- problem: {p}\n"
        for sh in shapes_
        for part in PARTS
        for p in sh.get(part, {}).get("problems", [])
    ]
    measured = [sh[part] for sh in shapes_ for part in PARTS if part in sh]
    quiet = max((m.get("cpu_elsewhere") or 0) for m in measured)
    reps = sorted({m["reps"] for m in measured})
    quiet_text = (
        f"Other processes used up to {quiet:.0%} of the machine's CPU while a shape ran"
        + (
            ": **every figure is skewed by them; compare within a table, not across runs**."
            if quiet >= 0.05
            else "."
        )
    )
    blob_notes = "".join(
        f"- {sh['label'].split(':')[0]}: WebDataset read the emulator through a "
        f"{sh['blob']['wds_access']}; Azurite held {sh['blob']['azurite_rss_mib']:,.0f} MiB.\n"
        for sh in shapes_
        if "blob" in sh
    )
    shown = "; ".join(
        f"{sh['label']} (measured "
        + ", ".join(f"{p} {sh[p]['when'][:16]}" for p in PARTS if p in sh)
        + ")"
        for sh in shapes_
    )
    return f"""## stream: stoker's loader beside WebDataset, Mosaic Streaming, LitData and a DataLoader over files (target 1.2x the fastest)

Reproduce: `.venv/bin/python bench/stream_bench.py{quick} --write BENCHMARKS.md` (the peers'
environment `.bench/stream-venv` is made on the first run). Machine: {info["nproc"]} cores,
{info["ram_gib"]:.0f} GiB RAM, Python {info["python"]}; stoker on torch {info["torch"]}; the
peers on torch {v["torch"]}, webdataset {v["webdataset"]}, mosaicml-streaming
{v["mosaicml-streaming"]}, litdata {v["litdata"]}; Azurite {info["azurite"]} in memory. Datasets:
{shown}. Memory copy ceiling (one core, numpy): {_f(info["memcpy_mb_s"])} MB/s.{_fill_note(info)}

How (the script's docstring has the details): the same random bytes in every format, ~64 MiB
shards; each run is one epoch in a fresh process, timed from building the loader (after the
imports) to the last batch; medians of {" or ".join(map(str, reps))} runs, the loaders' order rotating. Every
loader has the batch size shown, prefetch factor 2 and shuffle on, and hands over the same
batch (a uint8 tensor `(batch, record)` for resnet50, a list of uint8 tensors for unet3d). The
peers have {WORKERS} worker processes and build it with one collate function (one copy per
sample in the worker, into shared memory); stoker, as its docs advise for raw records, reads
each sample straight into the batch on 8 reader threads of the training process
(`dtype=torch.uint8`, `num_workers=0`; "stoker, 2 worker processes" is the same read in {WORKERS}
DataLoader workers); the consumer reads every sample's id, and the ids are checked (no duplicate, none
missing beyond a partial batch). Cold: the format's files evicted with
`posix_fadvise(POSIX_FADV_DONTNEED)` after a `sync` (and, before a shape's first run, every
format read once with `O_DIRECT`: the host caches this virtual disk, and the first read of
freshly written data was 10-50x slower than later cold reads); warm: the same run again at once. MB/s
counts sample bytes; CPU s is the loader's process and the workers it waited for. Distinct
shards per batch measures the shuffle: stoker draws each batch from a block of {BLOCK_SHARDS}
shards; WebDataset shuffles shards and then samples in a buffer of {BLOCK_SHARDS} shards'
worth; Mosaic and LitData use their defaults; the DataLoader over files shuffles globally.

{chr(10).join(parts)}
### Targets

{targets.table()}
### Notes

- {quiet_text}
- Mosaic Streaming cannot read the emulator: its Azure downloader builds
  `https://<account>.blob.core.windows.net` itself (streaming/base/storage/download.py) and
  takes no endpoint. LitData's default (async, obstore) Azure path cannot either: it builds
  `AzureStore(bucket, credential_provider=AzureCredentialProvider())` with no endpoint or key,
  so it runs with `LITDATA_ASYNC_CHUNK_PREFETCH=0`, through azure-storage-blob with
  `storage_options={{account_url, credential}}`. The DataLoader over files is not run from Blob:
  one GET per sample, which Azurite serves at ~120-170 per second with 20,000 blobs
  (shared/facts/peers.md).
- The emulated accelerator runs on resnet50 only: 16 unet3d samples make too few batches for
  a utilization figure.
{blob_notes}{"".join(problems)}"""


# --------------------------------------------------------------------------------- driver


def measure_shape(shape: Shape, mode: str, ctx: Ctx, reps: int, args: argparse.Namespace) -> dict:
    """The parts asked for, each saved as soon as it is measured (a part run alone replaces
    that part only): .bench/results/<mode>/stream/<shape>.json."""
    print(f"shape {shape.label}, {shape.nbytes / 1e9:.2f} GB", flush=True)
    formats = ensure_formats(shape, mode, ctx.peer_python)
    formats["wds"]["urls_local"] = [p for p in formats["wds"]["files"] if p.endswith(".tar")]
    path = results_dir(mode) / f"{shape.name}.json"
    result: dict = json.loads(path.read_text()) if path.exists() else {}
    if result.get("samples") != shape.n or result.get("bytes") != shape.nbytes:
        result = {}
    result |= {
        "shape": shape.name,
        "label": shape.label,
        "samples": shape.n,
        "bytes": shape.nbytes,
        "batch": shape.batch,
        "formats": {
            k: {"bytes": v["bytes"], "files": len(v["files"]), "shards": len(v["starts"] or [])}
            for k, v in formats.items()
        },
    }
    parts = args.parts.split(",")
    for part in PARTS:
        if part not in parts or (part == "accel" and shape.compute_s is None):
            continue
        if part == "accel" and "local" not in result:
            raise SystemExit("the accelerator search starts from the local figures: add local")
        start = cpu_mark()
        when = datetime.now(UTC).isoformat(timespec="minutes")
        if part == "local":
            got = measure_local(shape, formats, ctx, reps, shape.stack and not args.no_workers0)
        elif part == "accel":
            got = measure_accelerator(shape, formats, ctx, reps, result["local"])
        else:
            got = measure_blob(shape, formats, ctx, reps)
        result[part] = got | {"when": when, "reps": reps, "cpu_elsewhere": others_cpu_share(start)}
        path.write_text(json.dumps(result, indent=1))
    return result


def results_dir(mode: str) -> Path:
    path = BENCH / "results" / mode / "stream"
    path.mkdir(parents=True, exist_ok=True)
    return path


def saved_shapes(mode: str) -> list[dict]:
    order = {"resnet50": 0, "unet3d": 1}
    found = [json.loads(p.read_text()) for p in results_dir(mode).glob("*.json")]
    return sorted((r for r in found if "shape" in r), key=lambda r: order.get(r["shape"], 9))


def machine(peer_python: Path) -> dict:
    import torch

    mem = Path("/proc/meminfo").read_text().split()[1]
    azurite = subprocess.run(
        [str(sp.ROOT / "node_modules/.bin/azurite-blob"), "--version"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "nproc": os.cpu_count(),
        "ram_gib": int(mem) / (1 << 20),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "versions": sp.peer_versions(peer_python),
        "azurite": azurite,
        "memcpy_mb_s": memory_ceiling(),
        "page_cache_fill": page_cache_fill(BENCH / "stream" / "fill"),
        "when": datetime.now(UTC).strftime("%Y-%m-%d"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small datasets, 1 run per figure")
    parser.add_argument("--shapes", default="resnet50,unet3d")
    parser.add_argument(
        "--parts",
        default="local,accel,blob",
        help="local (disk, cold and warm), accel (emulated accelerator; needs local's figures), "
        "blob (Azurite)",
    )
    parser.add_argument("--reps", type=int, help="runs per figure (default 3, 1 with --quick)")
    parser.add_argument("--no-workers0", action="store_true", help="skip the 0-worker runs")
    parser.add_argument("--write", type=Path, help="replace the '## stream:' section of this file")
    parser.add_argument(
        "--render", action="store_true", help="only write the section from the saved results"
    )
    args = parser.parse_args()
    mode, reps = ("quick", args.reps or 1) if args.quick else ("full", args.reps or 3)
    machine_json = results_dir(mode) / "machine.json"
    if not args.render:
        peer_python = sp.ensure_venv()
        ctx = Ctx(peer_python, BENCH / "stream" / "logs" / mode, args.quick, dict(os.environ))
        machine_json.write_text(json.dumps(machine(peer_python) | {"reps": reps}, indent=1))
        for shape in shapes(args.quick):
            if shape.name in args.shapes.split(","):
                measure_shape(shape, mode, ctx, reps, args)
    section = markdown(mode, json.loads(machine_json.read_text()), saved_shapes(mode))
    if args.write:
        replace_section(args.write, section)
    print(section)


if __name__ == "__main__":
    main()
