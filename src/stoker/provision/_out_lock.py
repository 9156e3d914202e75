"""One ``stoker provision`` at a time per ``--out`` folder, and a write Ctrl-C cannot split.

Two runs into one folder would each find it empty (or their own), then write their six files
in turn: a mix of two deployments' files under one record. So the folder is locked (an
exclusive ``flock`` on the folder itself, which the kernel drops when the process ends however
it ends) from the first look at it to the last file written, and a second run is refused.

The six files are each written whole; a SIGINT or SIGTERM between two of them would leave the
new ``main.json`` beside the old record. ``signals_deferred`` holds those signals back for the
few milliseconds the files take and delivers them once all six are in place.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

from .. import _flock
from .._redact import printable
from ..errors import ProvisionError


@contextlib.contextmanager
def out_locked(out: Path) -> Iterator[None]:
    """Hold ``out`` (made if missing, removed again if the run refuses and it is still empty)
    for this process; another holder is a ProvisionError naming the folder."""
    shown = printable(str(out), lines=False)
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd = os.open(out, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        raise ProvisionError(
            f"--out {shown}: cannot write the deployment there ({exc.strerror or exc}); "
            "give a folder this user can write"
        ) from exc
    try:
        try:
            _flock.lock_fd(fd)  # (False without flock: nothing to hold, as before)
        except BlockingIOError:
            raise ProvisionError(
                f"--out {shown}: another stoker provision is writing this folder now; "
                "wait for it to finish (its files are then whole) and run again"
            ) from None
        ok = False
        try:
            yield
            ok = True
        finally:
            if made and not ok:
                with contextlib.suppress(OSError):  # (only if still empty)
                    out.rmdir()
    finally:
        os.close(fd)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM arriving inside the block are delivered when it ends (in the main
    thread only, where Python handles signals; elsewhere the block runs as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    kinds = (signal.SIGINT, signal.SIGTERM)
    old = {s: signal.signal(s, lambda signum, frame: got.append(signum)) for s in kinds}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        for s in dict.fromkeys(got):
            signal.raise_signal(s)
