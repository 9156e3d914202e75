"""MD5 of many objects side by side, one SIMD lane each, when stoker's extension is built.

One MD5 is a chain of dependent steps, so hashlib's (OpenSSL's) runs one stream at ~720 MiB/s
on a core here and leaves most of it idle. ``stoker._native.md5many`` runs up to 16 streams at
once, one per 32-bit lane of a vector (AVX-512, AVX2 or SSE2, chosen when it loads): on this
machine's core 2 streams hash 980 MiB/s together, 8 hash 3.7 GiB/s, 16 hash 6 GiB/s, while one
alone hashes 480 MiB/s. So it is used where several objects are hashed at once (a group of
small files: see stage/_small), and hashlib where one is.

The extension is optional: where it was not built (no C compiler when stoker was installed),
or with ``STOKER_MD5_LANES=0`` in the environment (to measure one against the other), every
hash is hashlib's, with the same results.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Any

try:
    from ._native import md5many
except ImportError:  # built without it: hashlib does the work
    md5many = None

# Side by side only pays from two streams on: one lane alone is slower than OpenSSL's.
LEAST_SIDE_BY_SIDE = 2


def side_by_side() -> bool:
    """Whether MD5s can run in lanes here (the extension is built and not switched off)."""
    return md5many is not None and os.environ.get("STOKER_MD5_LANES", "1") != "0"


class LaneMd5:
    """One MD5 in a lane: hashlib's interface (``update``, ``digest``, ``hexdigest``)."""

    name = "md5"

    def __init__(self) -> None:
        self.state = md5many.new()

    def update(self, data: Any) -> None:
        md5many.update_many((self.state,), (data,))

    def digest(self) -> bytes:
        return md5many.digest(self.state)

    def hexdigest(self) -> str:
        return self.digest().hex()


def md5s(count: int) -> list[Any]:
    """``count`` fresh MD5s meant to be updated together by ``update_together``."""
    if count >= LEAST_SIDE_BY_SIDE and side_by_side():
        return [LaneMd5() for _ in range(count)]
    return [hashlib.md5() for _ in range(count)]


def update_together(hashers: Sequence[Any], datas: Sequence[Any]) -> None:
    """``hashers[i].update(datas[i])`` for every i: in one call, side by side, when they are
    lanes (the GIL released meanwhile, as hashlib releases it for a large update)."""
    if hashers and isinstance(hashers[0], LaneMd5):
        md5many.update_many([h.state for h in hashers], datas)
        return
    for hasher, data in zip(hashers, datas, strict=True):
        hasher.update(data)
