"""The node-local shard cache: every process on a node shares one folder (local NVMe).

* One download per shard per node: a process takes the shard's ``flock`` before fetching; the
  others wait on it and then find the file. The kernel drops a dead process's locks, so a crash
  never blocks the next run.
* A shard appears only whole and verified (partial file named with the pid, XXH3-128 of the
  whole file against the index, rename). Partial files of dead processes are removed.
* A cached copy is named by its shard's name and XXH3 (``shard-000003.stk.<xxh3>``): two
  datasets that share the folder, or a dataset rewritten at the same URL, never take each
  other's shards for their own, whatever their sizes.
* A size limit: before a download, the least recently used shards go (a shard is "used" when it
  is opened; a process that already has it open keeps reading its copy after the unlink).
  ``get`` hands back an open file, opened before the shard is published: jobs that share a
  cache smaller than their datasets evict each other's shards, even one just downloaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import xxhash

from .. import _flock
from ..errors import StreamError

PARTIAL = ".partial"
LOCKS = ".locks"


class ShardCache:
    def __init__(self, root: Path, limit_bytes: int | None) -> None:
        self.root, self.limit = root, limit_bytes
        (root / LOCKS).mkdir(parents=True, exist_ok=True)
        self.evictions = 0
        self._clean_dead_partials()

    def _clean_dead_partials(self) -> None:
        for path in self.root.glob(f"*{PARTIAL}"):
            pid = path.name.rsplit(".", 2)[-2]
            if pid.isdigit() and not _alive(int(pid)):
                path.unlink(missing_ok=True)

    @contextmanager
    def _lock(self, name: str) -> Iterator[None]:
        # (None where the file system has no flock: shards are published by rename, so two
        # fetches of one shard cost a download, never a torn file)
        fd = _flock.take(self.root / LOCKS / f"{name}.lock", wait=True)
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)  # closing releases the lock

    def has(self, name: str, size: int, xxh3: str) -> bool:
        return _has(self.path(name, xxh3), size)

    def path(self, name: str, xxh3: str) -> Path:
        return self.root / f"{name}.{xxh3}"

    def drop(self, name: str, xxh3: str) -> None:
        """Remove a damaged copy (under the shard's lock: never one being published)."""
        final = self.path(name, xxh3)
        with self._lock(final.name):
            final.unlink(missing_ok=True)

    def get(
        self, name: str, size: int, xxh3: str, fetch: Callable[[Path], None]
    ) -> tuple[int, bool]:
        """A file descriptor open on the shard in the cache (the caller closes it), fetched if
        needed; and whether it was there already. Opened before anyone can evict it: a path
        handed back could be evicted by another job before the caller opened it."""
        final = self.path(name, xxh3)
        fd = _open(final, size)
        if fd is not None:
            return fd, True
        with self._lock(final.name):
            fd = _open(final, size)
            if fd is not None:  # another process fetched it while we waited
                return fd, True
            # The size in the name reserves room: make_room counts downloads in flight.
            partial = self.root / f"{final.name}.{size}.{os.getpid()}{PARTIAL}"
            self.make_room(size, partial)
            try:
                fetch(partial)
                got = _xxh3(partial)
                if got != xxh3:
                    raise StreamError(
                        f"shard {name}: the downloaded copy hashes to {got}, the index says "
                        f"{xxh3}; the source shard is damaged or was changed after indexing"
                    )
                fd = os.open(partial, os.O_RDONLY)
                os.replace(partial, final)
            except BaseException:
                if fd is not None:
                    os.close(fd)
                raise
            finally:
                partial.unlink(missing_ok=True)
        return fd, False

    def touch(self, fd: int) -> None:
        os.utime(fd)  # (an evicted shard's inode takes it too, harmlessly)

    def make_room(self, incoming: int, partial: Path) -> None:
        """Evict least recently used shards until ``incoming`` more bytes fit, then create
        ``partial`` while still holding the eviction lock: a download that has made room but
        not yet begun must already count for the next one (two prefetches at once overfilled
        the cache by a shard)."""
        if self.limit is None:
            return
        if incoming > self.limit:
            raise StreamError(
                f"a shard of {incoming} bytes does not fit the cache limit of {self.limit} bytes "
                f"in {self.root}: raise cache_limit"
            )
        with self._lock("evict"):
            shards, in_flight = [], 0
            for entry in os.scandir(self.root):
                if not entry.is_file():
                    continue
                if entry.name.endswith(PARTIAL):
                    in_flight += int(entry.name.rsplit(".", 3)[-3])
                else:
                    st = entry.stat()
                    shards.append((st.st_mtime_ns, st.st_size, entry.path))
            total = in_flight + sum(s for _, s, _ in shards)
            for _, nbytes, path in sorted(shards):
                if total + incoming <= self.limit:
                    break
                Path(path).unlink(missing_ok=True)
                total -= nbytes
                self.evictions += 1
            partial.touch()


def _has(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except FileNotFoundError:
        return False


def _open(path: Path, size: int) -> int | None:
    """A file descriptor on ``path`` if it is there whole, else None."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    if os.fstat(fd).st_size == size:
        return fd
    os.close(fd)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _xxh3(path: Path) -> str:
    digest, buf = xxhash.xxh3_128(), bytearray(8 << 20)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            digest.update(memoryview(buf)[:n])
    return digest.hexdigest()
