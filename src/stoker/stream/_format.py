"""The shard format: many samples in one file, with an index in front and a checksum per sample.

    header   b"STKSHRD1", version u32, flags u32, samples u64                      (24 bytes)
    offsets  (samples + 1) x u64: where each sample starts, from the start of the file
    checks   samples x u64: XXH3-64 of each sample's stored bytes
    data     the samples' stored bytes (zstd frames when flag ZSTD is set)

All integers are little endian. The header and tables come first so a reader needs one small
read (or one mapping) to find any sample; the checksums let it check just the samples it reads.
A dataset is a folder (or prefix) of shards plus ``index.json`` (see _index.py).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import xxhash

from ..errors import StreamError

MAGIC = b"STKSHRD1"
VERSION = 1
ZSTD = 1
HEADER = struct.Struct("<8sIIQ")


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


@dataclass
class ShardReader:
    """Samples of one shard held in ``data`` (bytes, a memory map, or a buffer)."""

    name: str
    data: Any  # supports the buffer protocol
    offsets: np.ndarray
    checks: np.ndarray
    compressed: bool

    @classmethod
    def open(cls, name: str, data: Any) -> ShardReader:
        view = memoryview(data)
        if len(view) < HEADER.size:
            raise StreamError(f"shard {name}: {len(view)} bytes, too short for a shard header")
        magic, version, flags, n = HEADER.unpack_from(view, 0)
        if magic != MAGIC or version != VERSION:
            raise StreamError(f"shard {name}: not a stoker shard (magic {magic!r} v{version})")
        table_end = HEADER.size + 16 * n + 8
        if len(view) < table_end:
            raise StreamError(f"shard {name}: truncated before its sample table")
        offsets = np.frombuffer(view, dtype="<u8", count=n + 1, offset=HEADER.size)
        checks = np.frombuffer(view, dtype="<u8", count=n, offset=HEADER.size + 8 * (n + 1))
        if int(offsets[-1]) != len(view):
            raise StreamError(
                f"shard {name}: {len(view)} bytes, its table says {int(offsets[-1])}; the file "
                "is truncated or damaged"
            )
        return cls(name, data, offsets, checks, bool(flags & ZSTD))

    def __len__(self) -> int:
        return len(self.checks)

    def raw(self, i: int) -> memoryview:
        """Sample ``i``'s stored bytes, checked against its checksum."""
        start, end = int(self.offsets[i]), int(self.offsets[i + 1])
        blob = memoryview(self.data)[start:end]
        if xxhash.xxh3_64_intdigest(blob) != int(self.checks[i]):
            raise CorruptSample(self.name, i, start)
        return blob

    def sample(self, i: int) -> bytes:
        blob = self.raw(i)
        if self.compressed:
            import zstandard

            return zstandard.ZstdDecompressor().decompress(blob)
        return bytes(blob)


class CorruptSample(StreamError):
    def __init__(self, shard: str, index: int, offset: int) -> None:
        super().__init__(
            f"shard {shard}: sample {index} (byte offset {offset}) does not match its checksum; "
            "the shard is damaged: re-stage it, or pass on_corrupt='skip' to skip such samples"
        )
        self.shard, self.index, self.offset = shard, index, offset
