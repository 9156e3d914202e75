"""``bench_storage``: sequential and random read and write throughput and IOPS of a folder.

Method, as fio would run it: one test file of ``size`` bytes; ``jobs`` threads, each on its
own contiguous region (sequential) or at random aligned offsets (random), ``block`` bytes per
request, through O_DIRECT where the file system allows it (else buffered, and said so). Before
a cold read the file's pages are dropped from the page cache (``posix_fadvise(DONTNEED)``); a
warm read follows a read that loaded them. Writes are fsynced before the clock stops. Threads
suffice: os.pread/os.pwrite release the GIL, so requests run in parallel in the kernel.

Requests of 64 KiB and more run the sequential tests, smaller ones the random tests (fio's
presets); ``skipped()`` says which tests a choice of blocks leaves out. The test file is removed
on any error, on Ctrl-C and on SIGTERM.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import random
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import StokerError

ALIGN = 4096
SEQUENTIAL_MIN = 64 << 10  # requests this large run the sequential tests, smaller the random
TESTS = ("seq-write", "seq-read", "rand-read", "rand-write")
FREE_MARGIN = 0.9  # the test file may take this share of the free space, no more


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
        evict_fd(fd)
    finally:
        os.close(fd)


def evict_fd(fd: int) -> None:
    """``evict`` of an open file. Written back first (only clean pages leave), then dropped
    from each CPU in turn: Linux moves only the calling CPU's batch of new pages onto the LRU
    lists before it drops a file's pages, so pages another CPU had just written stayed
    cached (a cold read that was partly warm, now and then)."""
    os.fsync(fd)
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_setaffinity") else set()
    try:
        for cpu in sorted(cpus):
            os.sched_setaffinity(0, {cpu})  # (this thread only)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        if cpus:
            os.sched_setaffinity(0, cpus)
    if not cpus:  # (no affinity to set: this CPU's part only)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


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
        try:
            buf = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT needs
            if write:
                buf.write(os.urandom(min(block, 1 << 20)) * (block // min(block, 1 << 20)))
            rng = random.Random(seed + j)
            base = j * per_job
            start_gate.wait()
            for k in range(per_job // block):
                offset = base + k * block if sequential else rng.randrange(size // block) * block
                if write:
                    os.pwrite(fd, buf, offset)
                else:
                    os.preadv(fd, [buf], offset)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)
            start_gate.abort()  # a job that fails must never leave the others at the gate

    # Daemon threads: a SIGTERM or Ctrl-C must not wait for a long test to finish.
    threads = [threading.Thread(target=job, args=(j,), daemon=True) for j in range(jobs)]
    try:
        for t in threads:
            t.start()
        with contextlib.suppress(threading.BrokenBarrierError):  # a job failed: see errors
            start_gate.wait()
        began = time.perf_counter()
        for t in threads:
            t.join()
        if write and not errors:
            os.fsync(fd)
        seconds = time.perf_counter() - began
    finally:
        os.close(fd)
    if errors:
        if isinstance(errors[0], OSError):
            raise errors[0]  # the caller names the folder (a full disk, a read-only one)
        raise StokerError(f"{path}: {errors[0]}") from errors[0]
    return per_job * jobs, seconds, used_direct


def bench_storage(
    target: str | os.PathLike[str],
    *,
    size: int = 1 << 30,
    blocks: tuple[int, ...] = (1 << 20, 4096),
    jobs: tuple[int, ...] = (1, 4),
    direct: bool = True,
    tests: tuple[str, ...] = TESTS,
    keep: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[StorageResult]:
    """Measure a folder; returns one result per test, block size and job count. ``progress``
    hears (what runs now, steps done, steps in all) before each step: the fill, then each test."""
    folder = Path(target)
    if not folder.is_dir():
        raise StokerError(f"{folder} is not a folder: give the mount point or folder to measure")
    _check(folder, size, blocks, jobs)
    path = folder / f".stoker-bench-{os.getpid()}"
    results: list[StorageResult] = []
    try:
        with _sigterm_as_exit():
            cases = _cases(tests, blocks, jobs)
            if progress:
                progress(f"writing the {size:,}-byte test file", 0, len(cases) + 1)
            fill(path, size)
            for done, (test, block, n, cache) in enumerate(cases, 1):
                if progress:
                    what = f"{test} {block:,} B x {n} job(s){'' if cache == '-' else ', ' + cache}"
                    progress(what, done, len(cases) + 1)
                results.append(measure(path, test, block=block, jobs=n, cache=cache, direct=direct))
    except OSError as exc:
        raise _disk_error(folder, exc) from exc
    finally:
        if not keep:
            # A read-only or broken file system fails here too: the error raised above counts.
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
    return results


def _check(folder: Path, size: int, blocks: tuple[int, ...], jobs: tuple[int, ...]) -> None:
    """Refuse what would measure nothing, divide by zero or fill the disk."""
    from ..units import format_bytes

    if not blocks or any(b <= 0 or b % ALIGN for b in blocks):
        raise StokerError(
            f"--block {', '.join(map(str, blocks)) or 'none'}: each must be a positive "
            f"multiple of {ALIGN} bytes (O_DIRECT), e.g. 4KiB or 1MiB"
        )
    if not jobs or any(n < 1 for n in jobs):
        raise StokerError(f"--jobs {', '.join(map(str, jobs)) or 'none'}: each must be 1 or more")
    need = max(blocks) * max(jobs)
    if size < need:
        shown = format_bytes(size) if size > 0 else size
        raise StokerError(
            f"--size {shown}: the test file must hold at least one block per job "
            f"({format_bytes(need)} for --block {format_bytes(max(blocks))} x --jobs "
            f"{max(jobs)}); use e.g. --size 1GiB"
        )
    free = shutil.disk_usage(folder).free
    if size > free * FREE_MARGIN:
        raise StokerError(
            f"--size {format_bytes(size)} does not fit in {folder}: {format_bytes(free)} free "
            f"(the test file may take {FREE_MARGIN:.0%} of it); use a smaller --size"
        )


def _disk_error(folder: Path, exc: OSError) -> StokerError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StokerError(f"no space left in {folder} for the test file: use a smaller --size")
    if exc.errno == errno.EROFS:
        return StokerError(f"{folder} is on a read-only file system: measure a writable folder")
    return StokerError(f"cannot measure {folder}: {exc.strerror or exc}")


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """SIGTERM (``timeout``, a scheduler) raises SystemExit, so the test file is removed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def skipped(tests: tuple[str, ...], blocks: tuple[int, ...]) -> list[str]:
    """The tests no block runs: sequential ones need a block >= 64 KiB, random ones a smaller."""
    big = any(b >= SEQUENTIAL_MIN for b in blocks)
    small = any(b < SEQUENTIAL_MIN for b in blocks)
    return [t for t in tests if (big if t.startswith("seq") else small) is False]


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
            if (block >= SEQUENTIAL_MIN) != sequential:
                continue
            for n in jobs:
                for cache in ("-",) if test.endswith("write") else ("cold", "warm"):
                    cases.append((test, block, n, cache))
    return cases
