"""``stoker stage`` against AzCopy, rclone, the plain SDK and ``cp -r``, on one machine, one run.

Three dataset shapes (random bytes, generated once into .bench/data): A) 2 x 1 GiB, B) 2,000
files log-normal around 1 MiB, C) 20,000 x 64 KiB (``--quick``: 2 x 256 MiB, 500, 2,000). For
each shape a fresh in-memory Azurite holds the dataset (uploaded once by stoker, untimed), and:

* ceiling: everything read to memory with obstore (the better of 32 and 8 requests in flight,
  16 MiB ranges of large objects), and written from memory the same way into a fresh emulator;
* import Blob -> local: stoker, rclone, AzCopy, the plain SDK (16 threads);
* export local -> Blob: stoker, rclone, AzCopy, each into a fresh emulator and container;
* POSIX -> POSIX: stoker against ``cp -r``.

Each run goes into an empty destination after ``sync`` and dropping the page cache; its time is
the tool's process from start to exit plus a ``sync`` after it (stoker makes every file durable
before it names it, the others do not: the ``sync`` makes the figures compare data on disk).
Medians of 3 runs (2 with ``--quick``); ``--bound-reps`` sets them apart for C. Shape C has
2,000 objects in the emulator (see ISSUE_C_OBJECTS), and the POSIX copy of C runs at the
issue's 20,000. Every stoker copy is checked (sizes of all files, MD5 of a sample); every
peer's copy is counted (files and bytes). Also: how much a resumed import re-sends after
``kill -9`` at half way, and the peak memory of a 1,000,000-key listing.

    .venv/bin/python bench/stage_bench.py [--quick] [--shapes A,B,C]
                                          [--parts import,export,posix] [--write BENCHMARKS.md]

A full run takes about 30 minutes for A and B and about an hour more for C; run it on an
otherwise idle machine (the section says how much CPU other processes took meanwhile).

Peers install into .bench/ on the first run (see _peers.py); results are kept in
.bench/results/<mode>/<shape>.json, and the section is written from those of the mode, so a
shape run alone updates its rows only (and ``--parts`` only those copies of it; the section
names when each was rerun).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from _machine import cpu_mark, others_cpu_share
from _markdown import replace_section

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _peers  # noqa: E402
from _peers import ACCOUNT, BENCH, Azurite, Peers  # noqa: E402

MiB, GiB = 1 << 20, 1 << 30
SRC_CONTAINER, DST_CONTAINER = "src", "dst"
CEILING_INFLIGHT, CEILING_RANGE = (32, 8), 16 * MiB  # the ceiling is the best of these
PEER_STREAMS = 16  # rclone --transfers / --multi-thread-streams, SDK threads
RESUME_KILL_AT = 0.5
LISTING_KEYS, LISTING_BATCH = 1_000_000, 5000
TARGET_PEER, TARGET_CEILING, TARGET_RSS_MB, TARGET_RESEND = 1.2, 0.9, 300, 0.05


# --------------------------------------------------------------------------------- datasets
@dataclass(frozen=True)
class Shape:
    name: str  # "A": the blob prefix and the data folder
    label: str
    keys: tuple[str, ...]
    sizes: tuple[int, ...]
    large: bool  # the large-file shape, where the ceiling target applies too

    @property
    def nbytes(self) -> int:
        return sum(self.sizes)

    @property
    def files(self) -> int:
        return len(self.sizes)


def _many(name: str, label: str, sizes: list[int]) -> Shape:
    keys = tuple(f"d{i // 1000:02d}/f{i:05d}.bin" for i in range(len(sizes)))
    return Shape(name, label, keys, tuple(sizes), large=False)


def lognormal_sizes(count: int, seed: int = 20261130) -> list[int]:
    """Median 1 MiB, sigma 0.75 (mean ~1.4 MiB), clipped to [4 KiB, 64 MiB]: fixed by the seed."""
    rng = random.Random(seed)
    return [
        min(64 * MiB, max(4096, int(rng.lognormvariate(math.log(MiB), 0.75)))) for _ in range(count)
    ]


# Shape C has 2,000 objects, not the issue's 20,000: at 20,000 blobs Azurite spends ~26 ms of
# its one core per GET (~2.5 ms at 2,000); one import took 527 s with stoker and 520 s with
# rclone on the same emulator (2026-11-30), so a full table would take hours and measure only
# the emulator. ``--c-objects 20000`` runs the issue's size; the report names the count used.
# The POSIX copy involves no emulator, so it always runs at the issue's size (posix_shape).
ISSUE_C_OBJECTS, C_OBJECTS = 20000, 2000


def shapes(quick: bool, c_objects: int | None = None) -> list[Shape]:
    big, many = (256 * MiB, 500) if quick else (GiB, 2000)
    small = c_objects or C_OBJECTS
    return [
        Shape("A", f"2 x {big // MiB:,} MiB", ("large-0.bin", "large-1.bin"), (big, big), True),
        _many("B", f"{many:,} files, log-normal ~1 MiB", lognormal_sizes(many)),
        _many("C", f"{small:,} x 64 KiB", [64 << 10] * small),
    ]


def posix_shape(shape: Shape, quick: bool) -> Shape:
    """The shape the POSIX copy runs on: C at the issue's 20,000 files (its own folder), since
    no emulator slows it down; the others as they are."""
    if quick or shape.name != "C" or shape.files == ISSUE_C_OBJECTS:
        return shape
    return _many(
        f"C{ISSUE_C_OBJECTS}", f"{ISSUE_C_OBJECTS:,} x 64 KiB", [64 << 10] * ISSUE_C_OBJECTS
    )


def ensure_dataset(shape: Shape, mode: str) -> Path:
    """The shape's files under .bench/data/<mode>/<name>, generated once (random bytes)."""
    root = BENCH / "data" / mode / shape.name
    stamp = root.with_suffix(".complete")
    want = json.dumps([shape.keys, shape.sizes])
    if stamp.exists() and stamp.read_text() == want:
        return root
    shutil.rmtree(root, ignore_errors=True)
    for key, size in zip(shape.keys, shape.sizes, strict=True):
        write_random(root / key, size)
    stamp.write_text(want)
    return root


def write_random(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 16 * MiB)
            f.write(os.urandom(n))
            left -= n


# --------------------------------------------------------------------------------- running
@dataclass
class Run:
    seconds: float  # the process, start to exit
    sync_s: float  # the sync after it
    rss_mib: float  # its peak resident memory
    cpu_s: float  # user + system CPU it used (the emulator competes for the same cores)
    stdout: str

    @property
    def total_s(self) -> float:
        return self.seconds + self.sync_s


def drop_caches() -> bool:
    """sync, then drop the page cache (root only); False where the kernel refuses."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def run_tool(argv: list[str], env: dict[str, str] | None, log: Path) -> Run:
    """Time one tool's process, then a ``sync``; its output goes to ``log``.*

    Peak memory and CPU come from /usr/bin/time: a child's own ru_maxrss would start from this
    process's, which a fork hands down.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    out_path, err_path, rss_path = (log.with_suffix(s) for s in (".out", ".err", ".rss"))
    timed = ["/usr/bin/time", "-f", "%M %U %S", "-o", str(rss_path), *argv]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        code = subprocess.run(timed, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
    start = time.perf_counter()
    os.sync()
    sync_s = time.perf_counter() - start
    if code.returncode:
        tail = err_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{Path(argv[0]).name} exited {code.returncode}; {err_path}:\n{tail}")
    rss_kib, user_s, sys_s = rss_path.read_text().split("\n")[-2].split()
    stdout = out_path.read_text(errors="replace")
    return Run(seconds, sync_s, int(rss_kib) / 1024, float(user_s) + float(sys_s), stdout)


def fresh_dir(name: str) -> Path:
    path = BENCH / "runs" / name
    shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


# The stoker runs: stage() in its own process, as a user's script would call it. read_chunks is
# wrapped to count the bytes actually fetched from the source (the resume test needs them). A
# third argument "no-md5" turns verification off (hash_files=False), to show what it costs.
STOKER = r"""
import json, sys
from stoker.store import _azure
fetched = 0
_read = _azure.BlobStore.read_chunks
async def counted(self, key, start, end, etag=None):
    global fetched
    async for chunk in _read(self, key, start, end, etag):
        fetched += len(chunk)
        yield chunk
_azure.BlobStore.read_chunks = counted
from stoker.stage import stage
hash_files = False if sys.argv[3:] == ["no-md5"] else None
s = stage(sys.argv[1], sys.argv[2], allow_http=True, hash_files=hash_files)
print(json.dumps({**s.to_dict(), "bytes_fetched": fetched}))
sys.exit(0 if s.ok else 1)
"""

SDK_IMPORT = r"""
import os, sys
from concurrent.futures import ThreadPoolExecutor
from azure.storage.blob import ContainerClient
conn, container, prefix, dst, threads = sys.argv[1:6]
cc = ContainerClient.from_connection_string(conn, container)
blobs = [(b.name, b.size) for b in cc.list_blobs(name_starts_with=prefix)]
def get(item):
    name, size = item
    path = os.path.join(dst, name[len(prefix):])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        cc.get_blob_client(name).download_blob(
            max_concurrency=int(threads) if size > 64 << 20 else 1).readinto(f)
with ThreadPoolExecutor(int(threads)) as pool:
    list(pool.map(get, blobs))
"""


class Tools:
    """Each tool's command line and environment against one emulator: (argv, env)."""

    def __init__(self, peers: Peers, az: Azurite | None, state: Path) -> None:
        self.peers, self.az, self.state = peers, az, state

    def stoker(self, src: str, dst: str, *flags: str) -> tuple[list[str], dict[str, str]]:
        env = dict(os.environ, XDG_CACHE_HOME=str(self.state))  # export manifests: fresh each
        if self.az:
            env["AZURE_STORAGE_CONNECTION_STRING"] = self.az.connection_string
        return [sys.executable, "-c", STOKER, src, dst, *flags], env

    def rclone(self, src: str, dst: str, upload: bool) -> tuple[list[str], dict[str, str]]:
        env = dict(
            os.environ,
            RCLONE_CONFIG=str(BENCH / "rclone.conf"),
            RCLONE_AZUREBLOB_ACCOUNT=ACCOUNT,
            RCLONE_AZUREBLOB_KEY=_peers.KEY,
            RCLONE_AZUREBLOB_ENDPOINT=self.az.endpoint,
        )
        (BENCH / "rclone.conf").touch()
        tune = ["--transfers", str(PEER_STREAMS), "--checkers", str(PEER_STREAMS)]
        if upload:
            tune += [
                "--azureblob-upload-concurrency",
                str(PEER_STREAMS),
                "--azureblob-chunk-size",
                "8M",
            ]
        else:
            tune += ["--multi-thread-streams", str(PEER_STREAMS)]
        return [str(self.peers.rclone), "copy", src, dst, "-q", *tune], env

    def azcopy(self, src: str, dst: str, upload: bool) -> tuple[list[str], dict[str, str]]:
        shutil.rmtree(BENCH / "azcopy" / "plans", ignore_errors=True)
        direction = (
            ["--from-to", "LocalBlob", "--put-md5"] if upload else ["--from-to", "BlobLocal"]
        )
        argv = [
            str(self.peers.azcopy),
            "copy",
            src,
            dst,
            "--recursive",
            *direction,
            "--output-level",
            "quiet",
            "--log-level",
            "ERROR",
        ]
        return argv, _peers.azcopy_env()

    def sdk(self, prefix: str, dst: str) -> tuple[list[str], dict[str, str]]:
        argv = [
            str(self.peers.python),
            "-c",
            SDK_IMPORT,
            self.az.connection_string,
            SRC_CONTAINER,
            prefix,
            dst,
            str(PEER_STREAMS),
        ]
        return argv, dict(os.environ)

    def blob_url(self, container: str, prefix: str) -> str:
        """AzCopy's form: path-style URL with a container SAS."""
        return f"{self.az.endpoint}/{container}/{prefix}?{self.az.container_sas(container)}"


# --------------------------------------------------------------------------------- checking
def tree_stats(root: Path) -> tuple[int, int]:
    """(files, bytes) under ``root``, leaving out stoker's state folder."""
    files = nbytes = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".stoker"]
        for name in names:
            files += 1
            nbytes += os.stat(os.path.join(folder, name)).st_size
    return files, nbytes


def allocated_bytes(root: Path) -> int:
    """Bytes on disk under ``root`` (partial files are sparse: their size says nothing)."""
    total = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".stoker"]
        for name in names:
            try:
                total += os.stat(os.path.join(folder, name)).st_blocks * 512
            except FileNotFoundError:  # renamed from .stoker-partial meanwhile
                pass
    return total


def sample_keys(shape: Shape, count: int = 8) -> list[str]:
    if shape.large:
        return list(shape.keys)
    rng = random.Random(7)
    return sorted({shape.keys[0], shape.keys[-1], *rng.sample(shape.keys, count)})


def md5_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "md5").hexdigest()


def check_count(shape: Shape, root: Path) -> str | None:
    """None when ``root`` holds as many files and bytes as the dataset, else what differs."""
    files, nbytes = tree_stats(root)
    if (files, nbytes) != (shape.files, shape.nbytes):
        return f"{root}: {files} files, {nbytes:,} B; expected {shape.files}, {shape.nbytes:,} B"
    return None


def check_local_copy(shape: Shape, src: Path, dst: Path) -> str | None:
    """Every file's size, and the MD5 of a sample, against the source; None when all match."""
    for key, size in zip(shape.keys, shape.sizes, strict=True):
        got = (dst / key).stat().st_size if (dst / key).exists() else None
        if got != size:
            return f"{dst / key}: size {got}, expected {size}"
    for key in sample_keys(shape):
        if md5_file(dst / key) != md5_file(src / key):
            return f"{dst / key}: MD5 differs from the source"
    return check_count(shape, dst)


def check_blob_copy(
    shape: Shape, src: Path, az: Azurite, container: str, prefix: str, hash_sample: bool
) -> str | None:
    """Every blob's size (and the MD5 of a sample when asked) against the local source."""
    from azure.storage.blob import ContainerClient

    with ContainerClient.from_connection_string(az.connection_string, container) as cc:
        found = {b.name[len(prefix) :]: b.size for b in cc.list_blobs(name_starts_with=prefix)}
        want = dict(zip(shape.keys, shape.sizes, strict=True))
        if found != want:
            wrong = sorted(set(found.items()) ^ set(want.items()))[:3]
            return (
                f"{container}/{prefix}: {len(found)} blobs, {sum(found.values()):,} B; "
                f"first differences {wrong}"
            )
        for key in sample_keys(shape) if hash_sample else []:
            data = cc.get_blob_client(prefix + key).download_blob(max_concurrency=8).readall()
            if hashlib.md5(data).hexdigest() != md5_file(src / key):
                return f"{container}/{prefix}{key}: MD5 differs from the source"
    return None


# --------------------------------------------------------------------------------- ceilings
def _obstore(az: Azurite, container: str):
    from obstore.store import AzureStore

    return AzureStore(
        container,
        config={"account_name": ACCOUNT, "account_key": _peers.KEY, "endpoint": az.endpoint},
        client_options={"allow_http": True},
    )


def _ranges(shape: Shape) -> list[tuple[str, int, int]]:
    """Whole small objects; 16 MiB ranges of the large ones."""
    out = []
    for key, size in zip(shape.keys, shape.sizes, strict=True):
        out += [(key, s, min(size, s + CEILING_RANGE)) for s in range(0, size, CEILING_RANGE)]
    return out


async def _read_all(store, prefix: str, ranges: list[tuple[str, int, int]], inflight: int) -> None:
    import obstore

    gate = asyncio.Semaphore(inflight)

    async def one(key: str, start: int, end: int) -> None:
        async with gate:
            await obstore.get_range_async(store, prefix + key, start=start, end=end)

    await asyncio.gather(*(one(*r) for r in ranges))


def request_bound(shape: Shape) -> bool:
    """Objects under 1 MiB on average: the emulator's requests per second bound every tool."""
    return shape.nbytes / shape.files < MiB


def inflight_levels(shape: Shape) -> tuple[int, ...]:
    """Request-bound shapes try only the first level: more in flight never hurts them, and
    each try costs minutes on 20,000 objects."""
    return CEILING_INFLIGHT[:1] if request_bound(shape) else CEILING_INFLIGHT


def read_ceiling_s(shape: Shape, az: Azurite) -> float:
    """Seconds to read the whole dataset to memory, as fast as obstore goes here."""
    store = _obstore(az, SRC_CONTAINER)
    times = []
    for inflight in inflight_levels(shape):
        start = time.perf_counter()
        asyncio.run(_read_all(store, f"{shape.name}/", _ranges(shape), inflight))
        times.append(time.perf_counter() - start)
    return min(times)


async def _write_all(store, shape: Shape, pool: bytes, inflight: int) -> None:
    import obstore

    gate = asyncio.Semaphore(inflight)
    view = memoryview(pool)

    async def one(key: str, size: int) -> None:
        async with gate:
            if size <= CEILING_RANGE:
                await obstore.put_async(store, key, view[:size], use_multipart=False)
            else:
                chunks = [
                    view[: min(CEILING_RANGE, size - s)] for s in range(0, size, CEILING_RANGE)
                ]
                await obstore.put_async(
                    store, key, chunks, chunk_size=CEILING_RANGE, max_concurrency=inflight
                )

    await asyncio.gather(*(one(k, s) for k, s in zip(shape.keys, shape.sizes, strict=True)))


def write_ceiling_s(shape: Shape) -> float:
    """Seconds to write the dataset from memory into a fresh emulator, as fast as obstore goes."""
    pool = os.urandom(CEILING_RANGE)
    times = []
    for inflight in inflight_levels(shape):
        with Azurite() as az:
            az.create_container(DST_CONTAINER)
            store = _obstore(az, DST_CONTAINER)
            start = time.perf_counter()
            asyncio.run(_write_all(store, shape, pool, inflight))
            times.append(time.perf_counter() - start)
    return min(times)


def disk_ceilings(nbytes: int) -> dict[str, float]:
    """O_DIRECT sequential write and read with dd, MB/s: what the local disk allows."""
    path = BENCH / "dd.bin"
    count = max(1, nbytes // (16 * MiB))
    out = {}
    for name, argv in (
        (
            "write",
            [
                "dd",
                "if=/dev/zero",
                f"of={path}",
                "bs=16M",
                f"count={count}",
                "oflag=direct",
                "conv=fsync",
            ],
        ),
        ("read", ["dd", f"if={path}", "of=/dev/null", "bs=16M", "iflag=direct"]),
    ):
        drop_caches()
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        out[name] = count * 16 * MiB / (time.perf_counter() - start) / 1e6
    path.unlink()
    return out


# --------------------------------------------------------------------------------- one shape
def mb_s(shape: Shape, seconds: float) -> float:
    return shape.nbytes / seconds / 1e6


def setup_source(shape: Shape, data: Path, az: Azurite) -> None:
    """Upload the dataset once with stoker (untimed) and check that it all arrived."""
    from stoker.stage import stage

    os.environ["AZURE_STORAGE_CONNECTION_STRING"] = az.connection_string
    az.create_container(SRC_CONTAINER)
    with tempfile.TemporaryDirectory(dir=BENCH) as state:
        summary = stage(
            str(data),
            f"az://{SRC_CONTAINER}/{shape.name}",
            state_dir=Path(state),
            allow_http=True,
        )
    if not summary.ok:
        raise RuntimeError(f"setup upload failed: {summary.failed[:3]}")
    problem = check_blob_copy(shape, data, az, SRC_CONTAINER, f"{shape.name}/", hash_sample=False)
    if problem:
        raise RuntimeError(f"setup upload incomplete: {problem}")


class Recorder:
    """Per-tool lists of runs for one direction of one shape, and the problems found."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.runs: dict[str, list[dict]] = {}
        self.problems: list[str] = []

    def add(self, tool: str, run: Run, problem: str | None, extra: dict | None = None) -> None:
        row = {
            "seconds": run.seconds,
            "sync_s": run.sync_s,
            "rss_mib": run.rss_mib,
            "cpu_s": run.cpu_s,
            "mb_s": mb_s(self.shape, run.total_s),
            **(extra or {}),
        }
        self.runs.setdefault(tool, []).append(row)
        if problem:
            self.problems.append(f"{tool}: {problem}")
        print(
            f"  {self.shape.name} {tool:<14} {row['mb_s']:9.1f} MB/s  "
            f"({run.seconds:.2f} s + sync {run.sync_s:.2f} s, {run.rss_mib:.0f} MiB, "
            f"{run.cpu_s:.1f} s CPU)" + (f"  PROBLEM {problem}" if problem else ""),
            flush=True,
        )

    def ceiling(self, name: str, seconds: float) -> None:
        self.runs.setdefault(name, []).append(
            {"seconds": seconds, "mb_s": mb_s(self.shape, seconds)}
        )
        print(f"  {self.shape.name} {name:<14} {mb_s(self.shape, seconds):9.1f} MB/s", flush=True)

    def result(self) -> dict:
        return {"runs": self.runs, "problems": self.problems}


def stoker_extra(run: Run) -> dict:
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    return {"stage_seconds": summary["seconds"], "bytes_fetched": summary["bytes_fetched"]}


def measure_import(shape: Shape, data: Path, az: Azurite, tools: Tools, reps: int) -> dict:
    rec = Recorder(shape)
    src_az = f"az://{SRC_CONTAINER}/{shape.name}"
    commands = {
        "stoker": lambda dst: tools.stoker(src_az, dst),
        "stoker-no-md5": lambda dst: tools.stoker(src_az, dst, "no-md5"),
        "rclone": lambda dst: tools.rclone(
            f":azureblob:{SRC_CONTAINER}/{shape.name}", dst, upload=False
        ),
        "azcopy": lambda dst: tools.azcopy(
            tools.blob_url(SRC_CONTAINER, shape.name), dst, upload=False
        ),
        "sdk": lambda dst: tools.sdk(f"{shape.name}/", dst),
    }
    if request_bound(shape):  # verification costs nothing measurable there: save the minutes
        del commands["stoker-no-md5"]
    for rep in range(reps):
        rec.ceiling("ceiling", read_ceiling_s(shape, az))
        for tool, command in commands.items():
            dst = fresh_dir(f"import-{tool}")
            drop_caches()
            run = run_tool(*command(str(dst)), _log(shape, f"import-{tool}", rep))
            if tool.startswith("stoker"):
                rec.add(tool, run, check_local_copy(shape, data, dst), stoker_extra(run))
            else:
                rec.add(tool, run, check_count(shape, dst))
            shutil.rmtree(dst)  # one copy on disk at a time: five would fill this disk
    shutil.rmtree(BENCH / "runs", ignore_errors=True)
    return rec.result()


def _export_once(
    shape: Shape, data: Path, peers: Peers, tool: str, rep: int
) -> tuple[Run, str | None, dict]:
    """One export into a fresh emulator and container; the run, what is wrong, stoker's extra."""
    prefix = f"{shape.name}/"
    with Azurite() as az, tempfile.TemporaryDirectory(dir=BENCH) as state:
        az.create_container(DST_CONTAINER)
        tools = Tools(peers, az, Path(state))
        drop_caches()
        if tool == "stoker":
            argv = tools.stoker(str(data), f"az://{DST_CONTAINER}/{shape.name}")
        elif tool == "rclone":
            argv = tools.rclone(str(data), f":azureblob:{DST_CONTAINER}/{shape.name}", upload=True)
        else:
            argv = tools.azcopy(f"{data}/*", tools.blob_url(DST_CONTAINER, shape.name), upload=True)
        run = run_tool(*argv, _log(shape, f"export-{tool}", rep))
        problem = check_blob_copy(shape, data, az, DST_CONTAINER, prefix, tool == "stoker")
        extra = stoker_extra(run) if tool == "stoker" else {}
    return run, problem, extra


def measure_export(shape: Shape, data: Path, peers: Peers, reps: int) -> dict:
    rec = Recorder(shape)
    for rep in range(reps):
        rec.ceiling("ceiling", write_ceiling_s(shape))
        for tool in ("stoker", "rclone", "azcopy"):
            run, problem, extra = _export_once(shape, data, peers, tool, rep)
            rec.add(tool, run, problem, extra)
    return rec.result()


def measure_posix(shape: Shape, data: Path, peers: Peers, reps: int) -> dict:
    rec = Recorder(shape)
    tools = Tools(peers, None, BENCH)  # no emulator: stoker's argv only
    for rep in range(reps):
        dst = fresh_dir("posix-stoker")
        drop_caches()
        run = run_tool(*tools.stoker(str(data), str(dst)), _log(shape, "posix-stoker", rep))
        rec.add("stoker", run, check_local_copy(shape, data, dst))
        shutil.rmtree(dst)
        dst = fresh_dir("posix-cp")
        drop_caches()
        run = run_tool(["cp", "-r", str(data), str(dst)], None, _log(shape, "posix-cp", rep))
        rec.add("cp -r", run, check_count(shape, dst))
        shutil.rmtree(dst)
    shutil.rmtree(BENCH / "runs", ignore_errors=True)
    return rec.result()


def _log(shape: Shape, what: str, rep: int) -> Path:
    return BENCH / "logs" / f"{shape.name}-{what}-{rep}"


# --------------------------------------------------------------------------------- resume
def measure_resume(shape: Shape, data: Path, az: Azurite, tools: Tools) -> dict:
    """Kill -9 a stoker import at ~half the bytes, re-run it, count what the re-run fetched."""
    dst = fresh_dir("resume")
    argv, env = tools.stoker(f"az://{SRC_CONTAINER}/{shape.name}", str(dst))
    drop_caches()
    first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    polled = _wait_for_bytes(first, dst, int(shape.nbytes * RESUME_KILL_AT))
    first.send_signal(signal.SIGKILL)
    first.wait()
    on_disk = allocated_bytes(dst)
    second = run_tool(argv, env, _log(shape, "resume-second", 0))
    summary = json.loads(second.stdout.strip().splitlines()[-1])
    needed = shape.nbytes - on_disk  # what the first run had not written yet
    resent = max(0, summary["bytes_fetched"] - needed)
    result = {
        "killed_at_bytes": polled,
        "on_disk_after_kill": on_disk,
        "second_fetched": summary["bytes_fetched"],
        "second_bytes_copied": summary["bytes_copied"],
        "second_files_skipped": summary["files_skipped"],
        "resent_bytes": resent,
        "resent_fraction": resent / shape.nbytes,
        "problem": check_local_copy(shape, data, dst),
    }
    print(f"  resume: {json.dumps(result)}", flush=True)
    shutil.rmtree(dst, ignore_errors=True)
    return result


def _wait_for_bytes(proc: subprocess.Popen, root: Path, threshold: int) -> int:
    while proc.poll() is None:
        now = allocated_bytes(root)
        if now >= threshold:
            return now
        time.sleep(0.02)
    raise RuntimeError("the import finished before it could be killed half way")


# --------------------------------------------------------------------------------- listing
LISTING = r"""
import json, sys, tempfile, time
from pathlib import Path
from stoker.stage._manifest import Manifest
from stoker.store import ObjectInfo
n, batch = int(sys.argv[1]), int(sys.argv[2])
with tempfile.TemporaryDirectory() as tmp:
    m = Manifest(Path(tmp) / "stage.sqlite")
    run = m.start_run()
    files = pending = 0
    record_s = done_s = 0.0
    for first in range(0, n, batch):
        t = time.perf_counter()
        listed = m.record_listing([ObjectInfo(f"shard-{i // 10000:04d}/sample-{i:08d}.jpg",
                                              100_000 + i % 997, f"0x8DC{i:012X}", None)
                                   for i in range(first, min(n, first + batch))], run)
        record_s += time.perf_counter() - t
        files += len(listed.pending) + listed.done_files
        pending += len(listed.pending)
        t = time.perf_counter()
        for key, *_ in listed.pending:
            m.object_done(key, None)
        done_s += time.perf_counter() - t
    m.close()
print(json.dumps({"files": files, "pending": pending, "record_s": record_s, "done_s": done_s}))
"""


def measure_listing(keys: int) -> dict:
    """Peak RSS and times of a listing of ``keys`` keys streamed into the manifest."""
    run = run_tool(
        [sys.executable, "-c", LISTING, str(keys), str(LISTING_BATCH)],
        None,
        BENCH / "logs" / "listing",
    )
    floor = run_tool(
        [sys.executable, "-c", "import stoker.stage, stoker.store._azure, obstore"],
        None,
        BENCH / "logs" / "import-floor",
    )
    result = {
        "keys": keys,
        "rss_mib": run.rss_mib,
        "import_rss_mib": floor.rss_mib,
        "import_s": floor.seconds,
        **json.loads(run.stdout),
    }
    print(f"  listing: {json.dumps(result)}", flush=True)
    return result


SYNC_FILES, SYNC_NEW = 2000, 200  # the issue's unchanged tree, and what a wider --include adds


def measure_sync() -> list[dict]:
    """``stoker stage`` run again over a 2,000-file tree that is already at the destination
    (the real CLI, a process per run, as a user runs it): with its manifest, without it (a
    tree another tool copied, or a lost manifest), and with one more ``--include`` pattern,
    which should move only the new files. Local to local, and local to Blob (Azurite)."""
    root = BENCH / "sync"
    shutil.rmtree(root, ignore_errors=True)
    src = root / "src"
    rng = random.Random(20261202)
    for i in range(SYNC_FILES + SYNC_NEW):
        folder = src / ("new" if i >= SYNC_FILES else f"d{i % 20:02d}")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:05d}.bin").write_bytes(rng.randbytes(rng.randint(1 << 10, 64 << 10)))
    old = time.time() - 60  # written a minute ago (Blob's times are whole seconds)
    for path in src.rglob("*.bin"):
        os.utime(path, (old, old))
    new_bytes = sum(p.stat().st_size for p in (src / "new").iterdir())
    stoker = str(Path(sys.executable).parent / "stoker")
    rows = []

    def run(*args: str, env: dict[str, str]) -> dict:
        import resource

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(
            [stoker, "stage", str(src), *args, "--json"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        seconds = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        summary = json.loads(done.stdout.splitlines()[-1])
        return {
            "s": seconds,
            "cpu_s": cpu,
            "bytes": summary["bytes_copied"],
            "files": summary["files_copied"],
        }

    with Azurite() as az:
        az.create_container("sync")
        env = {
            **os.environ,
            "AZURE_STORAGE_CONNECTION_STRING": az.connection_string,
            "XDG_CACHE_HOME": str(root / "cache"),
        }
        for name, dst, state in (
            ("local -> local", str(root / "dst"), root / "dst" / ".stoker"),
            ("local -> Blob", f"{az.endpoint}/sync/tree", root / "cache" / "stoker"),
        ):
            old_only = ["--include", "d*"]
            first = run(dst, *old_only, env=env)
            again = run(dst, *old_only, env=env)
            shutil.rmtree(state)
            lost = run(dst, *old_only, env=env)
            wider = run(dst, *old_only, "--include", "new/*", env=env)
            rows.append(
                {
                    "path": name,
                    "first": first,
                    "again": again,
                    "no_manifest": lost,
                    "wider": wider,
                    "new_bytes": new_bytes,
                }
            )
            print(f"  sync: {json.dumps(rows[-1])}", flush=True)
    shutil.rmtree(root, ignore_errors=True)
    return rows


def sync_text(rows: list[dict]) -> str:
    """The ``## stage sync:`` section: the rows as a table (target: < 2 s and 0 bytes moved
    unchanged; the new files only with one more pattern)."""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    out = (
        "## stage sync: an unchanged 2,000-file tree again (target < 2 s, 0 bytes moved)\n\n"
        f"`python bench/stage_bench.py --sync`, measured {when} on {os.cpu_count()} CPUs "
        f"(load average {load:.1f} at the end). Each figure is one `stoker stage ... --json` "
        "process, start-up included. The tree: 2,000 files of 1-64 KiB in 20 folders (65 MB) "
        f"taken by `--include 'd*'`, and {SYNC_NEW} more in `new/` that the last run's second "
        "`--include 'new/*'` adds. Without its manifest the run compares what it lists with "
        "what the destination already has (size, and a copy newer than its source). CPU is "
        "stoker's process alone (user + system), what a busy machine does not change; to Blob "
        "the emulator's listing and writes (another process) come on top.\n\n"
    )
    out += (
        f"| path | first copy ({SYNC_FILES:,} files) | again, unchanged | again, manifest "
        f"removed | one more --include ({SYNC_NEW} new files) | target |\n"
        "|---|---:|---:|---:|---:|---|\n"
    )
    for r in rows:

        def cell(m: dict) -> str:
            return f"{m['s']:.2f} s ({m['cpu_s']:.2f} s CPU), {m['bytes'] / 1e6:.1f} MB"

        ok = (
            r["again"]["s"] < 2
            and r["again"]["bytes"] == 0
            and r["no_manifest"]["s"] < 2
            and r["no_manifest"]["bytes"] == 0
            and r["wider"]["bytes"] == r["new_bytes"]
        )
        out += (
            f"| {r['path']} | {cell(r['first'])} | {cell(r['again'])} | "
            f"{cell(r['no_manifest'])} | {cell(r['wider'])} ({r['wider']['files']} files) | "
            f"{_yes(ok)} |\n"
        )
    return out + "\n"


# --------------------------------------------------------------------------------- report
def median_mb_s(runs: dict, tool: str) -> float:
    return statistics.median(r["mb_s"] for r in runs[tool])


def median_of(runs: dict, tool: str, field: str) -> float:
    return statistics.median(r[field] for r in runs[tool])


def copy_target(peer: float, ceiling: float, large: bool) -> tuple[float, str]:
    """The issue's bar: 1.2x the faster peer, or 0.9x the ceiling where 1.2x would pass it;
    on the large-file shape never below 0.9x the ceiling."""
    if TARGET_PEER * peer <= ceiling:
        bar, why = TARGET_PEER * peer, f"{TARGET_PEER}x peer"
    else:
        bar, why = TARGET_CEILING * ceiling, f"{TARGET_CEILING}x ceiling"
    if large and TARGET_CEILING * ceiling > bar:
        bar, why = TARGET_CEILING * ceiling, f"{TARGET_CEILING}x ceiling"
    return bar, why


def _f(mb: float) -> str:
    return f"{mb:,.0f}" if mb >= 20 else f"{mb:.1f}"


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


NAMES = {
    "rclone": "rclone",
    "azcopy": "AzCopy",
    "sdk": "plain SDK",
    "stoker": "stoker",
    "stoker-no-md5": "stoker, no MD5",
    "cp -r": "`cp -r`",
}


def ceiling_mb_s(runs: dict) -> float:
    return max(r["mb_s"] for r in runs["ceiling"])  # a ceiling: the best run


def copy_row(sh: dict, direction: str, peers: tuple[str, ...], misses: list[str]) -> str:
    runs = sh[direction]["runs"]
    ceiling, ours = ceiling_mb_s(runs), median_mb_s(runs, "stoker")
    best = max(("rclone", "azcopy"), key=lambda t: median_mb_s(runs, t))
    peer = median_mb_s(runs, best)
    bar, why = copy_target(peer, ceiling, sh["large"])
    bare = median_of(runs, best, "seconds") / median_of(runs, "stoker", "seconds")
    cells = [_f(median_mb_s(runs, p)) if p in runs else "-" for p in peers]
    if ours < bar:
        misses.append(
            f"{direction}, {sh['label']}: stoker {_f(ours)} MB/s, target {_f(bar)} ({why}); "
            f"{NAMES[best]} {_f(peer)}, ceiling {_f(ceiling)}"
        )
    return (
        f"| {sh['label']} | {len(runs['stoker'])} | {_f(ceiling)} | {_f(ours)} | "
        + " | ".join(cells)
        + f" | {ours / peer:.2f}x ({NAMES[best]}) | {bare:.2f}x | {ours / ceiling:.2f}x"
        f" | {_f(bar)} ({why}) | {_yes(ours >= bar)} |"
    )


def having(shapes: list[dict], *parts: str) -> list[dict]:
    """The shapes whose saved results hold every one of ``parts`` (a fresh checkout may have
    run only some of them with ``--parts``)."""
    return [sh for sh in shapes if all(part in sh for part in parts)]


def not_measured(part: str) -> str:
    return f"Not measured in this mode yet (add `--parts {part}`).\n"


def copy_table(
    shapes: list[dict], direction: str, peers: tuple[str, ...], misses: list[str]
) -> str:
    shapes = having(shapes, direction)
    if not shapes:
        return not_measured(direction)
    head = (
        "| shape | runs | ceiling | stoker | "
        + " | ".join(NAMES[p] for p in peers)
        + " | stoker / faster of AzCopy, rclone | same, process time only | stoker / ceiling"
        " | target | met |\n|---|" + "---:|" * (len(peers) + 7) + "---|\n"
    )
    return head + "\n".join(copy_row(sh, direction, peers, misses) for sh in shapes) + "\n"


def posix_table(shapes: list[dict], disk: dict, misses: list[str]) -> str:
    shapes = having(shapes, "posix")
    if not shapes:
        return not_measured("posix")
    out = (
        "| shape | runs | stoker | `cp -r` | stoker / `cp -r` | same, process time only"
        " | met |\n|---|---:|---:|---:|---:|---:|---|\n"
    )
    for sh in shapes:
        runs, label = sh["posix"]["runs"], sh["posix"].get("label", sh["label"])
        ours, cp = median_mb_s(runs, "stoker"), median_mb_s(runs, "cp -r")
        bare = median_of(runs, "cp -r", "seconds") / median_of(runs, "stoker", "seconds")
        out += (
            f"| {label} | {len(runs['stoker'])} | {_f(ours)} | {_f(cp)} | "
            f"{ours / cp:.2f}x | {bare:.2f}x | {_yes(ours >= cp)} |\n"
        )
        if ours < cp:
            misses.append(
                f"POSIX -> POSIX, {label}: stoker {_f(ours)} MB/s, `cp -r` + `sync` {_f(cp)} MB/s"
            )
    return out + (
        f"\nThe disk here (dd, O_DIRECT, 16 MiB blocks): write {_f(disk['write'])} MB/s, "
        f"read {_f(disk['read'])} MB/s.\n"
    )


def resources_table(shapes: list[dict]) -> str:
    """Median CPU seconds and peak memory of each tool: on 2 cores the emulator needs one."""
    out = "| shape | direction | " + " | ".join(
        NAMES[t] for t in ("stoker", "rclone", "azcopy", "sdk", "cp -r")
    )
    out += " |\n|---|---|" + "---:|" * 5 + "\n"
    for sh in shapes:
        for direction in (d for d in PARTS if d in sh):
            runs = sh[direction]["runs"]
            cells = [
                f"{median_of(runs, t, 'cpu_s'):.1f} s, {max(r['rss_mib'] for r in runs[t]):.0f} MiB"
                if t in runs
                else "-"
                for t in ("stoker", "rclone", "azcopy", "sdk", "cp -r")
            ]
            label = sh[direction].get("label", sh["label"])
            out += f"| {label} | {direction} | " + " | ".join(cells) + " |\n"
    return out


def resume_text(shapes: list[dict], misses: list[str]) -> str:
    sh = next((s for s in shapes if "resume" in s), None)
    if sh is None:
        return "Not run (it needs shape A).\n"
    r = sh["resume"]
    ok = r["resent_fraction"] < TARGET_RESEND and not r["problem"]
    if not ok:
        misses.append(
            f"resume: re-sent {r['resent_fraction']:.1%} of the dataset "
            f"(target < {TARGET_RESEND:.0%})"
        )
    checked = "sizes and MD5s match the source" if not r["problem"] else r["problem"]
    return (
        f"Import of {sh['label']}, `kill -9` once {r['killed_at_bytes'] / 1e6:,.0f} MB were on "
        f"disk ({r['killed_at_bytes'] / sh['bytes']:.0%}; counted as allocated blocks, since "
        f"partial files are sparse); {r['on_disk_after_kill'] / 1e6:,.0f} MB once it had died. "
        f"The re-run fetched {r['second_fetched'] / 1e6:,.0f} MB (counted at `read_chunks`), of "
        f"which {r['resent_bytes'] / 1e6:,.0f} MB had been on disk already: **re-sent "
        f"{r['resent_fraction']:.1%} of the dataset** (target < {TARGET_RESEND:.0%}: "
        f"{_yes(ok)}). After the re-run: {checked}. {_bytes_copied_note(r)}\n"
    )


def _bytes_copied_note(r: dict) -> str:
    said, fetched = r["second_bytes_copied"], r["second_fetched"]
    if said == fetched:
        return "The re-run's summary (`bytes_copied`) says the same."
    return (
        f"The re-run's summary says `bytes_copied` = {said / 1e6:,.0f} MB, not the "
        f"{fetched / 1e6:,.0f} MB it fetched."
    )


def listing_text(info: dict, misses: list[str]) -> str:
    r = info["listing"]
    ok = r["rss_mib"] * MiB / 1e6 < TARGET_RSS_MB
    if not ok:
        misses.append(f"1M listing: peak RSS {r['rss_mib']:.0f} MiB (target < {TARGET_RSS_MB} MB)")
    return (
        "| keys | peak RSS | the imports alone | record the listing and pick what to copy, "
        "batches of 5,000 | mark each done, a commit per 512 | target < 300 MB |\n"
        "|---:|---:|---:|---:|---:|---|\n"
        f"| {r['keys']:,} | {r['rss_mib']:.0f} MiB | {r['import_rss_mib']:.0f} MiB | "
        f"{r['record_s']:.1f} s | {r['done_s']:.1f} s | {_yes(ok)} |\n"
    )


def emulator_note(shapes: list[dict]) -> str:
    bound = [sh for sh in having(shapes, "import", "export") if sh["bytes"] / sh["files"] < MiB]
    if not bound:
        return ""
    sh = max(bound, key=lambda s: s["files"])
    read = ceiling_mb_s(sh["import"]["runs"])
    write = ceiling_mb_s(sh["export"]["runs"])
    per_s = sh["files"] / (sh["bytes"] / 1e6)
    return (
        f"On {sh['label']} the emulator caps every tool: the fastest read "
        f"of it to memory reaches {_f(read)} MB/s (about {read * per_s:,.0f} GETs/s) and the "
        f"fastest write {_f(write)} MB/s (about {write * per_s:,.0f} PUTs/s), because Azurite's "
        "cost per request grows with the blobs it holds, and its one busy core competes with the "
        "client for the machine's two. There the figure that counts is stoker / ceiling.\n"
        + (
            ""
            if sh["files"] >= ISSUE_C_OBJECTS or sh["shape"] != "C"
            else f"\nShape C has {sh['files']:,} objects here, not the issue's "
            f"{ISSUE_C_OBJECTS:,}: at {ISSUE_C_OBJECTS:,} blobs Azurite spends ~26 ms of its core "
            "per GET (~2.5 ms at 2,000), and one import took 527 s with stoker and 520 s with "
            "rclone on the same emulator (0.99x; measured 2026-11-30, one run each), so the full "
            "size measures only the emulator and would take hours per run of the table.\n"
        )
    )


def disk_note(shapes: list[dict], disk: dict) -> str:
    """Import targets above what the disk can write: no tool reaches them here."""
    lines = []
    for sh in having(shapes, "import"):
        runs = sh["import"]["runs"]
        peer = max(median_mb_s(runs, p) for p in ("rclone", "azcopy"))
        bar, why = copy_target(peer, ceiling_mb_s(runs), sh["shape"] == "A")
        if bar > disk["write"]:
            ours = median_mb_s(runs, "stoker")
            lines.append(
                f"Import of {sh['label']}: the target ({why}, {_f(bar)} MB/s) is above what this "
                f"disk writes ({_f(disk['write'])} MB/s, dd O_DIRECT), so no tool can reach it "
                f"here; stoker imports at {ours / disk['write']:.2f}x the disk's write rate "
                f"(with each file made durable), the faster peer at {peer / disk['write']:.2f}x.\n"
            )
    return "".join(lines)


def quiet_note(shapes: list[dict]) -> str:
    """Whether the machine was left to the benchmark: other work skews every figure."""
    shares = {sh["shape"]: sh.get("cpu_elsewhere") for sh in shapes}
    if any(v is None for v in shares.values()):
        return ""
    worst = max(shares.values())
    text = ", ".join(f"{k} {v:.0%}" for k, v in shares.items())
    if worst < 0.05:
        return f"Other processes used little of the CPU meanwhile ({text}).\n"
    return (
        f"**Other processes used {text} of the machine's CPU while these shapes ran**: the "
        "figures are skewed; run again on a quiet machine.\n"
    )


def stoker_overhead(shapes: list[dict]) -> str:
    parts = []
    for sh in having(shapes, "import"):
        runs = sh["import"]["runs"]["stoker"]
        lag = statistics.median(r["seconds"] - r["stage_seconds"] for r in runs)
        parts.append(f"{sh['shape']} {lag:.2f} s")
    return ", ".join(parts) or "not measured (no import)"


def markdown(mode: str, info: dict, shapes: list[dict]) -> str:
    misses: list[str] = []
    quick = " --quick" if mode == "quick" else ""
    v = info["versions"]
    imports = copy_table(shapes, "import", ("stoker-no-md5", "rclone", "azcopy", "sdk"), misses)
    exports = copy_table(shapes, "export", ("rclone", "azcopy"), misses)
    posix = posix_table(shapes, info["disk"], misses)
    resume = resume_text(shapes, misses)
    listing = listing_text(info, misses)
    shown = "; ".join(
        f"{sh['shape']}) {sh['label']}, measured {sh['when']}"
        + "".join(f" ({part} again {when})" for part, when in sh.get("parts_rerun", {}).items())
        for sh in shapes
    )
    missing = sorted(set("ABC") - {sh["shape"] for sh in shapes})
    if missing:
        shown += (
            f". **Not measured in this mode yet: {', '.join(missing)}** (add "
            f"`--shapes {','.join(missing)}`)"
        )
    caches = (
        "after dropping the page cache"
        if info["drop_caches"]
        else "**without dropping the page cache** (not allowed here)"
    )
    notes = "".join(f"- {n}\n" for n in info["notes"])
    problems = "".join(
        f"- {sh['shape']} {d}: {p}\n"
        for sh in shapes
        for d in PARTS
        for p in sh.get(d, {}).get("problems", [])
    )
    missed = "".join(f"- {m}\n" for m in misses) or "- none\n"
    return f"""## stage: Blob <-> local copies against AzCopy and rclone (target 1.2x the faster)

Reproduce: `.venv/bin/python bench/stage_bench.py{quick} --write BENCHMARKS.md` (peers install
into `.bench/` on the first run). Machine: {info["nproc"]} cores, {info["ram_gib"]:.0f} GiB RAM,
Python {info["python"]}; {v["rclone"]}, {v["azcopy"]}, azure-storage-blob
{v["azure-storage-blob"]}, Azurite {v["azurite"]} in memory. Shapes: {shown}.

How: MB/s are medians of the runs counted in each row. Every run copies into an empty
destination {caches}; its time is the tool's process from start to exit plus a `sync` after it
(stoker makes every file durable before naming it; the others leave that to the `sync`). "Process time only"
compares the processes without the `sync`. Ceiling: the best run of obstore reading the whole
dataset to memory from the same emulator ({" or ".join(map(str, CEILING_INFLIGHT))} requests in
flight, whole small objects, {CEILING_RANGE >> 20} MiB ranges of large ones), or, for export,
writing it from memory into a fresh emulator. Each dataset gets a fresh emulator (loaded once by
stoker, untimed), and each export run a fresh emulator of its own. Settings: stoker's defaults
(32 requests in flight, 8 MiB blocks, MD5 checked on import and computed on export; "no MD5" is
`hash_files=False`); rclone `--transfers {PEER_STREAMS} --checkers {PEER_STREAMS}`, with
`--multi-thread-streams {PEER_STREAMS}` on import and `--azureblob-upload-concurrency
{PEER_STREAMS} --azureblob-chunk-size 8M` on export; AzCopy's defaults, with `--put-md5` on
export; the plain SDK downloads with {PEER_STREAMS} threads. Every stoker copy is checked (every
file's size, the MD5 of a sample); every peer's copy is counted (files and bytes).

Every source blob carries a Content-MD5 (the emulator computes it for one Put Blob; for a
block upload stoker hashes the file as it sends it and sets the Content-MD5 once the blob is
committed), so every tool can check what it imports; "stoker, no MD5" shows what the check
costs stoker.

### Blob -> local disk (import), MB/s

{imports}
### Local disk -> Blob (export), MB/s

{exports}
### POSIX -> POSIX, MB/s

{posix}
### CPU seconds and peak memory per run (medians; peak of the runs)

{resources_table(shapes)}
### Resume after `kill -9`

{resume}
### A listing of 1,000,000 keys

The manifest (`stoker.stage._manifest.Manifest`, in a process of its own) fed the way the
listing stream feeds it, each batch's objects to copy then marked done the way the engine does:

{listing}
### Where stoker misses a target

{missed}
{emulator_note(shapes)}
{disk_note(shapes, info["disk"])}
{quiet_note(shapes)}
Before `stage()` starts, stoker's process spends (interpreter and imports, from compiled
bytecode as an installed package has it; inside every stoker figure above):
{stoker_overhead(shapes)}.
{notes}{("Problems found by the checks:" + chr(10) + problems) if problems else ""}"""


# --------------------------------------------------------------------------------- driver
PARTS = ("import", "export", "posix")


def measure_shape(
    shape: Shape, mode: str, peers: Peers, reps: int, parts: tuple[str, ...], saved: dict | None
) -> dict:
    """The shape's figures; with only some ``parts``, the others are kept from ``saved``."""
    print(f"shape {shape.name}: {shape.label}, {shape.nbytes / 1e9:.2f} GB", flush=True)
    start_cpu = cpu_mark()
    data = ensure_dataset(shape, mode)
    now = datetime.now(UTC).isoformat(timespec="minutes")
    result: dict = {
        "shape": shape.name,
        "label": shape.label,
        "files": shape.files,
        "bytes": shape.nbytes,
        "large": shape.large,
        "reps": reps,
        "when": now,
        "load_before": os.getloadavg()[0],
    }
    if saved and set(parts) != set(PARTS):
        rerun = saved.get("parts_rerun", {}) | {part: now for part in parts}
        result = saved | {"parts_rerun": rerun}
    if "import" in parts:
        with Azurite() as az, tempfile.TemporaryDirectory(dir=BENCH) as state:
            setup_source(shape, data, az)
            tools = Tools(peers, az, Path(state))
            result["import"] = measure_import(shape, data, az, tools, reps)
            if shape.large:
                result["resume"] = measure_resume(shape, data, az, tools)
            result["azurite_rss_mib"] = az.rss_mib()
    if "export" in parts:
        result["export"] = measure_export(shape, data, peers, reps)
    if "posix" in parts:
        on_disk = posix_shape(shape, mode == "quick")
        result["posix"] = measure_posix(on_disk, ensure_dataset(on_disk, mode), peers, reps)
        result["posix"]["label"] = on_disk.label
    result["cpu_elsewhere"] = others_cpu_share(start_cpu)
    return result


def machine(peers: Peers, quick: bool) -> dict:
    mem = Path("/proc/meminfo").read_text().split()[1]
    return {
        "nproc": os.cpu_count(),
        "ram_gib": int(mem) / (1 << 20),
        "drop_caches": drop_caches(),
        "disk": disk_ceilings(256 * MiB if quick else GiB),
        "python": sys.version.split()[0],
        "versions": peers.versions,
        "notes": peers.notes,
    }


def results_dir(mode: str) -> Path:
    path = BENCH / "results" / mode
    path.mkdir(parents=True, exist_ok=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller datasets, 2 runs each")
    parser.add_argument("--shapes", default="A,B,C", help="which shapes to run (A,B,C)")
    parser.add_argument("--reps", type=int, help="runs per figure (default 3, 2 with --quick)")
    parser.add_argument(
        "--bound-reps",
        type=int,
        help="runs per figure on request-bound shapes (C) (default: as --reps)",
    )
    parser.add_argument(
        "--c-objects",
        type=int,
        help=f"objects in shape C (default {C_OBJECTS:,}; the issue names "
        f"{ISSUE_C_OBJECTS:,}, where the emulator slows down: see ISSUE_C_OBJECTS)",
    )
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="which copies to run (import,export,posix); the others keep their saved figures",
    )
    parser.add_argument("--write", type=Path, help="replace the '## stage:' section of this file")
    parser.add_argument(
        "--render", action="store_true", help="only write the section from the saved results"
    )
    parser.add_argument(
        "--sync", action="store_true", help="only measure re-runs over an unchanged tree"
    )
    args = parser.parse_args()
    if args.sync:
        section = sync_text(measure_sync())
        if args.write:
            replace_section(args.write, section)
        print(section)
        return
    mode, reps = ("quick", args.reps or 2) if args.quick else ("full", args.reps or 3)
    out = results_dir(mode)
    if args.render:
        section = markdown(mode, json.loads((out / "machine.json").read_text()), _saved_shapes(out))
        if args.write:
            replace_section(args.write, section)
        print(section)
        return
    bound_reps = args.bound_reps or reps
    peers = _peers.install()
    # stoker's own bytecode, as an installed package has it: with PYTHONDONTWRITEBYTECODE set
    # (as on the machines here), an editable install would compile every module in every run.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(_peers.ROOT / "src")], check=True)
    info = machine(peers, args.quick)
    info["listing"] = measure_listing(LISTING_KEYS)
    (out / "machine.json").write_text(json.dumps(info, indent=1))
    for shape in shapes(args.quick, args.c_objects):
        if shape.name in args.shapes.split(","):
            saved_path = out / f"{shape.name}.json"
            saved = json.loads(saved_path.read_text()) if saved_path.exists() else None
            parts = tuple(args.parts.split(","))
            n = bound_reps if request_bound(shape) else reps
            result = measure_shape(shape, mode, peers, n, parts, saved)
            saved_path.write_text(json.dumps(result, indent=1))
    section = markdown(mode, info, _saved_shapes(out))
    if args.write:
        replace_section(args.write, section)
    print(section)


def _saved_shapes(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("[A-Z].json"))]


if __name__ == "__main__":
    main()
