"""``ShardWriter``: samples in, shards of about ``shard_size`` out, to any stoker store.

Each shard is written whole (on POSIX: partial file, fsync, rename; on Blob: one atomic put)
and only then added to ``index.json``, which is rewritten atomically after every shard. A crash
loses at most the shard being filled; ``ShardWriter(out, resume=True)`` reopens the dataset and
``samples_written`` says how many input samples to skip.
"""

from __future__ import annotations

import os
from typing import Any

import xxhash

from ..errors import StreamError
from ..store import IOLoop, open_store
from ..units import parse_bytes
from ._format import encode_shard
from ._index import INDEX, DatasetIndex, ShardInfo


class ShardWriter:
    def __init__(
        self,
        out: str | os.PathLike[str],
        *,
        shard_size: int | str = "64MiB",
        codec: str = "bytes",
        compression: str | None = None,
        resume: bool = False,
    ) -> None:
        self.out = str(out)
        self.shard_size = parse_bytes(shard_size) if isinstance(shard_size, str) else shard_size
        if self.shard_size <= 0:
            raise StreamError(f"shard_size={shard_size!r}: give a positive size, e.g. '64MiB'")
        self._io = IOLoop("stoker-shard-writer")
        self._store = open_store(self.out)
        try:
            existing = self._io.run(self._store.read_all(INDEX))
        except OSError as exc:  # a file where the folder should be, no permission
            self._io.close()
            raise StreamError(
                f"{self.out} cannot hold a dataset ({exc.strerror or exc}): give a new or empty "
                "folder, or a URL"
            ) from exc
        if existing is None:
            self._io.run(self._store.create_root())  # a missing container, as stage does
        if existing is not None and not resume:
            self._io.close()
            raise StreamError(
                f"{self._store}/{INDEX} exists: pass resume=True (--resume) to add to it, "
                "or write to an empty location"
            )
        if existing is not None:
            self.index = DatasetIndex.from_json(existing, f"{self._store}/{INDEX}")
            if (self.index.codec, self.index.compression) != (codec, compression):
                self._io.close()
                raise StreamError(
                    f"{self._store}/{INDEX} was written with codec={self.index.codec!r}, "
                    f"compression={self.index.compression!r}; resume with the same settings"
                )
        else:
            self.index = DatasetIndex(codec, compression)
        self._pending: list[bytes] = []
        self._pending_bytes = 0

    @property
    def samples_written(self) -> int:
        """Samples in complete shards plus those waiting for the current shard."""
        return self.index.samples + len(self._pending)

    def write(self, sample: Any) -> None:
        data = self.index.encode(sample, self.samples_written)
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= self.shard_size:
            self.flush()

    def flush(self) -> None:
        """Write the samples gathered so far as one shard, then list it in the index."""
        if not self._pending:
            return
        data = encode_shard(self._pending, self.index.compression == "zstd")
        name = f"shard-{len(self.index.shards):06d}.stk"
        self._io.run(self._store.write_bytes(name, data))
        info = ShardInfo(
            name,
            len(self._pending),
            len(data),
            xxhash.xxh3_128_hexdigest(data),
            largest=max(map(len, self._pending)),
        )
        self.index.add(info)
        self._io.run(self._store.write_bytes(INDEX, self.index.to_json()))
        self._pending, self._pending_bytes = [], 0

    def close(self, *, empty_index: bool = True) -> DatasetIndex:
        try:
            self.flush()
            if not self.index.shards and empty_index:  # an empty dataset still gets an index
                self._io.run(self._store.write_bytes(INDEX, self.index.to_json()))
        finally:
            self._io.run(self._store.close())
            self._io.close()
        return self.index

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.close()
        else:  # keep what is complete; the shard being filled is dropped
            self._pending = []
            self.close(empty_index=False)  # a failed first shard leaves nothing to resume
