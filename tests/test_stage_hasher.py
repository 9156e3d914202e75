"""The download hash: blocks land out of order, in pieces, some from an earlier run; the hash
must still be that of the whole file, in order."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
from pathlib import Path

import pytest
import xxhash

from stoker._many_md5 import new_md5
from stoker.errors import StoreError
from stoker.store import _read_backs
from stoker.store._file_hasher import FileHasher

BLOCK, PIECE = 4096, 1000


def _land(path: Path, data: bytes, order: list[int], kept: set[int], kind: str) -> str:
    """Write ``data``'s blocks piece by piece through a FileHasher, as the engine does: the
    blocks in ``order`` all in flight at once (each piece yields to the others, so they
    interleave); blocks in ``kept`` were written by an earlier run."""

    async def go(fd: int) -> str:
        hasher = FileHasher(
            hashlib.md5() if kind == "md5" else xxhash.xxh3_128(), fd, len(data), BLOCK
        )
        for i in sorted(kept):
            await hasher.block_done(i)

        async def fetch(i: int, delay: float) -> None:
            await asyncio.sleep(delay)
            for start in range(i * BLOCK, min(len(data), (i + 1) * BLOCK), PIECE):
                piece = data[start : min(start + PIECE, (i + 1) * BLOCK, len(data))]
                os.pwrite(fd, piece, start)
                hasher.chunk(start, piece)
                await asyncio.sleep(0)
            await hasher.block_done(i)

        await asyncio.gather(*(fetch(i, n * 0.001) for n, i in enumerate(order)))
        return hasher.hexdigest()

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        os.ftruncate(fd, len(data))
        for i in kept:
            os.pwrite(fd, data[i * BLOCK : (i + 1) * BLOCK], i * BLOCK)
        return asyncio.run(go(fd))
    finally:
        os.close(fd)


@pytest.mark.parametrize("kind", ["md5", "xxh128"])
@pytest.mark.parametrize("seed", range(6))
def test_out_of_order_blocks_hash_like_the_whole_file(tmp_path: Path, kind: str, seed: int) -> None:
    rng = random.Random(seed)
    data = rng.randbytes(rng.choice([1, BLOCK, 7 * BLOCK + 123, 12 * BLOCK]))
    blocks = -(-len(data) // BLOCK)
    kept = set(rng.sample(range(blocks), k=rng.randint(0, blocks // 2))) if seed % 2 else set()
    order = [i for i in range(blocks) if i not in kept]
    rng.shuffle(order)
    got = _land(tmp_path / "f", data, order, kept, kind)
    want = (
        hashlib.md5(data).hexdigest()
        if kind == "md5"
        else f"xxh128:{xxhash.xxh3_128_hexdigest(data)}"
    )
    assert got == want


def test_a_damaged_piece_changes_the_hash(tmp_path: Path) -> None:
    data = os.urandom(5 * BLOCK)
    good = _land(tmp_path / "a", data, [4, 0, 2, 1, 3], set(), "md5")
    bad = bytearray(data)
    bad[3 * BLOCK + 17] ^= 1
    assert _land(tmp_path / "b", bytes(bad), [4, 0, 2, 1, 3], set(), "md5") != good


@pytest.mark.parametrize("preadv", [True, False])
def test_read_back_through_one_buffer_hashes_every_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, preadv: bool
) -> None:
    """Blocks larger than the read-back buffer (1 MiB), landing last first: the buffer the
    hasher reuses must not carry one read's bytes into the next (with os.preadv, and where
    there is none, through pread)."""
    if not preadv:
        monkeypatch.delattr(os, "preadv", raising=False)
    block = 3 << 19  # 1.5 MiB
    data = random.Random(5).randbytes(3 * block + 777)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        os.pwrite(fd, data, 0)

        async def go() -> str:
            hasher = FileHasher(hashlib.md5(), fd, len(data), block)
            for i in (3, 2, 1, 0):
                await hasher.block_done(i)
            return hasher.hexdigest()

        assert asyncio.run(go()) == hashlib.md5(data).hexdigest()
    finally:
        os.close(fd)


@pytest.mark.parametrize("lanes", ["1", "0"])
def test_read_backs_of_many_files_share_rounds_and_each_gets_its_own_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lanes: str
) -> None:
    """Files whose blocks finish at different times read back through one ReadBacks (MD5s side
    by side in lanes, or hashlib's one after another): each joins the rounds under way, each
    gets its own file's MD5, and a file cut short fails alone, naming where it ended."""
    monkeypatch.setenv("STOKER_MD5_LANES", lanes)
    monkeypatch.setattr(_read_backs, "READ_BACK", 1000)  # many rounds a block
    block, rng = 4096, random.Random(7)
    datas = [rng.randbytes(n) for n in (1, block, 3 * block + 5, 9 * block, 20 * block + 99)]
    fds = [os.open(tmp_path / f"f{i}", os.O_RDWR | os.O_CREAT) for i in range(len(datas))]
    for fd, data in zip(fds, datas, strict=True):
        os.ftruncate(fd, len(data))  # each block's bytes come when it lands
    short = os.open(tmp_path / "short", os.O_RDWR | os.O_CREAT)
    fds.append(short)
    datas_landing = [*datas, b"x" * (block + 10)]  # claims 3 blocks, holds 1 and a bit

    async def go() -> list[str | BaseException]:
        together = _read_backs.ReadBacks()
        sizes = [len(d) for d in datas] + [3 * block]
        hashers = [
            FileHasher(new_md5(), fd, size, block, together)
            for fd, size in zip(fds, sizes, strict=True)
        ]

        async def land(hasher: FileHasher, data: bytes, seed: int) -> str:
            order = list(range(-(-hasher.size // block)))
            random.Random(seed).shuffle(order)
            try:
                for i in order:
                    await asyncio.sleep(random.Random(seed + i).random() * 0.002)
                    os.pwrite(hasher.fd, data[i * block : (i + 1) * block], i * block)
                    await hasher.block_done(i)
            finally:
                hasher.close()  # (as the engine does: the others stop waiting for it)
            return hasher.hexdigest()

        tasks = [land(h, d, n) for n, (h, d) in enumerate(zip(hashers, datas_landing, strict=True))]
        return await asyncio.gather(*tasks, return_exceptions=True)

    try:
        *got, cut = asyncio.run(go())
    finally:
        for fd in fds:
            os.close(fd)
    assert got == [hashlib.md5(d).hexdigest() for d in datas]
    assert isinstance(cut, StoreError) and f"ended at byte {block + 10}" in str(cut)


def test_a_failed_round_reaches_every_waiter_and_the_next_read_back_runs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever stops the runner (here a hash that raises) fails the read-backs it held, and
    does not leave the next ones waiting for a runner that is gone."""
    data = os.urandom(3 * BLOCK)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    os.pwrite(fd, data, 0)
    real = _read_backs.update_together
    calls = []

    def fails_once(hashers: list, pieces: list) -> None:
        calls.append(len(hashers))
        if len(calls) == 1:
            raise MemoryError("no room for a lane")
        real(hashers, pieces)

    monkeypatch.setattr(_read_backs, "update_together", fails_once)

    async def go() -> tuple[BaseException | str, str]:
        together = _read_backs.ReadBacks()
        first = FileHasher(new_md5(), fd, len(data), BLOCK, together)
        failed = await asyncio.gather(
            asyncio.wait_for(first.block_done(0), 10), return_exceptions=True
        )
        first.close()
        again = FileHasher(new_md5(), fd, len(data), BLOCK, together)
        for i in range(3):
            await asyncio.wait_for(again.block_done(i), 10)
        return failed[0], again.hexdigest()

    try:
        failed, digest = asyncio.run(go())
    finally:
        os.close(fd)
    assert isinstance(failed, MemoryError) and "no room" in str(failed)
    assert digest == hashlib.md5(data).hexdigest()


def _written(tmp_path: Path, name: str, data: bytes) -> int:
    fd = os.open(tmp_path / name, os.O_RDWR | os.O_CREAT)
    os.pwrite(fd, data, 0)
    return fd


def test_read_backs_that_come_apart_wait_for_each_other_and_hash_side_by_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two files under way whose blocks finish at different moments: the first read-back waits
    (up to LINGER) for the second, and every round hashes both."""
    monkeypatch.setattr(_read_backs, "READ_BACK", 1000)
    monkeypatch.setattr(_read_backs, "LINGER_ABOVE", BLOCK)  # (small files wait here too)
    rounds: list[int] = []
    real = _read_backs.update_together

    def counted(hashers: list, pieces: list) -> None:
        rounds.append(len(hashers))
        real(hashers, pieces)

    monkeypatch.setattr(_read_backs, "update_together", counted)
    datas = [os.urandom(3 * BLOCK), os.urandom(3 * BLOCK)]
    fds = [_written(tmp_path, f"f{i}", d) for i, d in enumerate(datas)]

    async def go() -> list[str]:
        together = _read_backs.ReadBacks()
        hashers = [FileHasher(new_md5(), fd, 3 * BLOCK, BLOCK, together) for fd in fds]

        async def land(hasher: FileHasher, delay: float) -> str:
            await asyncio.sleep(delay)
            await asyncio.gather(*(hasher.block_done(i) for i in range(3)))
            hasher.close()
            return hasher.hexdigest()

        return await asyncio.wait_for(
            asyncio.gather(land(hashers[0], 0), land(hashers[1], 0.05)), 10
        )

    try:
        digests = asyncio.run(go())
    finally:
        for fd in fds:
            os.close(fd)
    assert digests == [hashlib.md5(d).hexdigest() for d in datas]
    assert rounds and set(rounds) == {2}, rounds


@pytest.mark.parametrize("partner", ["closes", "never opened", "stays open"])
def test_a_lone_read_back_waits_for_no_file_that_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partner: str
) -> None:
    """A read-back waits for a partner only while another file is under way and only when it
    has LINGER_ABOVE or more to hash: once the other closes (or when there is none, or the
    read-back is small) it goes on at once, not after LINGER."""
    monkeypatch.setattr(_read_backs, "LINGER", 60.0)
    if partner != "stays open":
        monkeypatch.setattr(_read_backs, "LINGER_ABOVE", BLOCK)
    data = os.urandom(2 * BLOCK)
    fd = _written(tmp_path, "f", data)

    async def go() -> str:
        together = _read_backs.ReadBacks()
        hasher = FileHasher(new_md5(), fd, len(data), BLOCK, together)
        other = None if partner == "never opened" else FileHasher(new_md5(), fd, 1, 1, together)

        async def close_later() -> None:
            await asyncio.sleep(0.05)
            if other and partner == "closes":
                other.close()

        both = asyncio.gather(hasher.block_done(0), hasher.block_done(1), close_later())
        await asyncio.wait_for(both, 10)
        return hasher.hexdigest()

    try:
        assert asyncio.run(go()) == hashlib.md5(data).hexdigest()
    finally:
        os.close(fd)
