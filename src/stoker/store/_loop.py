"""Synchronous access to the async stores: one asyncio loop in a daemon thread.

Code that is not async (a checkpointer's threads, a dataset in a DataLoader worker) hands its
store calls to one loop, so the Azure SDK's sessions stay bound to one loop for their life.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class IOLoop:
    """One asyncio loop in a daemon thread; ``run`` blocks the calling thread on a coroutine."""

    def __init__(self, name: str = "stoker-io") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)
        if not self._thread.is_alive():
            # A loop left open warns (ResourceWarning) whenever it is collected: that warning
            # then lands inside whatever the program is doing, e.g. a test's pytest.warns.
            self.loop.close()


# ------------------------------------------------------------------ the public API's sync and async
# stoker.stage / verify / cache_pull are sync functions that run one coroutine each. run_sync runs
# it where it is called, or, inside a running event loop (a notebook, an async web handler), on a
# private loop in a thread of its own: asyncio.run would refuse there, and the copy's loop must not
# be the caller's (the engine sets its loop's default executor, and blocks it with file I/O).
# run_async is the twin for async code: the sync function in a thread of its own, awaited;
# cancelling the await cancels the copy's coroutine, as Ctrl-C does (what finished is kept).

_here = threading.local()


class _Cancel:
    """Reaches the coroutine ``run_sync`` runs in one worker thread, from the awaiting task."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cancelled = False
        self.event = threading.Event()  # set with cancelled: ends a pause() at once
        self.running: tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]] | None = None

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True
            self.event.set()
            if self.running is not None:
                loop, task = self.running
                loop.call_soon_threadsafe(task.cancel)


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop where it is installed (not on Windows), else asyncio's: each
    object's request is a few hand-overs between obstore's threads and the loop, and uvloop's
    cost less CPU (docs/stage-cpu-notes.md)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on ``new_loop`` (Ctrl-C cancels ``coro``, as there)."""
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coro)


def _run_here(coro: Coroutine[Any, Any, T]) -> T:
    cancel: _Cancel | None = getattr(_here, "cancel", None)
    if cancel is None:
        return _run(coro)

    async def watched() -> T:
        with cancel.lock:
            if cancel.cancelled:
                raise asyncio.CancelledError
            cancel.running = (asyncio.get_running_loop(), asyncio.current_task())  # type: ignore[assignment]
        try:
            return await coro
        finally:
            with cancel.lock:
                cancel.running = None

    return _run(watched())


def _in_thread(fn: Callable[..., T], args: tuple, kwargs: dict, cancel: _Cancel | None) -> Any:
    """``fn(*args, **kwargs)`` in a new thread; a Future for its outcome."""
    import concurrent.futures

    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def work() -> None:
        _here.cancel = cancel
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
            done.set_exception(exc)

    threading.Thread(target=work, name="stoker-api", daemon=True).start()
    return done


def pause(seconds: float) -> None:
    """``time.sleep`` for a wait of the public API outside its coroutine (cache_pull waiting for
    another pod): in an async twin's thread, cancelling the twin ends it (CancelledError)."""
    cancel: _Cancel | None = getattr(_here, "cancel", None)
    if cancel is None:
        time.sleep(seconds)
    elif cancel.event.wait(seconds):
        raise asyncio.CancelledError


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end and return its result, from plain code or from inside a running
    event loop (on a private loop in a thread of its own; the caller's thread waits)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_here(coro)
    return _in_thread(_run_here, (coro,), {}, None).result()


async def run_async(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """The async twin of a sync API function that runs its work through ``run_sync``: ``fn``
    in a thread of its own (the caller's loop goes on); cancelling this cancels the work."""
    cancel = _Cancel()
    outcome = asyncio.wrap_future(_in_thread(fn, args, kwargs, cancel))
    try:
        return await asyncio.shield(outcome)
    except asyncio.CancelledError:
        cancel.cancel()
        # The work stops at its next await (or pause) and tidies up (stores closed, the
        # manifest kept); wait for that, so nothing of it runs on after the caller was told
        # it is cancelled. Its own outcome (CancelledError, as a rule) is taken, not logged.
        await asyncio.wait([outcome])
        if not outcome.cancelled():
            outcome.exception()
        raise
