"""Saves still under way when the interpreter exits are finished before it does."""

from __future__ import annotations

import sys
import threading
import weakref
from typing import TYPE_CHECKING

from ..errors import StokerError

if TYPE_CHECKING:
    from ._checkpointer import Checkpointer


def close_at_exit(ckpt: Checkpointer) -> None:
    """Finish ``ckpt``'s saves when the interpreter exits without ``wait()``: a script that ends
    right after its last ``save()`` must not lose it. The hook runs as threading shuts down,
    before concurrent.futures stops taking work (atexit runs too late: by then the background
    write failed with "cannot schedule new futures after interpreter shutdown")."""
    ref = weakref.ref(ckpt)

    def finish() -> None:
        live = ref()
        if live is None or live._closed:
            return
        try:
            live.close()
        except StokerError as exc:
            print(f"stoker: a checkpoint save failed as the process exited: {exc}", file=sys.stderr)

    threading._register_atexit(finish)  # type: ignore[attr-defined]
