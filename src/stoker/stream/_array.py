"""The "array" codec: every sample is a NumPy array of one dtype and one shape, stored as its
raw bytes (C order, native byte order). The layout is kept once, in ``index.json``; so the raw
bytes are what ``StreamingDataset(dtype=...)`` reads straight into a batch, where a pickled
array would have to be unpickled first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import StreamError


@dataclass(frozen=True)
class ArrayLayout:
    dtype: str  # NumPy's dtype.str, e.g. "<i4"
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(n) for n in self.shape))
        try:
            np.dtype(self.dtype)
        except TypeError as exc:
            raise StreamError(f"array dtype {self.dtype!r} is not a NumPy dtype") from exc

    @classmethod
    def of(cls, sample: Any, number: int) -> ArrayLayout:
        array = _as_array(sample, number)
        return cls(native(array.dtype).str, array.shape)

    def encode(self, sample: Any, number: int) -> bytes:
        array = _as_array(sample, number)
        layout = ArrayLayout(native(array.dtype).str, array.shape)
        if layout != self:
            raise StreamError(
                f"sample {number} is a {layout} array, but the dataset's samples are {self}: "
                "one dataset holds arrays of one dtype and shape (write the others to a dataset "
                "of their own, or use codec='pickle')"
            )
        return np.ascontiguousarray(array, dtype=self.dtype).tobytes()

    def decode(self, data: bytes) -> np.ndarray:
        # A writable copy, as an unpickled array would be (torch warns on read-only buffers).
        return np.frombuffer(data, dtype=self.dtype).reshape(self.shape).copy()

    def __str__(self) -> str:
        return f"{np.dtype(self.dtype).name} {self.shape}"


def _as_array(sample: Any, number: int) -> np.ndarray:
    if not isinstance(sample, np.ndarray):
        raise StreamError(
            f"sample {number} is a {type(sample).__name__}, not a NumPy array: pass "
            "codec='pickle' (any Python object) to the writer"
        )
    if sample.dtype.hasobject or sample.dtype.names is not None:
        kind = "Python objects" if sample.dtype.hasobject else "records (a structured dtype)"
        raise StreamError(f"sample {number} holds {kind}: use codec='pickle'")
    return sample


def native(dtype: np.dtype) -> np.dtype:
    """The dtype in this machine's byte order: the stored bytes are what torch reads."""
    return dtype.newbyteorder("=") if dtype.byteorder not in ("=", "|") else dtype
