"""MD5 of many objects side by side, one SIMD lane each, when stoker's extension is built.

One MD5 is a chain of dependent steps, so hashlib's (OpenSSL's) runs one stream on a core and
leaves most of it idle. ``stoker._native.md5many`` runs up to 16 streams at once, one per 32-bit
lane of a vector (AVX-512, AVX2 or SSE2, chosen when it loads): together they hash at several
times one stream's rate, and one alone (in plain 32-bit words) as fast as OpenSSL (figures:
docs/stage-cpu-notes.md). Where several objects are hashed at once it pays: a group of small
files (stage/_small), the read-backs of large files under way (stage/_read_backs).

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


def new_md5() -> Any:  # noqa: ANN401 - a LaneMd5 or hashlib's: they share no base class
    """A fresh MD5, to be updated with others by ``update_together`` (or alone)."""
    return LaneMd5() if side_by_side() else hashlib.md5()


def md5s(count: int) -> list[Any]:
    """``count`` fresh MD5s meant to be updated together by ``update_together``."""
    return [new_md5() for _ in range(count)]


def update_together(hashers: Sequence[Any], datas: Sequence[Any]) -> None:
    """``hashers[i].update(datas[i])`` for every i: in one call, side by side, when they are
    lanes (the GIL released meanwhile, as hashlib releases it for a large update). They are all
    of one kind: made by ``new_md5`` in one process."""
    if hashers and isinstance(hashers[0], LaneMd5):
        md5many.update_many([h.state for h in hashers], datas)
        return
    for hasher, data in zip(hashers, datas, strict=True):
        hasher.update(data)
