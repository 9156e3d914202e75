"""A test that blocks (a FIFO opened, a read without end) fails in ``seconds`` instead of hanging
the run: SIGALRM interrupts the blocked system call in the main thread."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def alarm(seconds: int) -> Iterator[None]:
    def _hung(signum: int, frame: object) -> None:
        raise TimeoutError("blocked: the input was opened or read without end")

    old = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
