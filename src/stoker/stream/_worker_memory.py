"""A DataLoader worker's memory: freed memory kept for reuse, inherited objects left untouched.

Reader threads allocate each sample's bytes in their own malloc arena, and the worker frees them
once its batch is collated. glibc then gives the free top of each arena back to the kernel
(above 128 KiB, its default), so the next group of samples faults in fresh, zeroed pages: on a
VM that hands freed memory back to its host, a slow fault. A worker exists only to load data, so
it keeps what it freed (and serves allocations up to ``MMAP_BYTES`` from the heap rather than
from fresh maps), for less CPU a sample (docs/stream-notes.md). The objects a forked worker
inherited are frozen out of the garbage collector (``freeze_inherited_objects``).
"""

from __future__ import annotations

import functools
import gc

from .._malloc import keep_freed_memory as _keep_freed_memory

KEEP_BYTES = 256 << 20  # free memory at an arena's top kept, not returned to the kernel
MMAP_BYTES = 16 << 20  # allocations below this come from the heap (and its freed memory)


@functools.cache
def keep_freed_memory() -> bool:
    """Set this process's malloc to keep freed memory; False where there is no glibc."""
    return _keep_freed_memory(mapped_above=MMAP_BYTES, trimmed_above=KEEP_BYTES)


@functools.cache
def freeze_inherited_objects() -> None:
    """Take what this worker inherited from the training process out of the garbage collector's
    reach (``gc.freeze``, once per process). A full collection in a forked worker otherwise
    walks every object the training process holds (torch, the model, the imports) and writes to
    each one's header, copying every page it touches, and stalls the batch it interrupts
    (figures: docs/stream-notes.md). Objects inherited are kept for the worker's life; it frees
    its own as before."""
    gc.freeze()
