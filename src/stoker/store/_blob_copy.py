"""Copy Blob: the service copies a blob from ``src`` to ``dst`` itself, no byte passing here.

Only the listed version is copied (the source's ETag as a condition), a copy the service still
runs in the background is waited for, and the copy's Content-MD5 (or MD5 metadata) is checked
against the listing's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import ChecksumError, SourceChangedError, StoreError
from ._azure import MD5_METADATA, BlobStore, _md5_hex
from ._azure_errors import translated


async def copy_blob(
    src: BlobStore, dst: BlobStore, key: str, etag: str, md5: str | None
) -> str | None:
    """Copy ``src``'s ``key`` (version ``etag``) to ``dst``'s ``key``; returns the copy's MD5."""
    from azure.core import MatchConditions
    from azure.core.exceptions import HttpResponseError, ResourceModifiedError

    source = src._sdk().get_blob_client(src.loc.prefix + key)
    blob = dst._sdk().get_blob_client(dst.loc.prefix + key)
    where = f"copying {src}/{key} to {dst}/{key}"
    with translated(where):
        for attempt in range(2):
            try:
                answer = await blob.start_copy_from_url(
                    source.url,
                    source_etag=f'"{etag}"',
                    source_match_condition=MatchConditions.IfNotModified,
                )
                break
            except HttpResponseError as exc:
                if isinstance(exc, ResourceModifiedError) or exc.status_code == 412:
                    raise SourceChangedError(
                        f"{src}/{key} changed while it was being copied"
                    ) from exc
                # A copy a killed run started is still under way: the service refuses
                # another until it ends.
                if attempt or exc.error_code != "PendingCopyOperation":
                    raise
                await _no_pending_copy(blob)
        if answer.get("copy_status") != "success":
            await _no_pending_copy(blob)
        props = await blob.get_blob_properties()
    if props.copy.status not in (None, "success"):
        raise StoreError(f"{where}: the service's copy ended {props.copy.status}")
    settings = props.content_settings.content_md5
    copied = bytes(settings).hex() if settings else _md5_hex(props.metadata.get(MD5_METADATA))
    if md5 and copied != md5:
        raise ChecksumError(
            f"{where}: the copy's Content-MD5 {copied} is not the source's {md5}; "
            "re-run to copy it again"
        )
    return copied


async def _no_pending_copy(blob: Any, longest_poll_s: float = 5.0) -> None:
    """Wait until ``blob`` has no copy under way (none, or one that ended)."""
    from azure.core.exceptions import ResourceNotFoundError

    delay = 0.05
    while True:
        try:
            props = await blob.get_blob_properties()
        except ResourceNotFoundError:
            return
        if props.copy.status != "pending":
            return
        await asyncio.sleep(delay)
        delay = min(2 * delay, longest_poll_s)
