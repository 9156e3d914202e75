"""``index.json``: the dataset's list of complete shards. A shard is listed only once it is
written whole, so a reader never sees a half-written one.

    {"format": "stoker.shards/1", "codec": "bytes", "compression": null, "samples": 20000,
     "bytes": 2293200000, "shards": [{"name": "shard-000000.stk", "samples": 585,
     "bytes": 67123456, "xxh3": "…", "largest": 114660}, …]}

``codec`` says how a sample's bytes become a Python object: "bytes" (as stored), "json"
(one JSON value), "pickle" (trusted data only) or "array" (NumPy arrays of the one dtype and
shape that ``"array": {"dtype": "<i4", "shape": [2048]}`` gives, stored raw). ``xxh3`` is the
whole file's XXH3-128, checked when a shard is downloaded into the node cache. ``largest`` is
the shard's largest sample in bytes (before compression): the loader sizes its reusable batch
buffers by it. Indexes written before it was kept lack it, and read as before.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import pickle
from dataclasses import asdict, dataclass, field, fields
from itertools import accumulate
from typing import Any

import numpy as np

from ..errors import StreamError
from ._array import ArrayLayout

FORMAT = "stoker.shards/1"
INDEX = "index.json"
CODECS = ("bytes", "json", "pickle", "array")


@dataclass(frozen=True)
class ShardInfo:
    name: str
    samples: int
    bytes: int
    xxh3: str
    largest: int = 0  # the largest sample's bytes as encoded (0: an index from before it was kept)


@dataclass
class DatasetIndex:
    codec: str = "bytes"
    compression: str | None = None
    shards: list[ShardInfo] = field(default_factory=list)
    format: str = FORMAT
    array: ArrayLayout | None = None  # codec "array": set by the first sample written

    def __post_init__(self) -> None:
        if self.codec not in CODECS:
            raise StreamError(f"codec {self.codec!r} is not one of {', '.join(CODECS)}")
        if self.compression not in (None, "zstd"):
            raise StreamError(f"compression {self.compression!r}: use None or 'zstd'")
        self._starts = [0, *accumulate(s.samples for s in self.shards)]
        self._starts_array = np.asarray(self._starts)

    @property
    def samples(self) -> int:
        return self._starts[-1]

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.shards)

    @property
    def largest_sample(self) -> int:
        """The largest sample's bytes (0 if the index does not say)."""
        return max((s.largest for s in self.shards), default=0)

    @property
    def shard_sizes(self) -> list[int]:
        return [s.samples for s in self.shards]

    def fingerprint(self) -> str:
        """What identifies the dataset's content and order: every shard's name, samples and
        XXH3 (a copy on another tier has the same one)."""
        text = "\n".join(f"{s.name} {s.samples} {s.xxh3}" for s in self.shards)
        return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()

    def locate(self, sample: int) -> tuple[int, int]:
        """(shard number, index in the shard) of a global sample id."""
        if not 0 <= sample < self.samples:
            raise IndexError(f"sample {sample} is outside 0..{self.samples - 1}")
        shard = bisect.bisect_right(self._starts, sample) - 1
        return shard, sample - self._starts[shard]

    def locate_all(self, samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``locate`` for an array of global ids: (shard numbers, indexes in their shards)."""
        if len(self._starts_array) != len(self._starts):  # (made once, not per call)
            self._starts_array = np.asarray(self._starts)
        starts = self._starts_array
        shards = np.searchsorted(starts, samples, side="right") - 1
        return shards, samples - starts[shards]

    def first(self, shard: int) -> int:
        return self._starts[shard]

    def add(self, info: ShardInfo) -> None:
        self.shards.append(info)
        self._starts.append(self._starts[-1] + info.samples)

    def to_json(self) -> bytes:
        body = asdict(self) | {"samples": self.samples, "bytes": self.bytes}
        if self.array is None:
            del body["array"]
        return json.dumps(body, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> DatasetIndex:
        try:
            raw = json.loads(data)
            if raw.get("format") != FORMAT:
                raise StreamError(
                    f"{where}: format {raw.get('format')!r} is not {FORMAT!r}; write the dataset "
                    "with stoker.stream.ShardWriter or `stoker shards write`"
                )
            # Keys a later writer adds are left out, so that this version still reads its
            # datasets (one from before `largest` was kept refuses this version's).
            known = {f.name for f in fields(ShardInfo)}
            shards = [
                ShardInfo(**{k: v for k, v in s.items() if k in known}) for s in raw["shards"]
            ]
            array = ArrayLayout(**raw["array"]) if raw.get("array") else None
            if raw["codec"] == "array" and shards and array is None:
                raise StreamError(f"{where}: codec 'array' without the arrays' dtype and shape")
            return cls(raw["codec"], raw.get("compression"), shards, array=array)
        except StreamError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise StreamError(f"{where}: unreadable dataset index ({exc})") from exc

    def encode(self, sample: Any, number: int) -> bytes:
        """Sample ``number`` as stored bytes; the first array written sets the layout."""
        if self.codec == "array":
            if self.array is None:
                self.array = ArrayLayout.of(sample, number)
            return self.array.encode(sample, number)
        return _encode(sample, self.codec, number)

    def decode(self, data: bytes) -> Any:
        if self.codec == "array":
            assert self.array is not None  # (checked when the index was read)
            return self.array.decode(data)
        return _decode(data, self.codec)


def _encode(sample: Any, codec: str, number: int) -> bytes:
    if codec == "bytes":
        if not isinstance(sample, bytes | bytearray | memoryview):
            raise StreamError(
                f"sample {number} is a {type(sample).__name__}, not bytes: pass codec='pickle' "
                "(any Python object), codec='array' (NumPy arrays) or codec='json' to the writer"
            )
        return bytes(sample)
    if codec == "json":
        return json.dumps(sample, separators=(",", ":")).encode()
    return pickle.dumps(sample, protocol=5)


def _decode(data: bytes, codec: str) -> Any:
    if codec == "bytes":
        return data
    if codec == "json":
        return json.loads(data)
    return pickle.loads(data)  # noqa: S301 - the dataset's owner chose pickle for their data
