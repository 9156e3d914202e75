"""One I/O layer: Azure Blob (and S3/GCS) through obstore, and POSIX paths, behind one
interface. Nothing else in stoker opens a connection or builds a blob path."""

from __future__ import annotations

from .._redact import redact
from ._azure_errors import quiet_identity_logs
from ._base import AccessTier, ObjectInfo, Store
from ._bwlimit import Bandwidth, parse_bwlimit
from ._copy import CopyRun, Journal, copy_object
from ._copy_down import resume_unit
from ._credentials import azure_auth
from ._download import download, fetch_ranges
from ._durable import DURABILITIES, SYNC_EVERY, Durability, default_durability, publish_synced
from ._env import adopt, store_environment
from ._loop import IOLoop, pause, run_async, run_sync
from ._posix import PosixStore, disk_error, fsync_dir
from ._retry import retry_budget_s
from ._safety import check_key, safe_path
from ._small import HELD_WHOLE, SMALL, WHOLE, WRITERS, SmallWriter
from ._spool import clear_stale
from ._unit_hasher import list_digest
from ._url import Location, is_loopback, parse_url


def open_store(
    url: str, *, block_size: int = 16 << 20, concurrency: int = 12, allow_http: bool = False
) -> Store:
    """The store for ``url`` (see ``parse_url``); credentials from the environment."""
    import os

    loc = parse_url(url)
    allow_http = allow_http or os.environ.get("STOKER_ALLOW_HTTP") == "1"
    if loc.scheme == "file":
        assert loc.path is not None
        return PosixStore(loc.path)
    if loc.scheme == "az":
        from ._azure import BlobStore

        return BlobStore(
            loc, azure_auth(loc, allow_http), block_size=block_size, concurrency=concurrency
        )
    from ._object import ObjectStore

    return ObjectStore(loc, block_size=block_size, concurrency=concurrency)


__all__ = [
    "DURABILITIES",
    "SYNC_EVERY",
    "Durability",
    "default_durability",
    "list_digest",
    "publish_synced",
    "HELD_WHOLE",
    "SMALL",
    "WHOLE",
    "WRITERS",
    "AccessTier",
    "Bandwidth",
    "CopyRun",
    "IOLoop",
    "Journal",
    "Location",
    "ObjectInfo",
    "PosixStore",
    "SmallWriter",
    "Store",
    "adopt",
    "azure_auth",
    "check_key",
    "clear_stale",
    "copy_object",
    "disk_error",
    "download",
    "fetch_ranges",
    "fsync_dir",
    "is_loopback",
    "open_store",
    "parse_bwlimit",
    "parse_url",
    "pause",
    "quiet_identity_logs",
    "redact",
    "resume_unit",
    "retry_budget_s",
    "run_async",
    "run_sync",
    "safe_path",
    "store_environment",
]
