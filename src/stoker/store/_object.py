"""S3 and GCS, through obstore, with credentials from the usual environment variables. They
come for free with the client; stoker is Azure-first and tests them only by construction."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from ._azure_errors import translate
from ._base import LIST_BATCH, ObjectInfo, Store
from ._retry import RETRY
from ._url import Location


class ObjectStore(Store):
    def __init__(self, loc: Location, *, block_size: int = 16 << 20, concurrency: int = 12) -> None:
        from obstore.store import from_url

        self.loc, self.block_size, self.concurrency = loc, block_size, concurrency
        self.service = {"s3": "s3", "gs": "gcs"}.get(loc.scheme, loc.scheme)
        url = f"{loc.scheme}://{loc.bucket}/{loc.prefix}"
        self._store = from_url(url, retry_config=RETRY)  # type: ignore[call-overload]

    def __str__(self) -> str:
        return str(self.loc)

    async def list(self) -> AsyncIterator[list[ObjectInfo]]:  # type: ignore[override]
        import obstore

        try:
            async for chunk in obstore.list(self._store, chunk_size=LIST_BATCH):
                yield [
                    ObjectInfo(
                        m["path"],
                        m["size"],
                        str(m["e_tag"] or "").strip('"'),
                        None,
                        m["last_modified"].timestamp() if m.get("last_modified") else None,
                    )
                    for m in chunk
                ]
        except Exception as exc:
            raise translate(exc, f"listing {self}") from exc

    async def head(self, key: str) -> ObjectInfo | None:
        import obstore

        try:
            meta = await obstore.head_async(self._store, key)
        except FileNotFoundError:
            return None
        return ObjectInfo(key, meta["size"], str(meta["e_tag"] or "").strip('"'))

    async def read_range(
        self, key: str, start: int, end: int, etag: str | None = None
    ) -> memoryview:
        import obstore

        if start >= end:  # (obstore refuses a ranged read of nothing)
            return memoryview(b"")
        try:
            return memoryview(await obstore.get_range_async(self._store, key, start=start, end=end))
        except Exception as exc:
            raise translate(exc, f"reading {self}/{key}") from exc

    async def write_file(
        self,
        key: str,
        source: Path,
        size: int,
        md5: str | None = None,
        *,
        gate: asyncio.Semaphore | None = None,
    ) -> None:
        import obstore

        try:
            async with gate or contextlib.nullcontext():  # (one slot: obstore's parts are its own)
                await obstore.put_async(
                    self._store,
                    key,
                    source,
                    chunk_size=self.block_size,
                    max_concurrency=self.concurrency,
                )
        except Exception as exc:
            raise translate(exc, f"writing {self}/{key}") from exc

    async def write_bytes(self, key: str, data: bytes) -> None:
        import obstore

        try:
            await obstore.put_async(self._store, key, data)
        except Exception as exc:
            raise translate(exc, f"writing {self}/{key}") from exc

    async def create_bytes(self, key: str, data: bytes) -> bool:
        """A conditional put (S3 If-None-Match: *, GCS ifGenerationMatch=0)."""
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        try:
            await obstore.put_async(self._store, key, data, mode="create")
        except (AlreadyExistsError, PreconditionError):
            return False
        except Exception as exc:
            raise translate(exc, f"writing {self}/{key}") from exc
        return True

    async def delete(self, key: str) -> None:
        import obstore

        await obstore.delete_async(self._store, key)
