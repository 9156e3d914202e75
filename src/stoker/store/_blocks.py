"""Block blobs built block by block, resumably: uploads of large files (Put Block) and copies
from another account (Put Block From URL: the service fetches each block from the source
itself, no byte passing through this machine).

Each block's ID is derived from the blob's key, the block's offset and length, and the
source's version (a local file's mtime and size, a source blob's ETag), so a re-run after an
interrupted upload or copy asks the service which blocks it already holds uncommitted (Azure
keeps them about a week) and sends only the others; a changed source has other IDs, and its
old blocks are dropped when the new list is committed. The commit (Put Block List) sets the
blob's Content-MD5, Content-Type and access tier in the same request, so a blob never exists
without them.

Throttled by the run's ``--bwlimit`` (Store.limiter): each block takes its size before it is
sent (a copy by the service moves no byte here and takes nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import mimetypes
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ._azure_errors import translate
from ._bwlimit import take

if TYPE_CHECKING:
    from ._azure import BlobStore

MAX_BLOCKS = 50_000  # blocks in one block blob (Put Block List)
DEFAULT_TYPE = "application/octet-stream"


def content_type_of(store: Any, key: str) -> str:
    """``--content-type`` if given, else a guess from the key's extension (``mimetypes``),
    else application/octet-stream."""
    if store.content_type:
        return str(store.content_type)
    return mimetypes.guess_type(key, strict=False)[0] or DEFAULT_TYPE


def block_id(key: str, version: str, offset: int, length: int) -> str:
    """A block ID (32 hex digits: every ID of a blob has one length; the SDK base64-encodes
    it) that names this block of this version of the source, and nothing else."""
    digest = hashlib.blake2b(f"{key}\0{version}\0{offset}\0{length}".encode(), digest_size=16)
    return digest.hexdigest()


def spans(size: int, block_size: int) -> list[tuple[int, int]]:
    """(offset, length) of each block; a blob that would need more than MAX_BLOCKS blocks gets
    larger ones."""
    block = max(block_size, -(-size // MAX_BLOCKS))
    return [(offset, min(block, size - offset)) for offset in range(0, size, block)]


async def uncommitted(blob: Any) -> dict[str, int]:
    """The blob's uncommitted blocks (ID -> size): what an interrupted run staged. None when
    the blob does not exist yet is an empty answer, not an error."""
    from azure.core.exceptions import ResourceNotFoundError

    try:
        _, blocks = await blob.get_block_list("uncommitted")
    except ResourceNotFoundError:
        return {}
    return {block.id: block.size for block in blocks}


def _settings(store: Any, key: str, md5: str | None, content_type: str | None = None) -> Any:
    from azure.storage.blob import ContentSettings

    return ContentSettings(
        content_type=store.content_type or content_type or content_type_of(store, key),
        content_md5=bytearray.fromhex(md5) if md5 else None,
    )


async def _commit(
    store: Any,
    blob: Any,
    key: str,
    ids: list[str],
    md5: str | None,
    content_type: str | None = None,
) -> None:
    from azure.storage.blob import BlobBlock

    await blob.commit_block_list(
        [BlobBlock(block_id=i) for i in ids],
        content_settings=_settings(store, key, md5, content_type),
        standard_blob_tier=tier_of(store),
    )


def tier_of(store: Any) -> Any:
    from azure.storage.blob import StandardBlobTier

    return StandardBlobTier(store.tier) if store.tier else None


async def _in_parallel(jobs: Callable[[], Any], limit: int) -> None:
    """Run the coroutines ``jobs()`` yields, ``limit`` at a time, in the order given; the
    first failure cancels the rest and is raised. A job is only asked for once a slot is
    free, so what it holds (a block's bytes) is bounded by ``limit``."""
    slots = asyncio.Semaphore(limit)
    tasks: set[asyncio.Task] = set()
    failed: list[BaseException] = []

    def done(task: asyncio.Task) -> None:
        tasks.discard(task)
        slots.release()
        if not task.cancelled() and task.exception() is not None:
            failed.append(task.exception())  # type: ignore[arg-type]

    pending = jobs()
    try:
        async for job in pending:
            await slots.acquire()
            if failed:
                slots.release()
                if job is not None:
                    job.close()  # (never started)
                break
            if job is None:  # nothing to send for this block
                slots.release()
                continue
            task = asyncio.create_task(job)
            tasks.add(task)
            task.add_done_callback(done)
        if tasks:
            await asyncio.gather(*list(tasks), return_exceptions=True)
    finally:
        await pending.aclose()
        if tasks:  # (cancelled, Ctrl-C: the blocks in flight stop; what was staged stays)
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*list(tasks), return_exceptions=True)
    if failed:
        raise failed[0]


class Sent:
    """What one block upload or copy sent and skipped (for tests and benchmarks)."""

    def __init__(self) -> None:
        self.sent = self.resumed = 0


def _resumed(store: Any) -> dict[str, int]:
    """Per key, the bytes the last upload of it found staged already (see take_resumed)."""
    return store.__dict__.setdefault("_resumed_bytes", {})


def take_resumed(store: Any, key: str) -> int:
    """The bytes of ``key``'s last upload that an earlier run had sent (its staged blocks), and
    forget them: the engine counts only the bytes a run moved."""
    return _resumed(store).pop(key, 0)


class _Slots:
    """The slots of a shared gate this call holds, all given back however it ends."""

    def __init__(self, gate: asyncio.Semaphore | None) -> None:
        self.gate, self.held = gate, 0

    async def take(self) -> None:
        if self.gate is not None:
            await self.gate.acquire()
            self.held += 1

    def give(self) -> None:
        if self.gate is not None and self.held:
            self.held -= 1
            self.gate.release()

    def give_all(self) -> None:
        while self.held:
            self.give()


async def upload_file(
    store: BlobStore,
    key: str,
    source: Path,
    size: int,
    md5: str | None = None,
    *,
    gate: asyncio.Semaphore | None = None,
) -> tuple[str, Sent]:
    """Upload ``source`` as ``key`` in blocks, ``store.concurrency`` in flight, read and
    MD5-hashed in one pass in file order; blocks an earlier run staged (same ID and length)
    are read and hashed but not sent again. Returns the MD5 set on the blob. With ``gate``
    (the run's requests), a block takes a slot before it is read and gives it back once sent:
    the run's files together hold ``--concurrency`` blocks, where each file held its own
    (two files of 32 blocks of 8 MiB peaked at 875 MiB)."""
    blob = store._sdk().get_blob_client(store.loc.prefix + key)
    st = os.stat(source)
    version = f"{st.st_mtime_ns}:{st.st_size}"
    blocks = spans(size, store.block_size)
    ids = [block_id(key, version, offset, length) for offset, length in blocks]
    hasher = None if md5 else hashlib.md5()
    sent = Sent()
    where = f"writing {store}/{key}"
    try:
        staged = await uncommitted(blob)
        with open(source, "rb", buffering=0) as f:

            def read(length: int) -> bytes:
                data = f.read(length)
                if len(data) != length:
                    raise StoreError(
                        f"cannot read {source}: it is shorter than when it was listed; "
                        "re-run to copy it again"
                    )
                if hasher is not None:
                    hasher.update(data)
                return data

            slots = _Slots(gate)

            async def put(bid: str, data: bytes) -> None:
                try:
                    await take(store.limiter, len(data))
                    await blob.stage_block(bid, data, length=len(data))
                    sent.sent += len(data)
                finally:
                    slots.give()

            async def jobs() -> Any:
                for (_, length), bid in zip(blocks, ids, strict=True):
                    if staged.get(bid) == length and hasher is None:
                        await asyncio.to_thread(f.seek, length, os.SEEK_CUR)
                        sent.resumed += length
                        yield None
                        continue
                    await slots.take()
                    data = await asyncio.to_thread(read, length)
                    if staged.get(bid) == length:
                        slots.give()
                        sent.resumed += length
                        yield None
                    else:
                        yield put(bid, data)

            try:
                await _in_parallel(jobs, store.concurrency)
            finally:
                slots.give_all()  # (a block read but never sent: the first failure stopped it)
        md5 = md5 or hasher.hexdigest()  # type: ignore[union-attr]
        await _commit(store, blob, key, ids, md5)
        if sent.resumed:
            _resumed(store)[key] = sent.resumed
    except StoreError:
        raise
    except Exception as exc:
        raise translate(exc, where) from exc
    return md5, sent


async def put_small(store: BlobStore, key: str, data: bytes) -> None:
    """One Put Blob through the SDK, with Content-MD5, Content-Type and the access tier (for
    a run with ``--tier``: obstore's put cannot set a tier)."""
    blob = store._sdk().get_blob_client(store.loc.prefix + key)
    try:
        await blob.upload_blob(
            data,
            overwrite=True,
            content_settings=_settings(store, key, hashlib.md5(data).hexdigest()),
            standard_blob_tier=tier_of(store),
        )
    except Exception as exc:
        raise translate(exc, f"writing {store}/{key}") from exc


async def source_url(src: BlobStore, key: str) -> tuple[str, dict[str, Any]]:
    """The URL the destination's service reads ``src``'s ``key`` from, and the keyword
    arguments that authorize it: the source's SAS; a short read-only SAS signed with the
    source's account key; or an Azure AD token (x-ms-copy-source-authorization). The URL
    carries a secret: it is never logged or shown."""
    import datetime as dt

    from .._redact import remember

    blob = src._sdk().get_blob_client(src.loc.prefix + key)
    auth = src.auth
    if auth.sas:
        return f"{blob.url.split('?')[0]}?{auth.sas}", {}
    if auth.key:
        from azure.storage.blob import BlobSasPermissions, generate_blob_sas

        sas = generate_blob_sas(
            auth.account,
            src.loc.bucket,
            src.loc.prefix + key,
            account_key=auth.key,
            permission=BlobSasPermissions(read=True),
            expiry=dt.datetime.now(dt.UTC) + dt.timedelta(hours=6),
        )
        remember(sas)
        return f"{blob.url.split('?')[0]}?{sas}", {}
    from ._blob_list import STORAGE_SCOPE

    token = await src._credential().get_token(STORAGE_SCOPE)
    remember(token.token)
    return blob.url, {"source_authorization": f"Bearer {token.token}"}


async def copy_blocks(
    src: BlobStore,
    dst: BlobStore,
    key: str,
    size: int,
    etag: str,
    md5: str | None,
    on_block: Callable[[int], Awaitable[None] | None] | None = None,
    gate: asyncio.Semaphore | None = None,
) -> tuple[str | None, Sent]:
    """Have ``dst``'s service copy ``src``'s ``key`` (version ``etag``) block by block with
    Put Block From URL, ``dst.concurrency`` blocks in flight (each also holding a slot of
    ``gate``, when given: the run's requests), each read from the source only
    while it still has that ETag; blocks an earlier run staged are not copied again. The
    commit carries the source's Content-MD5. Returns it, and what was copied and resumed."""
    blob = dst._sdk().get_blob_client(dst.loc.prefix + key)
    blocks = spans(size, dst.block_size)
    ids = [block_id(key, f"blob:{etag}", offset, length) for offset, length in blocks]
    sent = Sent()
    url, auth = await source_url(src, key)
    # The source's Content-Type goes with the copy (unless --content-type says otherwise), as
    # Copy Blob carries it.
    props = await src._sdk().get_blob_client(src.loc.prefix + key).get_blob_properties()
    carried = props.content_settings.content_type

    async def put(bid: str, offset: int, length: int) -> None:
        async with gate or contextlib.nullcontext():
            await blob.stage_block_from_url(
                bid,
                url,
                source_offset=offset,
                source_length=length,
                # (the SDK takes no source condition here: the header is the REST API's own)
                headers={"x-ms-source-if-match": f'"{etag}"'},
                **auth,
            )
        sent.sent += length
        if on_block is not None:
            outcome = on_block(length)
            if outcome is not None:
                await outcome

    staged = await uncommitted(blob)

    async def jobs() -> Any:
        for (offset, length), bid in zip(blocks, ids, strict=True):
            if staged.get(bid) == length:
                sent.resumed += length
                yield None
            else:
                yield put(bid, offset, length)

    await _in_parallel(jobs, dst.concurrency)
    await _commit(dst, blob, key, ids, md5, carried)
    return md5, sent
