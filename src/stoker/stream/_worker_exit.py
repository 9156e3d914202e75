"""DataLoader workers that end with the training process that started them."""

from __future__ import annotations

import multiprocessing
import os
import select
import threading

_WATCHING: list[int] = []  # the training process this worker watches, once watched


def exit_with_training_process() -> None:
    """End this DataLoader worker as soon as the training process that started it is gone.
    torch's own check is not enough: it watches the worker's parent, which for a worker
    started by a fork server is the fork server, kept alive by the workers themselves; and a
    forked worker whose queue is full waits forever at exit for a reader that is dead. After a
    kill -9 of the training process (the OOM killer, a preempted node) the workers lived on,
    holding memory and cached shards, a set per restart."""
    parent = multiprocessing.parent_process()  # the process that started us, by any method
    if parent is None or _WATCHING:
        return
    _WATCHING.append(parent.pid)
    try:
        pidfd = os.pidfd_open(parent.pid)  # readable once that very process exits
    except ProcessLookupError:
        os._exit(1)
    except OSError:  # a kernel before 5.3: torch's check alone, as before
        return

    def watch() -> None:
        select.select([pidfd], [], [])
        os._exit(1)

    threading.Thread(target=watch, name="stoker-exit-with-training", daemon=True).start()
