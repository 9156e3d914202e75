"""Service copy: the destination's service copies the object from the source itself, with no
byte passing through this machine (Blob to Blob: see _blob_copy)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._base import Store

if TYPE_CHECKING:
    from ._copy import CopyRun


async def service_copy(
    src: Store, dst: Store, key: str, size: int, etag: str, md5: str | None, run: CopyRun
) -> str | None:
    """Only where ``dst.copies_from(src)``; raises NotImplementedError, before anything is
    counted, when the service cannot copy this one after all (the caller relays it)."""
    # (each block's request takes a slot of the run's requests, not the file)
    digest = await dst.copy_from(src, key, etag, md5, size, gate=run.requests)
    run.moved(size)
    run.progress(size)
    return digest
