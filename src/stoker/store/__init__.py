"""One I/O layer: Azure Blob (and S3/GCS) through obstore, and POSIX paths, behind one
interface. Nothing else in stoker opens a connection or builds a blob path."""

from __future__ import annotations

from .._redact import redact
from ._base import ObjectInfo, Store
from ._credentials import azure_auth
from ._posix import PosixStore
from ._safety import check_key, safe_path
from ._url import Location, parse_url


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
    "Location",
    "ObjectInfo",
    "PosixStore",
    "Store",
    "azure_auth",
    "check_key",
    "open_store",
    "parse_url",
    "redact",
    "safe_path",
]
