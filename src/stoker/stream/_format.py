"""The shard format: many samples in one file, with an index in front and a checksum per sample.

    header   b"STKSHRD1", version u32, flags u32, samples u64                      (24 bytes)
    offsets  (samples + 1) x u64: where each sample starts, from the start of the file
    checks   samples x u64: XXH3-64 of each sample's stored bytes
    data     the samples' stored bytes (zstd frames when flag ZSTD is set)

All integers are little endian. The header and tables come first so a reader needs one small
read to find any sample; the checksums let it check just the samples it reads.
A dataset is a folder (or prefix) of shards plus ``index.json`` (see _index.py).
"""

from __future__ import annotations

import mmap
import os
import struct

import numpy as np
import xxhash

from ..errors import StreamError

MAGIC = b"STKSHRD1"
VERSION = 1
ZSTD = 1
HEADER = struct.Struct("<8sIIQ")
WARM_PROBES = 4  # samples of a read asked whether they are in the page cache


def encode_shard(samples: list[bytes], compress: bool) -> bytes:
    """One shard's bytes from already-encoded samples."""
    if compress:
        import zstandard

        zc = zstandard.ZstdCompressor(level=3)
        samples = [zc.compress(s) for s in samples]
    n = len(samples)
    sizes = np.fromiter((len(s) for s in samples), dtype=np.uint64, count=n)
    start = HEADER.size + 8 * (n + 1) + 8 * n
    offsets = np.empty(n + 1, dtype="<u8")
    offsets[0] = start
    np.cumsum(sizes, out=offsets[1:])
    offsets[1:] += start
    checks = np.fromiter((xxhash.xxh3_64_intdigest(s) for s in samples), dtype="<u8", count=n)
    header = HEADER.pack(MAGIC, VERSION, ZSTD if compress else 0, n)
    return b"".join([header, offsets.tobytes(), checks.tobytes(), *samples])


class ShardReader:
    """One open shard: its tables in memory, each sample read with one ``pread`` of exactly its
    bytes. Exact reads matter: a memory map would let the kernel's read-ahead pull in far more
    than a shuffled reader needs, and a batch would pay for its neighbours' I/O. (A large sample
    is mapped instead, and read ahead exactly: see ``_tensors.Mapped``.) Samples already in the
    page cache are copied out of a map of the shard instead (``mapped``): no read-ahead can
    happen there, and a copy from memory costs a fraction of a system call."""

    _map: mmap.mmap | bool | None = None  # (made on first use; False: this file cannot map)

    def __init__(self, name: str, fd: int, size: int) -> None:
        self.name, self.fd = name, fd
        self._read_tables(size)

    def _pread(self, n: int, offset: int) -> bytes:
        return os.pread(self.fd, n, offset)

    def _read_tables(self, size: int) -> None:
        name = self.name
        if size < HEADER.size:
            raise StreamError(f"shard {name}: {size} bytes, too short for a shard header")
        magic, version, flags, n = HEADER.unpack(self._pread(HEADER.size, 0))
        if magic != MAGIC or version != VERSION:
            raise StreamError(f"shard {name}: not a stoker shard (magic {magic!r} v{version})")
        again = "re-stage it, or write the dataset again"
        # Checked before reading the table: a damaged count would have it read (and allocate)
        # whatever the count says.
        if flags & ~ZSTD or HEADER.size + 16 * n + 8 > size:
            raise StreamError(
                f"shard {name}: its header is damaged (flags {flags:#x}, {n} samples in a file "
                f"of {size} bytes): {again}"
            )
        tables = self._pread(16 * n + 8, HEADER.size)
        if len(tables) < 16 * n + 8:
            raise StreamError(f"shard {name}: truncated before its sample table")
        self.offsets = np.frombuffer(tables, dtype="<u8", count=n + 1)
        self.checks = np.frombuffer(tables, dtype="<u8", count=n, offset=8 * (n + 1))
        if int(self.offsets[-1]) != size:
            raise StreamError(
                f"shard {name}: {size} bytes, its table says {int(self.offsets[-1])}; the file "
                f"is truncated or damaged: {again}"
            )
        if (
            int(self.offsets[0]) != HEADER.size + 16 * n + 8
            or (self.offsets[1:] < self.offsets[:-1]).any()
        ):
            raise StreamError(f"shard {name}: its sample table is damaged (offsets): {again}")
        self.compressed = bool(flags & ZSTD)
        # The same tables as native ints for the per-sample lookups: an item of a memoryview
        # is a Python int in ~23 ns, of a NumPy array a NumPy scalar then an int in ~76 (three
        # lookups a sample: ~4 % of a warm batch's CPU of 2 KiB records, perf).
        table = memoryview(np.frombuffer(tables, "<u8").astype(np.uint64, copy=False))
        self._starts, self._checks = table[: n + 1], table[n + 1 : 2 * n + 1]

    @classmethod
    def open(cls, name: str, fd: int, *, shuffled: bool) -> ShardReader:
        """A reader of the shard open at ``fd``, which it takes over (and closes on error)."""
        try:
            # Shuffled reads are random: the kernel's read-ahead would only read what is not asked.
            advice = os.POSIX_FADV_RANDOM if shuffled else os.POSIX_FADV_SEQUENTIAL
            os.posix_fadvise(fd, 0, 0, advice)
            return cls(name, fd, os.fstat(fd).st_size)
        except BaseException:
            os.close(fd)
            raise

    def close(self) -> None:
        if self._map:
            self._map.close()  # type: ignore[union-attr]
        os.close(self.fd)

    def mapped(self) -> mmap.mmap | None:
        """The shard mapped read-only, for samples in the page cache (``sample_mapped``); None
        where it cannot be, or where the file is no longer as long as its table says. Truncated
        since it was opened, it is read by ``pread`` instead, whose short read names the damage,
        where a map's page past the end would kill the process (SIGBUS): hence the size asked
        each time (one ``fstat``, for a group of samples)."""
        if self._map is None:
            try:
                self._map = mmap.mmap(self.fd, 0, prot=mmap.PROT_READ) if self.fd >= 0 else False
            except (OSError, ValueError):  # (a file system that cannot map)
                self._map = False
        if not self._map or os.fstat(self.fd).st_size < self._starts[-1]:
            return None
        return self._map  # type: ignore[return-value]

    def sample_mapped(self, view: mmap.mmap, i: int) -> bytes:
        """``sample(i)`` copied out of ``view`` (what ``mapped()`` returned), checked."""
        start, end = self._starts[i], self._starts[i + 1]
        blob = view[start:end]
        if xxhash.xxh3_64_intdigest(blob) != self._checks[i]:
            raise CorruptSample(self.name, i, start)
        if self.compressed:
            import zstandard

            return zstandard.ZstdDecompressor().decompress(blob)
        return blob

    def __len__(self) -> int:
        return len(self.checks)

    def raw(self, i: int) -> bytes:
        """Sample ``i``'s stored bytes, checked against its checksum."""
        start, end = self._starts[i], self._starts[i + 1]
        blob = self._pread(end - start, start)
        if len(blob) != end - start or xxhash.xxh3_64_intdigest(blob) != self._checks[i]:
            raise CorruptSample(self.name, i, start)
        return blob

    def span(self, i: int) -> tuple[int, int]:
        """Where sample ``i``'s stored bytes lie in the file: (offset, length)."""
        start = self._starts[i]
        return start, self._starts[i + 1] - start

    def read_into(self, i: int, offset: int, out: memoryview) -> None:
        """Fill ``out`` from the file at ``offset``: part or all of uncompressed sample ``i``."""
        done = 0
        while done < len(out):  # a pread may return short; only end of file stops it
            n = os.preadv(self.fd, [out[done:]], offset + done)
            if n == 0:
                raise CorruptSample(self.name, i, offset + done)  # truncated since it was opened
            done += n

    def check(self, i: int, data: memoryview) -> None:
        """Raise CorruptSample unless ``data`` is sample ``i``'s stored bytes."""
        if xxhash.xxh3_64_intdigest(data) != self._checks[i]:
            raise CorruptSample(self.name, i, self._starts[i])

    def sample(self, i: int) -> bytes:
        blob = self.raw(i)
        if self.compressed:
            import zstandard

            return zstandard.ZstdDecompressor().decompress(blob)
        return blob


def page_cached(fd: int, offset: int) -> bool:
    """Whether the page at ``offset`` is in the page cache (a read that must not wait). Asked
    before advising a warm shard (advice there is hundreds of system calls a batch for
    nothing, which slowed warm epochs)."""
    try:
        return os.preadv(fd, [bytearray(1)], offset, os.RWF_NOWAIT) == 1
    except OSError:  # EAGAIN: not cached; or a file system without non-blocking reads
        return False


def spread(items: list, count: int) -> list:
    """About ``count`` of ``items``, spread over them (the probes of ``in_page_cache``)."""
    return items[:: max(1, len(items) // max(1, count))]


def in_page_cache(spans: list[tuple[int, int, int]]) -> bool:
    """Whether the samples at ``spans`` (fd, offset, length) are in the page cache, judged by
    their middle pages: callers pass a few samples spread over a read (``spread``). Warm
    samples are read on the caller's thread: a hand-off to a reader thread costs more CPU than
    a copy from the page cache (docs/stream-notes.md)."""
    return all(fd >= 0 and page_cached(fd, offset + length // 2) for fd, offset, length in spans)


class CorruptSample(StreamError):
    def __init__(self, shard: str, index: int | None = None, offset: int | None = None) -> None:
        if index is None:  # from a DataLoader worker: torch re-raises with the message alone
            super().__init__(shard)
            return
        super().__init__(
            f"shard {shard}: sample {index} (byte offset {offset}) does not match its checksum; "
            "the shard is damaged: re-stage it, or pass on_corrupt='skip' to skip such samples"
        )
