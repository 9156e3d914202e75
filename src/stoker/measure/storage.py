"""``bench_storage``: sequential and random read and write throughput and IOPS of a folder.

Method, as fio would run it: one test file of ``size`` bytes; ``jobs`` threads, each on its
own contiguous region (sequential) or at random aligned offsets (random), ``block`` bytes per
request, through O_DIRECT where the file system allows it (else buffered, and said so). Before
a cold read the file's pages are dropped from the page cache (``posix_fadvise(DONTNEED)``); a
warm read follows a read that loaded them. Writes are fsynced before the clock stops. Threads
suffice: os.pread/os.pwrite release the GIL, so requests run in parallel in the kernel.
"""

from __future__ import annotations

import mmap
import os
import random
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import StokerError

ALIGN = 4096


@dataclass
class StorageResult:
    test: str  # seq-read, seq-write, rand-read, rand-write
    block: int
    jobs: int
    direct: bool
    cache: str  # "cold", "warm" or "-" for writes
    bytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6

    @property
    def iops(self) -> float:
        return self.bytes / self.block / self.seconds

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"mb_per_s": self.mb_per_s, "iops": self.iops}


def _open(path: Path, write: bool, direct: bool) -> tuple[int, bool]:
    flags = (os.O_RDWR | os.O_CREAT) if write else os.O_RDONLY
    if direct and hasattr(os, "O_DIRECT"):
        try:
            return os.open(path, flags | os.O_DIRECT, 0o644), True
        except OSError:  # tmpfs, some FUSE and network file systems
            pass
    return os.open(path, flags, 0o644), False


def evict(path: Path) -> None:
    """Drop the file's pages from the page cache, so the next read comes from the device."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _run(
    path: Path,
    *,
    write: bool,
    sequential: bool,
    block: int,
    jobs: int,
    size: int,
    direct: bool,
    seed: int = 0,
) -> tuple[int, float, bool]:
    """(bytes moved, seconds, whether O_DIRECT was used)."""
    fd, used_direct = _open(path, write, direct)
    per_job = size // jobs // block * block
    errors: list[BaseException] = []
    start_gate = threading.Barrier(jobs + 1)

    def job(j: int) -> None:
        buf = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT needs
        if write:
            buf.write(os.urandom(min(block, 1 << 20)) * (block // min(block, 1 << 20)))
        rng = random.Random(seed + j)
        base = j * per_job
        start_gate.wait()
        try:
            for k in range(per_job // block):
                offset = base + k * block if sequential else rng.randrange(size // block) * block
                if write:
                    os.pwrite(fd, buf, offset)
                else:
                    os.preadv(fd, [buf], offset)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(j,)) for j in range(jobs)]
    for t in threads:
        t.start()
    start_gate.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    if write:
        os.fsync(fd)
    seconds = time.perf_counter() - began
    os.close(fd)
    if errors:
        raise StokerError(f"{path}: {errors[0]}") from errors[0]
    return per_job * jobs, seconds, used_direct


def bench_storage(
    target: str | os.PathLike[str],
    *,
    size: int = 1 << 30,
    blocks: tuple[int, ...] = (1 << 20, 4096),
    jobs: tuple[int, ...] = (1, 4),
    direct: bool = True,
    tests: tuple[str, ...] = ("seq-write", "seq-read", "rand-read", "rand-write"),
    keep: bool = False,
) -> list[StorageResult]:
    """Measure a folder; returns one result per test, block size and job count."""
    folder = Path(target)
    if not folder.is_dir():
        raise StokerError(f"{folder} is not a folder: give the mount point or folder to measure")
    if any(b % ALIGN for b in blocks):
        raise StokerError(f"block sizes must be multiples of {ALIGN} bytes (O_DIRECT): {blocks}")
    path = folder / f".stoker-bench-{os.getpid()}"
    results: list[StorageResult] = []
    try:
        fill(path, size)
        for test, block, n, cache in _cases(tests, blocks, jobs):
            results.append(measure(path, test, block=block, jobs=n, cache=cache, direct=direct))
    finally:
        if not keep:
            path.unlink(missing_ok=True)
    return results


def measure(
    path: Path, test: str, *, block: int, jobs: int, cache: str = "cold", direct: bool = True
) -> StorageResult:
    """One test on an existing file: ``test`` is seq-read, seq-write, rand-read or rand-write;
    ``cache`` is "cold" (pages dropped first), "warm" (pages loaded first) or "-" (writes)."""
    write, sequential = test.endswith("write"), test.startswith("seq")
    size = path.stat().st_size
    if cache == "cold":
        evict(path)
    elif cache == "warm":  # load the pages first (buffered), then measure through them
        _run(path, write=False, sequential=True, block=1 << 20, jobs=1, size=size, direct=False)
    moved, seconds, used = _run(
        path,
        write=write,
        sequential=sequential,
        block=block,
        jobs=jobs,
        size=size,
        direct=direct and cache != "warm",
    )
    return StorageResult(test, block, jobs, used, cache, moved, seconds)


def fill(path: Path, size: int) -> None:
    """The test file, written once with incompressible bytes and fsynced."""
    chunk = os.urandom(8 << 20)
    with open(path, "wb") as f:
        for offset in range(0, size, len(chunk)):
            f.write(chunk[: min(len(chunk), size - offset)])
        f.flush()
        os.fsync(f.fileno())


def _cases(
    tests: tuple[str, ...], blocks: tuple[int, ...], jobs: tuple[int, ...]
) -> list[tuple[str, int, int, str]]:
    """Sequential tests with large requests, random ones with small ones (as fio's presets);
    reads cold and warm."""
    cases = []
    for test in tests:
        sequential = test.startswith("seq")
        for block in blocks:
            if (block >= 64 << 10) != sequential:
                continue
            for n in jobs:
                for cache in ("-",) if test.endswith("write") else ("cold", "warm"):
                    cases.append((test, block, n, cache))
    return cases
