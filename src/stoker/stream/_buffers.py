"""Where a batch read as tensors lives: in the training process, buffers recycled once no
tensor refers to them (``BufferPool``); in a DataLoader worker, shared memory, which reaches the
training process by file descriptor (``shared_tensor``)."""

from __future__ import annotations

import threading
import weakref

import numpy as np
import torch

from ._tensors import PIECE


class BufferPool:
    """The training process's batch buffers, each reused once every tensor on it is gone. A
    request takes the smallest free buffer that holds it (a view of the size asked): samples of
    varied sizes (unet3d's 8-150 MB) then reuse each other's buffers, where a buffer kept for its
    exact size alone was almost never asked for again, and every sample faulted in new memory.

    A new buffer for a large sample (``PIECE`` or more) is made as large as the dataset's
    largest sample (``capacity``), so that any later sample fits it. Pages never written cost
    nothing (the kernel maps a page when it is first written), and a buffer made for a 30 MB
    sample does not leave a 140 MB one to fault in a buffer of its own. Large samples are mapped
    where they can be (``_mapped``); this serves the rest: the first batch of a remote job, file
    systems that cannot map (figures: docs/stream-notes.md). Small samples keep exact sizes: a
    batch of many would reserve a huge page each."""

    def __init__(self, keep: int = 4, capacity: int = 0) -> None:
        self.keep, self.capacity, self.lock = keep, capacity, threading.Lock()
        self.free: list[np.ndarray] = []

    def tensor(self, nbytes: int) -> torch.Tensor:
        with self.lock:
            fits = [i for i, b in enumerate(self.free) if b.nbytes >= nbytes]
            # By position: list.remove would compare arrays with ==, element by element.
            at = min(fits, key=lambda i: self.free[i].nbytes, default=None)
            found = self.free.pop(at) if at is not None else None
        size = max(nbytes, self.capacity) if nbytes >= PIECE else nbytes
        base = found if found is not None else np.empty(size, np.uint8)
        # The tensor's storage holds `view` (not `base`) until its last view is freed.
        view = base[:nbytes]
        weakref.finalize(view, self._release, base)
        return torch.from_numpy(view)

    def _release(self, base: np.ndarray) -> None:
        with self.lock:
            self.free.append(base)
            del self.free[: -self.keep]


def shared_tensor(nbytes: int) -> torch.Tensor:
    """A uint8 tensor in shared memory, as DataLoader workers send batches without a copy."""
    storage = torch.UntypedStorage._new_shared(nbytes)
    return torch.empty(0, dtype=torch.uint8).set_(storage)
