"""A dataset's index, read from its store on first use, not when the dataset is made: making a
``StreamingDataset`` reads no network (a job can build its datasets before the network, or the
credentials, are ready, and a dataset that is never read costs nothing)."""

from __future__ import annotations

import os
from typing import Any

from ..errors import StreamError
from ..store import IOLoop, open_store, parse_url
from ._index import INDEX, DatasetIndex


class LazyIndex:
    """``get()`` reads ``remote``'s index.json once; the index travels with the object to
    DataLoader workers, so a worker of a dataset already read reads it again never."""

    def __init__(self, remote: str) -> None:
        self.remote = remote
        self._index: DatasetIndex | None = None
        self._home = os.getpid()  # the process that may open the store (see refuse_fork)

    @property
    def loaded(self) -> bool:
        return self._index is not None

    def get(self) -> DatasetIndex:
        if self._index is None:
            refuse_fork(self.remote, self._home)
            self._index = read_index(self.remote)
        return self._index

    def __getstate__(self) -> dict[str, Any]:
        # Sent to a worker process: read once here rather than once in every worker.
        self.get()
        return self.__dict__

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__ |= state | {"_home": os.getpid()}  # a fresh process: its own client


def refuse_fork(remote: str, home: int) -> None:
    """Refuse to open ``remote``'s store in a fork of process ``home``: the object store
    client's runtime (tokio) hangs in a forked child once it has run in the parent."""
    if os.getpid() != home and parse_url(remote).is_remote:
        raise StreamError(
            f"{remote}: this process is a fork of one that used the object store's "
            "client, which hangs in a fork (torch's DataLoader forks its workers): pass "
            "DataLoader(..., multiprocessing_context=ds.mp_context), a fork server, or "
            "use StreamingLoader, which does"
        )


def read_index(remote: str) -> DatasetIndex:
    store = open_store(remote)
    io = IOLoop("stoker-stream-index")
    try:
        data = io.run(store.read_all(INDEX))
        if data is None:
            raise StreamError(f"{remote} has no {INDEX}{io.run(_what_is_there(store))}")
        return DatasetIndex.from_json(data, f"{remote}/{INDEX}")
    finally:
        io.run(store.close())
        io.close()


async def _what_is_there(store: Any) -> str:
    """Why a dataset has no index: what its place holds instead, and what to do. (Listing a
    missing container raises NoContainerError, which names it.)"""
    write = "write the dataset with stoker.stream.ShardWriter or `stoker shards write`"
    async for batch in store.list():
        keys = [o.key for o in batch]
        below = [k.removesuffix(f"/{INDEX}") for k in keys if k.endswith(f"/{INDEX}")]
        if below:
            return f"; datasets below it: {', '.join(below[:3])}: point at one of those"
        if keys:
            return f"; it holds other files ({keys[0]!r}, ...): {write} from them"
    return f"; nothing is there: {write}"
