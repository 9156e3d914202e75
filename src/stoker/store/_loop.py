"""Synchronous access to the async stores: one asyncio loop in a daemon thread.

Code that is not async (a checkpointer's threads, a dataset in a DataLoader worker) hands its
store calls to one loop, so the Azure SDK's sessions stay bound to one loop for their life.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
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
