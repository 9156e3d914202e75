"""Read ahead on a thread: the training loop takes batches that are already there."""

from __future__ import annotations

import atexit
import queue
import threading
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

_END = object()
_RUNNING: weakref.WeakKeyDictionary[threading.Thread, threading.Event] = weakref.WeakKeyDictionary()


@atexit.register
def _stop_all() -> None:
    """A loop left mid-epoch must not leave a thread inside torch while the interpreter exits
    (torch's thread pool aborts the process: "terminate called without an active exception")."""
    for thread, stop in list(_RUNNING.items()):
        stop.set()
        thread.join(timeout=10)


def ahead(items: Iterable[Any], depth: int) -> Iterator[Any]:
    """``items``, produced up to ``depth`` ahead on a thread. An error on that thread is raised
    here at the point it happened; closing this iterator stops the thread."""
    ready: queue.Queue[Any] = queue.Queue(depth)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            put((_END, exc))
            return
        put((_END, None))

    thread = threading.Thread(target=produce, name="stoker-read-ahead", daemon=True)
    _RUNNING[thread] = stop
    thread.start()
    try:
        while True:
            item, error = ready.get()
            if error is not None:
                raise error
            if item is _END:
                return
            yield item
            del item  # the consumer may free the batch before the next wait
    finally:
        stop.set()
        thread.join()
