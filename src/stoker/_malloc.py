"""A process that moves data keeps the memory it frees, for its next buffers.

glibc's malloc gives a large buffer a mapping of its own (above a threshold that starts at
128 KiB and moves), and hands freed memory at the top of a heap back to the kernel past
another: every 1 MiB piece obstore assembles and every object fetched whole was then fresh
pages, each faulted in and zeroed by the kernel, and a copy allocates and frees such buffers
all the time. Fixed thresholds keep them in the heap, reused, for less CPU an import
(docs/stage-cpu-notes.md).

The memory stays the process's until it exits, as a Go program's heap does (rclone's, AzCopy's):
so only a process that exists to move data (the `stoker stage` and `stoker cache pull`
commands) asks for it, not the library inside someone's training job.

The library does less (``raise_dynamic_thresholds``): a stage run moves glibc's own dynamic
thresholds the way any program's first free of a 16 MiB buffer does (a training process's
tensors have done it long before), and leaves them dynamic.
"""

from __future__ import annotations

import ctypes

from ._libc import LIBC as _LIBC

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MAPPED_ABOVE = 64 << 20  # a buffer this large still gets its own mapping (and goes back at once)
TRIMMED_ABOVE = 512 << 20  # free memory past this at a heap's top goes back to the kernel


def keep_freed_memory(mapped_above: int = MAPPED_ABOVE, trimmed_above: int = TRIMMED_ABOVE) -> bool:
    """Fix glibc's thresholds for this process (a DataLoader worker's are smaller: see
    stream/_worker_memory); False where the C library is not glibc."""
    libc = _LIBC  # None on Windows
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return False  # musl, macOS: their own allocators, left alone
    return bool(
        libc.mallopt(_M_MMAP_THRESHOLD, mapped_above)
        and libc.mallopt(_M_TRIM_THRESHOLD, trimmed_above)
    )


# A fresh process's glibc maps each buffer over 128 KiB on its own and gives back a heap's free
# top past 128 KiB; its first free of a mapped buffer raises the first to that buffer's size and
# the second to twice it (up to 32 MiB). In a script that had freed nothing large, obstore's
# 1 MiB pieces raised them to ~1 and ~2 MiB only, so the heaps were trimmed and faulted in again
# all the time; one 16 MiB malloc and free first cut an import's minor faults by two thirds
# and its CPU with them (docs/stage-cpu-notes.md).
NUDGE = 16 << 20
_nudged = False


def raise_dynamic_thresholds(size: int = NUDGE) -> bool:
    """One malloc and free of ``size`` bytes (mapped, no page touched), once a process: glibc's
    dynamic thresholds rise as that free makes them (mapped above ``size``, trimmed above twice
    it) and stay dynamic. Never lowers them; nothing where they are fixed (the commands') or the
    C library is not glibc. True if the call was made."""
    global _nudged
    libc = _LIBC
    if _nudged or not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "malloc"):
        return False
    _nudged = True
    malloc, free = libc.malloc, libc.free
    malloc.restype, malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    free.restype, free.argtypes = None, [ctypes.c_void_p]
    free(malloc(size))  # (free(NULL) is nothing, should malloc fail)
    return True
