"""GPU tensors into the pinned host buffer on a side stream (issue 23, part 6), checked on the
CPU through a fake CUDA seam: the side stream waits on the current stream, every copy is
non_blocking on the side stream, an event is recorded after them and the current stream waits
on it, and the writer synchronizes on that event before it reads the buffer.

The fake copies like a DMA engine would: it reads the source when the copy is queued (the
current stream's later work is ordered after the event, so it cannot change what is copied)
but lands the bytes in the host buffer only when the event is synchronized. A writer that did
not wait would write zeros, and the round trip would fail."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker.checkpoint import Checkpointer, _device_copy
from stoker.checkpoint._device_copy import Cuda
from stoker.checkpoint._shardfile import read_verified, restore, take_snapshot, write_snapshot


class FakeStream:
    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    def wait_stream(self, other: FakeStream) -> None:
        self.log.append(("wait_stream", self.name, other.name))

    def wait_event(self, event: FakeEvent) -> None:
        self.log.append(("wait_event", self.name, event.id))


class FakeEvent:
    def __init__(self, cuda: FakeCuda, id: int) -> None:
        self.cuda, self.id = cuda, id
        self.stream: str | None = None

    def record(self, stream: FakeStream) -> None:
        self.stream = stream.name
        self.cuda.log.append(("record", self.id, stream.name))

    def synchronize(self) -> None:
        self.cuda.log.append(("synchronize", self.id, threading.current_thread().name))
        landed, self.cuda.in_flight = self.cuda.in_flight, []
        for dst, data in landed:
            dst.copy_(data)


class FakeCuda(Cuda):
    """CUDA as seen by the snapshot, with the tensors in ``on_gpu`` playing GPU tensors."""

    def __init__(self, on_gpu: list[torch.Tensor]) -> None:
        super().__init__()
        self.on_gpu = {id(t) for t in on_gpu}
        self.log: list[tuple] = []
        self.in_flight: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.current = FakeStream("current", self.log)
        self.side = FakeStream("side", self.log)
        self._stream: str | None = None
        self._events = 0
        self.registered: dict[int, int] = {}

    def available(self) -> bool:
        return True

    def is_device(self, tensor: Any) -> bool:
        return id(tensor) in self.on_gpu

    def device(self, tensor: Any) -> Any:
        return "cuda:0"

    def current_stream(self, device: Any) -> Any:
        return self.current

    def side_stream(self, device: Any) -> Any:
        return self.side

    @contextmanager
    def use(self, stream: Any):  # type: ignore[override]
        before, self._stream = self._stream, stream.name
        try:
            yield stream
        finally:
            self._stream = before

    def event(self) -> Any:
        self._events += 1
        return FakeEvent(self, self._events)

    def copy(self, dst: Any, src: Any) -> None:
        self.log.append(("copy", self._stream, "non_blocking"))
        self.in_flight.append((dst, src.clone()))  # read now, landed at synchronize

    def keep_alive(self, tensor: Any, stream: Any) -> None:
        self.log.append(("record_stream", stream.name))

    def register(self, address: int, nbytes: int, device: Any) -> bool:
        assert device == "cuda:0"  # on the tensors' device, not whichever is current
        self.log.append(("register", nbytes))
        self.registered[address] = nbytes
        return True

    def unregister(self, address: int, device: Any) -> None:
        assert device == "cuda:0"
        self.log.append(("unregister", self.registered.pop(address)))


@pytest.fixture
def fake_cuda():
    made: list[FakeCuda] = []

    def install(on_gpu: list[torch.Tensor]) -> FakeCuda:
        cuda = FakeCuda(on_gpu)
        made.append(cuda)
        _device_copy.set_backend(cuda)
        return cuda

    previous = _device_copy.backend()
    yield install
    _device_copy.set_backend(previous)


def kinds(log: list[tuple]) -> list[str]:
    return [entry[0] for entry in log]


def test_copies_run_on_the_side_stream_in_order_and_the_writer_waits(tmp_path: Path, fake_cuda):
    gpu_a, gpu_b = torch.randn(1000), torch.arange(77, dtype=torch.int64)
    cpu = torch.randn(10)
    cuda = fake_cuda([gpu_a, gpu_b])
    state = {"a": gpu_a, "b": gpu_b, "cpu": cpu, "step": 3}

    snap = take_snapshot(state)
    assert kinds(cuda.log) == [
        "register",  # the buffer is pinned before the first DMA into it
        "wait_stream",
        "copy",
        "record_stream",
        "copy",
        "record_stream",
        "record",
        "wait_event",
    ]
    assert cuda.log[1] == ("wait_stream", "side", "current")  # after the loop's queued work
    copies = [e for e in cuda.log if e[0] == "copy"]
    assert copies == [("copy", "side", "non_blocking")] * 2
    event = cuda.log[6][1]
    assert cuda.log[6] == ("record", event, "side")
    assert cuda.log[7] == ("wait_event", "current", event)  # later GPU work after the copies
    assert snap.host is not None and snap.host.pinned

    # The caller changes its tensors as soon as save returns: the copies read them already.
    gpu_a.fill_(-1.0)
    # Nothing has landed yet: the GPU tensors' bytes are not in the buffer.
    assert len(cuda.in_flight) == 2
    path = tmp_path / "shard.bin"
    digest = write_snapshot(snap, path)
    assert ("synchronize", event, threading.current_thread().name) in cuda.log
    assert kinds(cuda.log).index("synchronize") == len(cuda.log) - 1  # before any byte read

    buffer = read_verified(path, snap.size, digest)
    back = restore(buffer, snap.size, path, map_location="cpu", trusted=False)
    assert torch.equal(back["b"], gpu_b) and torch.equal(back["cpu"], cpu)
    assert not torch.equal(back["a"], gpu_a)  # the value at save time, not the later one
    assert back["a"].abs().max() < 10 and back["step"] == 3


def test_a_cpu_state_touches_no_stream(tmp_path: Path, fake_cuda):
    cuda = fake_cuda([])
    snap = take_snapshot({"t": torch.randn(100)})
    assert cuda.log == [] and snap.pending is None
    assert snap.host is not None and not snap.host.pinned


def test_the_pinned_buffer_is_reused_and_pinned_once(tmp_path: Path, fake_cuda):
    t = torch.randn(4096)
    cuda = fake_cuda([t])
    first = take_snapshot({"t": t})
    first.wait_copied()
    second = take_snapshot({"t": t}, reuse=first)
    assert second.buffer is first.buffer
    assert kinds(cuda.log).count("register") == 1
    assert kinds(cuda.log).count("wait_stream") == 2  # once per save


def test_checkpointer_round_trip_the_writer_thread_synchronizes(tmp_path: Path, fake_cuda):
    weights = torch.randn(1 << 16)
    expected = weights.clone()
    cuda = fake_cuda([weights])
    with Checkpointer(tmp_path / "fast") as ckpt:
        ckpt.save(1, {"w": weights, "step": 1})
        weights.mul_(2)  # an in-place update right after save()
        ckpt.wait()
        loaded = ckpt.load(map_location="cpu").state
    assert torch.equal(loaded["w"], expected)
    syncs = [e for e in cuda.log if e[0] == "synchronize"]
    assert len(syncs) == 1 and syncs[0][2].startswith("stoker-ckpt-write")


def test_reserve_pins_ahead_for_a_gpu_state_and_unpins_when_dropped(tmp_path: Path, fake_cuda):
    weights = torch.randn(1 << 16)
    cuda = fake_cuda([weights])
    with Checkpointer(tmp_path / "fast", reserve_like={"w": weights}) as ckpt:
        snap = ckpt._snapshot
        assert snap is not None and snap.host is not None
        snap.host.wait()
        assert snap.host.pinned and kinds(cuda.log) == ["register"]
        ckpt.save(1, {"w": weights})
        assert kinds(cuda.log).count("register") == 1  # not again at the save
        ckpt.wait()
        ckpt.reserve({"w": torch.empty(1 << 22, device="meta")})  # a larger state: a new buffer
        ckpt.wait()
    del snap
    import gc

    gc.collect()
    assert "unregister" in kinds(cuda.log)  # the first buffer's pages are unlocked


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_real_gpu_an_in_place_update_after_save_does_not_tear(tmp_path: Path):
    weights = torch.randn(64 << 20, device="cuda")  # 256 MiB: the copy takes a while
    expected = weights.cpu()
    with Checkpointer(tmp_path / "fast") as ckpt:
        ckpt.save(1, {"w": weights})
        weights.mul_(2)  # queued on the current stream, which waits on the copies
        ckpt.wait()
        assert ckpt._snapshot.host.pinned  # type: ignore[union-attr]
        loaded = ckpt.load(map_location="cpu").state
    assert torch.equal(loaded["w"], expected)
