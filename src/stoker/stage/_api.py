"""The async twins of ``stage``, ``verify`` and ``cache_pull``, for code that is async already.

Each takes exactly its sync twin's arguments and returns the same result. The work runs on a
private event loop in a thread of its own (``store._loop.run_async``), so the caller's loop goes
on serving while files are copied and hashed; cancelling the await cancels the copy as Ctrl-C
does: what finished is kept, and the same call resumes. (The sync forms work inside a running
loop too, a notebook's: they block it until done.)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from ..store import run_async
from ._cache import cache_pull
from ._stage import stage
from ._verify import verify

P = ParamSpec("P")
T = TypeVar("T")


def _async_twin(fn: Callable[P, T]) -> Callable[P, Coroutine[Any, Any, T]]:
    async def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return await run_async(fn, *args, **kwargs)

    twin.__name__ = twin.__qualname__ = f"{fn.__name__}_async"
    twin.__module__ = "stoker.stage"
    twin.__doc__ = f"The async twin of ``{fn.__name__}``.\n\n{fn.__doc__}"
    twin.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    return twin


stage_async = _async_twin(stage)
verify_async = _async_twin(verify)
cache_pull_async = _async_twin(cache_pull)
