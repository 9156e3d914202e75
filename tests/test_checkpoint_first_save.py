"""The first save blocks no longer than the others (issue 23, part 5): ``Checkpointer.reserve``
(or ``reserve_like=``) makes the host buffer from the state's shapes and faults its pages in on
a background thread, and the first save copies into it. Timing is the benchmark's business
(bench/checkpoint_bench.py --parts first); here: the buffer is the one the saves use, its pages
are in before the save (counted as minor page faults), and every path round-trips."""

from __future__ import annotations

import mmap
import resource
from pathlib import Path

import pytest
import torch

from stoker.checkpoint import Checkpointer, _host_buffer
from stoker.checkpoint._host_buffer import HUGE, HostBuffer
from stoker.checkpoint._shardfile import reserve_snapshot, take_snapshot


def _state(n: int = 1 << 20) -> dict:
    return {"w": torch.randn(n), "b": torch.arange(10), "step": 7, "name": "run"}


def _shaped_like(state: dict) -> dict:
    return {
        k: torch.empty(v.shape, dtype=v.dtype, device="meta") if isinstance(v, torch.Tensor) else v
        for k, v in state.items()
    }


def test_reserve_from_shapes_is_the_buffer_the_first_save_uses(tmp_path: Path) -> None:
    state = _state()
    with Checkpointer(tmp_path / "fast") as ckpt:
        ckpt.reserve(_shaped_like(state))  # meta tensors: shapes and dtypes only
        reserved = ckpt._snapshot
        assert reserved is not None and reserved.host is not None and reserved.size == 0
        ckpt.save(1, state)
        assert ckpt._snapshot.buffer is reserved.buffer  # type: ignore[union-attr]
        assert reserved.host.ready and reserved.host.method in ("populate_write", "touch")
        ckpt.save(2, state)
        assert ckpt._snapshot.buffer is reserved.buffer  # type: ignore[union-attr]
        loaded = ckpt.load().state
    assert torch.equal(loaded["w"], state["w"]) and loaded["name"] == "run"


def test_reserve_like_at_construction_and_a_save_before_the_prefault_ends(tmp_path: Path) -> None:
    state = _state(16 << 20)  # 64 MiB: the save comes while the pages are still going in
    with Checkpointer(tmp_path / "fast", reserve_like=state) as ckpt:
        reserved = ckpt._snapshot
        assert reserved is not None
        ckpt.save(1, state)  # waits for what is left of the prefault, then copies
        assert ckpt._snapshot.buffer is reserved.buffer  # type: ignore[union-attr]
        loaded = ckpt.load().state
    assert torch.equal(loaded["w"], state["w"])


def test_a_state_that_outgrew_the_reservation_gets_a_new_buffer(tmp_path: Path, caplog) -> None:
    small, big = _state(1 << 10), _state(1 << 20)
    with Checkpointer(tmp_path / "fast") as ckpt:
        ckpt.reserve(small)
        reserved = ckpt._snapshot
        with caplog.at_level("INFO", logger="stoker.checkpoint"):
            ckpt.save(1, big)
        assert "outgrew the reserved host buffer" in caplog.text
        assert ckpt._snapshot.buffer is not reserved.buffer  # type: ignore[union-attr]
        ckpt.reserve(small)  # fits already: kept
        assert ckpt._snapshot.buffer is not reserved.buffer  # type: ignore[union-attr]
        loaded = ckpt.load().state
    assert torch.equal(loaded["w"], big["w"])


def test_reserve_slack_absorbs_a_skeleton_that_grows(tmp_path: Path) -> None:
    state = _state()
    reserved = reserve_snapshot(state)
    state["step"] = 10**30  # a longer pickle, a longer index
    state["note"] = "x" * 1000
    snap = take_snapshot(state, reuse=reserved)
    assert snap.buffer is reserved.buffer


@pytest.mark.parametrize("kernel_has_populate_write", [True, False])
def test_the_pages_are_in_before_the_first_copy(monkeypatch, kernel_has_populate_write) -> None:
    """Counted as minor page faults of the copy: a fresh 64 MiB buffer (4 KiB pages) takes
    16,384 of them; a reserved one next to none."""
    if not kernel_has_populate_write:
        monkeypatch.setattr(_host_buffer, "_LIBC", None)  # the one-byte-a-page fallback
    state = {"w": torch.randn(16 << 20)}
    pages = (64 << 20) // mmap.PAGESIZE

    def faults_of(reuse) -> int:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        take_snapshot(state, reuse=reuse)
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    fresh = faults_of(None)
    reserved = reserve_snapshot(state)
    assert reserved.host is not None
    reserved.host.wait()
    assert reserved.host.method == ("populate_write" if kernel_has_populate_write else "touch")
    ahead = faults_of(reserved)
    assert fresh > pages // 2, fresh
    assert ahead < pages // 20, (ahead, fresh)


def test_host_buffer_rounds_to_huge_pages_and_close_stops_the_prefault() -> None:
    buffer = HostBuffer(1, prefault=False)
    assert len(buffer) == HUGE and buffer.ready and buffer.method is None
    big = HostBuffer(1 << 30)  # stopped long before 1 GiB is in
    big.close()
    assert big.ready


def test_the_buffer_is_private_and_not_inherited_by_a_forked_child() -> None:
    """A shared anonymous mapping is shmem (slower to fault in); an inherited private one would
    make the next save pay a copy-on-write fault per page after a DataLoader worker forks."""
    buffer = HostBuffer(4 << 20, prefault=False)
    start = buffer.address()
    flags = None
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        span = line.split(" ", 1)[0].split("-")
        if len(span) == 2 and int(span[0], 16) <= start < int(span[1], 16):  # its mapping
            flags = next(x for x in lines[i:] if x.startswith("VmFlags:")).split()[1:]
            break
    assert flags is not None
    assert "sh" not in flags and "dc" in flags  # private; do not copy on fork
