"""The process's C library, loaded once through ctypes (None where there is none by that name,
as on Windows): the store's writeback and syncs, and glibc's allocator thresholds, call into it."""

from __future__ import annotations

import ctypes

try:
    LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except (OSError, TypeError):
    LIBC = None
