"""Server-side copies: the service copies a blob from ``src`` to ``dst`` itself, no byte
passing here.

Within one account (one endpoint): Copy Blob, which the service does at once there. Between
accounts, where Copy Blob runs in the background at the service's pace (slow for a large
blob): Put Block From URL, the blob's blocks fetched by the destination's service from the
source in parallel (``dst.concurrency`` in flight), resumable block by block, then committed
(see _blocks). The destination reaches the source with the source's SAS, a short read-only SAS
signed with its key, or an Azure AD token; a source the destination's service cannot reach (a
loopback emulator, for a destination in Azure) is relayed through a spool file instead.

Only the listed version is copied (the source's ETag as a condition on every request). Copy
Blob's result must carry the listing's Content-MD5; a block copy is given it at the commit (the
service checks each block's bytes in transit; no one can hash the whole blob without reading
it, which is what a server-side copy avoids).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from ..errors import ChecksumError, SourceChangedError, StoreError
from ._azure import BlobStore
from ._azure_errors import translated
from ._blob_list import MD5_METADATA, _md5_hex
from ._blocks import tier_of


def same_account(src: BlobStore, dst: BlobStore) -> bool:
    return src.auth.endpoint == dst.auth.endpoint


def copies_by_blocks(src: BlobStore, dst: BlobStore) -> bool:
    """Whether ``dst``'s service can fetch ``src``'s blocks itself (Put Block From URL): it
    can authorize the read (the source has a key, a SAS, or Azure AD over HTTPS) and reach it
    (the source is on HTTPS, or on the same host and port as the destination: one emulator)."""
    from urllib.parse import urlsplit

    if getattr(dst, "refuses_block_copy", False):  # (the service said it has none)
        return False
    one_host = urlsplit(src.auth.endpoint).netloc == urlsplit(dst.auth.endpoint).netloc
    return one_host or (
        src.auth.endpoint.startswith("https://") and dst.auth.endpoint.startswith("https://")
    )


async def copy_blob(
    src: BlobStore,
    dst: BlobStore,
    key: str,
    etag: str,
    md5: str | None,
    size: int | None = None,
    gate: asyncio.Semaphore | None = None,
) -> str | None:
    """Copy ``src``'s ``key`` (version ``etag``) to ``dst``'s ``key``; returns the copy's MD5.
    Between accounts (``size`` known), block by block (Put Block From URL); else Copy Blob.
    Each request holds a slot of ``gate``: the blocks of every file in a run share its slots,
    so two files do not put twice the requests in flight (the emulator timed out under that)."""
    if size is not None and not same_account(src, dst) and copies_by_blocks(src, dst):
        return await copy_by_blocks(src, dst, key, size, etag, md5, gate)
    async with gate or contextlib.nullcontext():
        return await _copy_whole(src, dst, key, etag, md5)


async def _copy_whole(
    src: BlobStore, dst: BlobStore, key: str, etag: str, md5: str | None
) -> str | None:
    """Copy Blob, waited for (see copy_blob)."""
    if not same_account(src, dst) and not src.auth.sas:  # (a source Copy Blob cannot read)
        raise NotImplementedError(f"{dst} cannot copy from {src} itself")
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
                    standard_blob_tier=tier_of(dst),  # (--tier; None: the account's default)
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


async def copy_by_blocks(
    src: BlobStore,
    dst: BlobStore,
    key: str,
    size: int,
    etag: str,
    md5: str | None,
    gate: asyncio.Semaphore | None = None,
) -> str | None:
    """Put Block From URL for each block, then Put Block List (see _blocks.copy_blocks)."""
    from azure.core.exceptions import HttpResponseError, ResourceModifiedError

    from ._blocks import copy_blocks

    where = f"copying {src}/{key} to {dst}/{key}"
    with translated(where):
        try:
            copied, _ = await copy_blocks(src, dst, key, size, etag, md5, gate=gate)
            return copied
        except HttpResponseError as exc:
            if isinstance(exc, ResourceModifiedError) or exc.status_code == 412:
                raise SourceChangedError(
                    f"{src}/{key} changed while it was being copied; re-run to copy it again"
                ) from exc
            if exc.status_code != 501 and exc.error_code != "APINotImplemented":
                raise
    # An emulator (Azurite before 3.37) or a compatible service without Put Block From URL:
    # the engine relays this blob, and the rest, through a spool file instead.
    dst.refuses_block_copy = True  # type: ignore[attr-defined]
    raise NotImplementedError(f"{dst} does not implement Put Block From URL")


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
