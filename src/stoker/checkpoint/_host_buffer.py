"""The host buffer a snapshot is laid out in: one anonymous mapping, faulted in ahead of time.

A fresh mapping costs nothing to make, but every page of it faults on its first write: copying
1 GiB into a fresh mapping took 2.5-5.4 s on the 2-core build VM, and 0.10-0.15 s into the
same mapping once its pages were there (measured with a profile of the first ``save``: page
faults were all of it; layout and pickling the skeleton took 3 ms). So the buffer is made ahead
(``Checkpointer.reserve``) and its pages are faulted in by a background thread while training
runs, with ``MADV_POPULATE_WRITE`` (Linux 5.14) in 64 MiB steps, a system call that runs
without the GIL; where the kernel refuses it, one byte of each page is written instead (a
strided ``zero_``, which also runs without the GIL). Then, when the state holds CUDA tensors,
the buffer is registered with CUDA (pinned), so that device-to-host copies run as DMA on a side
stream (_device_copy.py).

The mapping is private (``MAP_PRIVATE``: a shared one is shmem, slower to fault in here) and
``MADV_DONTFORK``: a forked child (a DataLoader worker) does not get it, so the next save does
not pay a copy-on-write fault per page. No ``MADV_HUGEPAGE``: on the build VM 2 MiB pages made
the faults slower, not faster (256 MiB: 1.0-1.5 s against 0.5-0.9 s, medians of 4).

``wait()`` joins that thread; a snapshot waits for it before it copies, so a save that comes
before the buffer is ready pays only for the part not yet done.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import mmap
import os
import threading
import time
from typing import Any

log = logging.getLogger("stoker.checkpoint")

HUGE = 2 << 20  # buffers are rounded up to 2 MiB (a huge page, should the kernel use them)
STEP = 64 << 20  # prefault in steps, so that close() can stop it early
MADV_POPULATE_WRITE = 23  # linux/mman.h, since 5.14; Python's mmap module has it from 3.13 on
PAGE = mmap.PAGESIZE


def _libc() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - not a glibc/musl system
        return None


_LIBC = _libc()


class HostBuffer:
    """``size`` bytes (rounded up to 2 MiB) of anonymous memory; ``prefault=True`` faults its
    pages in on a daemon thread (``wait()`` joins it), ``pin`` registers it with CUDA then."""

    def __init__(self, size: int, *, prefault: bool = True, pin: Any = None) -> None:
        self.size = max(-(-size // HUGE) * HUGE, HUGE)
        self.mmap = mmap.mmap(-1, self.size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.prefault_s: float | None = None  # how long the prefault took, once done
        self.method: str | None = None  # "populate_write", "touch", or None while none ran
        self.pinned = False
        self._pinner: Any = None
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if hasattr(mmap, "MADV_DONTFORK"):
            try:
                self.mmap.madvise(mmap.MADV_DONTFORK)
            except OSError:  # pragma: no cover - only an old kernel refuses it
                pass
        if prefault or pin is not None:
            self._thread = threading.Thread(
                target=self._prepare,
                args=(prefault, pin),
                name="stoker-ckpt-reserve",
                daemon=True,
            )
            self._thread.start()

    def __len__(self) -> int:
        return self.size

    @property
    def ready(self) -> bool:
        """Whether the background work is done (never blocks)."""
        return self._thread is None or not self._thread.is_alive()

    def wait(self) -> None:
        """Block until the pages are in (and pinned, when asked). A failed prefault is logged,
        not raised: the pages then fault on the first copy, as they would have anyway."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def pin(self, pinner: Any) -> None:
        """Register the buffer with CUDA now (after the prefault), unless done already."""
        self.wait()
        if not self.pinned:
            self._pin(pinner)

    def close(self) -> None:
        """Stop the prefault, unregister the buffer; the mapping goes with the last view of it."""
        self._stop.set()
        self.wait()
        if self.pinned and self._pinner is not None:
            self._pinner.unregister(self.address())
            self.pinned = False

    def __del__(self) -> None:
        # Pinned pages stay locked until unregistered; the last reference is gone only once
        # no snapshot (and so no writer, no copy in flight) holds this buffer.
        if getattr(self, "pinned", False) and self._pinner is not None:
            try:
                self._pinner.unregister(self.address())
            except Exception:  # at interpreter exit CUDA may be gone already
                pass

    def address(self) -> int:
        view = ctypes.c_char.from_buffer(self.mmap)
        try:
            return ctypes.addressof(view)
        finally:
            del view  # the export would keep the mapping from closing

    # ------------------------------------------------------------------ the thread
    def _prepare(self, prefault: bool, pinner: Any) -> None:
        start = time.perf_counter()
        try:
            if prefault:
                self.method = self._populate()
            if pinner is not None and not self._stop.is_set():
                self._pin(pinner)
        except BaseException as exc:  # the copy faults the pages in anyway: only slower
            self._error = exc
            log.warning("could not prepare the checkpoint host buffer ahead: %r", exc)
        self.prefault_s = time.perf_counter() - start

    def _populate(self) -> str:
        if _LIBC is not None and _populate_write(self, 0, min(STEP, self.size)):
            for offset in range(STEP, self.size, STEP):
                if self._stop.is_set():
                    break
                _populate_write(self, offset, min(STEP, self.size - offset))
            return "populate_write"
        self._touch()
        return "touch"

    def _touch(self) -> None:
        import torch

        raw = torch.frombuffer(self.mmap, dtype=torch.uint8)
        try:
            for offset in range(0, self.size, STEP):
                if self._stop.is_set():
                    break
                raw[offset : offset + STEP : PAGE].zero_()  # one byte a page, without the GIL
        finally:
            del raw

    def _pin(self, pinner: Any) -> None:
        if pinner.register(self.address(), self.size):
            self.pinned, self._pinner = True, pinner


def _populate_write(buffer: HostBuffer, offset: int, length: int) -> bool:
    """MADV_POPULATE_WRITE over ``[offset, offset + length)``; False where the kernel lacks it."""
    view = ctypes.c_char.from_buffer(buffer.mmap, offset)
    try:
        address = ctypes.addressof(view)
    finally:
        del view
    done = _LIBC.madvise(ctypes.c_void_p(address), ctypes.c_size_t(length), MADV_POPULATE_WRITE)
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EPERM):
        return False
    raise OSError(code, f"madvise(MADV_POPULATE_WRITE): {os.strerror(code)}")
