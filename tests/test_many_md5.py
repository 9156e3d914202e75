"""MD5 side by side in SIMD lanes (stoker._native.md5many): the same digests as hashlib's,
however the bytes are split across calls and however many objects share a call."""

from __future__ import annotations

import hashlib
import os
import random

import pytest

from stoker import _many_md5
from stoker._native import md5many


def test_the_extension_is_built_here() -> None:
    """setup.py builds it optionally; where a C compiler is (here, CI) it must be built, or a
    broken build would pass unnoticed, every MD5 falling back to hashlib."""
    assert _many_md5.md5many is md5many and _many_md5.side_by_side()


@pytest.mark.parametrize("seed", range(6))
def test_many_objects_split_anyhow_hash_as_hashlib_does(seed: int) -> None:
    rng = random.Random(seed)
    sizes = [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 4096, 70_000]
    datas = [os.urandom(rng.choice(sizes + [rng.randrange(200_000)])) for _ in range(40)]
    states = [md5many.new() for _ in datas]
    taken = [0] * len(datas)
    while any(t < len(d) for t, d in zip(taken, datas, strict=True)):
        # Some objects sit a round out; each takes a piece of any length, 0 included.
        now = [i for i, d in enumerate(datas) if taken[i] < len(d) and rng.random() < 0.7]
        pieces = []
        for i in now:
            n = rng.randint(0, len(datas[i]) - taken[i])
            pieces.append(memoryview(datas[i])[taken[i] : taken[i] + n])
            taken[i] += n
        md5many.update_many([states[i] for i in now], pieces)
    for state, data in zip(states, datas, strict=True):
        assert md5many.digest(state) == hashlib.md5(data).digest()


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 8, 9, 16, 17])
def test_every_kernel_hashes_as_hashlib_does(count: int) -> None:
    """Each count of busy lanes has its own kernel (one or two chains of plain words, vectors
    of 4, 8, 16); unequal lengths make a call pass through the narrower ones as lanes finish."""
    datas = [os.urandom(64 * (3 + 5 * i) + i) for i in range(count)]
    states = [md5many.new() for _ in datas]
    md5many.update_many(states, datas)
    assert [md5many.digest(s) for s in states] == [hashlib.md5(d).digest() for d in datas]


def test_a_digest_leaves_the_state_to_go_on() -> None:
    state = md5many.new()
    md5many.update_many([state], [b"abc"])
    assert md5many.digest(state).hex() == "900150983cd24fb0d6963f7d28e17f72"  # RFC 1321
    md5many.update_many([state], [b"def"])
    assert md5many.digest(state) == hashlib.md5(b"abcdef").digest()


def test_bad_calls_are_refused_and_change_nothing() -> None:
    state = md5many.new()
    with pytest.raises(ValueError, match="twice"):
        md5many.update_many([state, state], [b"a", b"b"])
    with pytest.raises(ValueError, match="differ in length"):
        md5many.update_many([state], [b"a", b"b"])
    with pytest.raises(ValueError, match="not an MD5 state"):
        md5many.update_many([bytearray(3)], [b"a"])
    with pytest.raises(BufferError):
        md5many.update_many([bytes(md5many.STATE_SIZE)], [b"a"])  # read-only
    with pytest.raises(TypeError):
        md5many.update_many([state], ["text"])
    assert md5many.digest(state) == hashlib.md5().digest()


@pytest.mark.parametrize("lanes", ["1", "0"])
def test_the_wrapper_gives_hashlib_digests_either_way(
    lanes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STOKER_MD5_LANES", lanes)
    datas = [os.urandom(n) for n in (10, 1000, 100_000)]
    hashers = _many_md5.md5s(len(datas))
    assert isinstance(hashers[0], _many_md5.LaneMd5) == (lanes == "1")
    for at in range(0, 100_000, 4096):
        live = [i for i, d in enumerate(datas) if at < len(d)]
        _many_md5.update_together(
            [hashers[i] for i in live], [datas[i][at : at + 4096] for i in live]
        )
    assert [h.hexdigest() for h in hashers] == [hashlib.md5(d).hexdigest() for d in datas]
    assert all(h.name == "md5" for h in hashers)
