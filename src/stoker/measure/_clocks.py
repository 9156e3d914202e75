"""How a Ledger times a step: the wall clock on CPU, CUDA events on the current stream on GPU
(which time the GPU's own work, read later without a sync). Both mark, measure between marks,
say whether marks are ready, wait for them, and take them back."""

from __future__ import annotations

import time
from typing import Any

from ..errors import StokerError


class WallClock:
    kind = "wall clock"

    mark = staticmethod(time.perf_counter)

    def elapsed(self, a: float, b: float) -> float:
        return b - a

    def ready(self, marks: list[Any]) -> bool:
        return True

    def wait(self, marks: list[Any]) -> None:
        pass

    def release(self, marks: list[Any]) -> None:
        pass


class CudaClock:
    """CUDA events on the current stream, reused from a pool once read."""

    kind = "CUDA events"

    def __init__(self, device: Any) -> None:
        import torch

        self._torch, self._device, self._free = torch, device, []

    def mark(self) -> Any:
        try:
            event = self._free.pop()
        except IndexError:
            event = self._torch.cuda.Event(enable_timing=True)
        event.record(self._torch.cuda.current_stream(self._device))
        return event

    def elapsed(self, a: Any, b: Any) -> float:
        return a.elapsed_time(b) / 1e3

    def ready(self, marks: list[Any]) -> bool:
        return all(m.query() for m in marks)

    def wait(self, marks: list[Any]) -> None:
        for m in marks:
            m.synchronize()

    def release(self, marks: list[Any]) -> None:
        self._free.extend(marks)


Clock = WallClock | CudaClock


def pick_clock(device: Any) -> Clock:
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise StokerError(f"Ledger({device!r}): not a torch device (use 'cpu' or 'cuda')") from exc
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise StokerError(f"Ledger({device!r}): no CUDA device here; use 'cpu' or None")
        return CudaClock(dev)
    return WallClock()
