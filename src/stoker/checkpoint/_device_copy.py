"""GPU tensors into the (pinned) host buffer on a side CUDA stream.

For each CUDA device a snapshot meets, in this order:

1. the device's side stream (one per device, kept for the process) waits on its current stream,
   so the copies see every kernel the training loop queued before ``save()``;
2. each tensor is copied with ``non_blocking=True`` on the side stream (DMA into the pinned
   buffer; the CPU does not wait) and ``record_stream``'d there, so that its memory is not
   handed to another stream before the copy has read it;
3. an event is recorded on the side stream after the last copy, and the current stream waits
   on it: work the loop queues after ``save()`` returns (an optimizer step updating the
   parameters in place) runs after the copies on the GPU, so it cannot tear the snapshot;
4. the writer thread synchronizes on the event before it reads a byte of the buffer
   (``DeviceCopies.wait``).

Every CUDA call goes through ``Cuda``, a seam that tests replace (``set_backend``) to check this
order on a machine without a GPU. This path has not run on a GPU yet.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any


class Cuda:
    """The CUDA calls a snapshot makes, and nothing else."""

    def __init__(self) -> None:
        self._streams: dict[Any, Any] = {}

    def available(self) -> bool:
        import torch

        return torch.cuda.is_available()

    def is_device(self, tensor: Any) -> bool:
        return bool(tensor.is_cuda)

    def device(self, tensor: Any) -> Any:
        return tensor.device

    def current_stream(self, device: Any) -> Any:
        import torch

        return torch.cuda.current_stream(device)

    def side_stream(self, device: Any) -> Any:
        """The device's side stream, made once (a new stream per save would leak them)."""
        import torch

        if device not in self._streams:
            self._streams[device] = torch.cuda.Stream(device)
        return self._streams[device]

    def use(self, stream: Any) -> AbstractContextManager[Any]:
        import torch

        return torch.cuda.stream(stream)

    def event(self) -> Any:
        import torch

        return torch.cuda.Event()

    def copy(self, dst: Any, src: Any) -> None:
        dst.copy_(src, non_blocking=True)

    def keep_alive(self, tensor: Any, stream: Any) -> None:
        """The caching allocator must not reuse ``tensor``'s memory before ``stream`` read it."""
        tensor.record_stream(stream)

    def register(self, address: int, nbytes: int, device: Any) -> bool:
        """Pin ``nbytes`` at ``address`` (page-locked, DMA-able); False when CUDA refuses. With
        ``device`` current (from another thread the runtime would take device 0, and make a
        context there on every rank) and portable, so every device's context sees it pinned."""
        import torch

        with torch.cuda.device(device):
            done = torch.cuda.cudart().cudaHostRegister(address, nbytes, HOST_REGISTER_PORTABLE)
        return int(done) == 0

    def unregister(self, address: int, device: Any) -> None:
        import torch

        with torch.cuda.device(device):
            torch.cuda.cudart().cudaHostUnregister(address)

    def pinner(self, device: Any) -> Pinner:
        return Pinner(self, device)


HOST_REGISTER_PORTABLE = 1  # cudaHostRegisterPortable


class Pinner:
    """What a host buffer needs to pin and unpin itself: the seam and the device to do it on."""

    def __init__(self, cuda: Cuda, device: Any) -> None:
        self.cuda, self.device = cuda, device

    def register(self, address: int, nbytes: int) -> bool:
        return self.cuda.register(address, nbytes, self.device)

    def unregister(self, address: int) -> None:
        self.cuda.unregister(address, self.device)


_BACKEND: Cuda = Cuda()


def backend() -> Cuda:
    return _BACKEND


def set_backend(cuda: Cuda) -> Cuda:
    """Swap the seam (tests); returns the previous one."""
    global _BACKEND
    previous, _BACKEND = _BACKEND, cuda
    return previous


class DeviceCopies:
    """The device-to-host copies of one snapshot, on one side stream per device."""

    def __init__(self, cuda: Cuda) -> None:
        self.cuda = cuda
        self._open: dict[Any, tuple[Any, Any]] = {}  # device -> (side stream, current stream)
        self._events: list[Any] = []
        self.count = 0

    def copy(self, dst: Any, src: Any) -> None:
        device = self.cuda.device(src)
        if device not in self._open:
            side, current = self.cuda.side_stream(device), self.cuda.current_stream(device)
            side.wait_stream(current)  # 1. after every kernel queued before save()
            self._open[device] = (side, current)
        side, _ = self._open[device]
        with self.cuda.use(side):
            self.cuda.copy(dst, src)  # 2. non_blocking, DMA into the pinned buffer
            self.cuda.keep_alive(src, side)
        self.count += 1

    def finish(self) -> DeviceCopies | None:
        """Record the events (and make the current streams wait on them); None when no copy
        was made, so that a CPU-only snapshot carries nothing to wait for."""
        for side, current in self._open.values():
            event = self.cuda.event()
            event.record(side)  # 3.
            current.wait_event(event)
            self._events.append(event)
        self._open.clear()
        return self if self._events else None

    def wait(self) -> None:
        """Block the calling thread (the writer) until every copy has landed in the buffer."""
        for event in self._events:
            event.synchronize()  # 4.
