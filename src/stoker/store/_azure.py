"""Azure Blob through obstore (the fast Rust client) for data, and the Azure SDK for control:
listing (obstore's drops Content-MD5 and metadata, which verification needs), container
creation, Content-MD5 on a block upload, Copy Blob. The listing goes through a pipeline of
azure-core's public parts (its retries the SDK's calls' own, on obstore's budget), signed as the
SDK signs: no call reaches into the SDK's private clients."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import AccessDeniedError, NoContainerError, SourceChangedError, StoreError
from ._azure_errors import DENIED_HINT, quiet_identity_logs, translate, translated
from ._base import ObjectInfo, Store
from ._blob_list import (
    API_VERSION,
    STORAGE_SCOPE,
    _etag,
    _list_url,
    _parse_list_page,
)
from ._bwlimit import take
from ._credentials import AzureAuth
from ._reach import check_answers
from ._retry import RETRY, sdk_retry_policy
from ._url import _SPECIAL_CONTAINERS, CONTAINER_NAME, Location

STREAM_CHUNK = 1 << 20


class BlobStore(Store):
    service = "azure-blob"

    def __init__(
        self, loc: Location, auth: AzureAuth, *, block_size: int = 16 << 20, concurrency: int = 12
    ) -> None:
        from obstore.store import AzureStore

        if not CONTAINER_NAME.fullmatch(loc.bucket) and loc.bucket not in _SPECIAL_CONTAINERS:
            raise StoreError(
                f"{loc}: {loc.bucket!r} is not a container name: use 3-63 lowercase letters, "
                "digits and single hyphens, starting and ending with a letter or digit"
            )
        self.loc, self.auth = loc, auth
        self.block_size, self.concurrency = block_size, concurrency
        config: dict[str, Any] = {"account_name": auth.account, "endpoint": auth.endpoint}
        if auth.key:
            config["account_key"] = auth.key
        elif auth.sas:
            config["sas_key"] = auth.sas
        options: dict[str, Any] = {
            "allow_http": auth.endpoint.startswith("http://"),
            "timeout": timedelta(minutes=5),
            "connect_timeout": timedelta(seconds=10),
        }
        provider = None
        if auth.uses_aad:
            from azure.identity import DefaultAzureCredential
            from obstore.auth.azure import AzureCredentialProvider

            quiet_identity_logs()
            provider = AzureCredentialProvider(credential=DefaultAzureCredential())
        self._store = AzureStore(
            loc.bucket,
            prefix=loc.prefix.rstrip("/") or None,
            config=config,
            client_options=options,  # type: ignore[arg-type]
            retry_config=RETRY,  # type: ignore[arg-type]
            credential_provider=provider,
        )
        self._container: Any = None
        self._lister: Any = None  # where List Blobs and Create Container go (_blob_control)
        self._aad: Any = None  # the listing's Azure AD credential, checked once before use
        self._direct: Any = None  # ranged GETs on threads (_direct_get), made on first use

    def __str__(self) -> str:
        return str(self.loc)

    def direct_gets(self) -> Any:
        """Ranged GETs through ``http.client`` on threads (_direct_get), where it can send
        them itself: an account key or a SAS, no proxy, no ``--bwlimit`` (which takes each piece
        on the loop). Azure AD and proxies keep obstore's streams."""
        from ._reach import _through_proxy

        parts = urlsplit(self.auth.endpoint)
        if self.auth.uses_aad or self.limiter is not None:
            return None
        if _through_proxy(parts.scheme, parts.hostname or ""):
            return None
        if self._direct is None:
            from ._direct_get import DirectGets, pool_size

            self._direct = DirectGets(
                self.auth, self.loc.bucket, self.loc.prefix, pool_size(self.concurrency)
            )
        return self._direct

    def _credential(self) -> Any:
        if self.auth.key:
            return {"account_name": self.auth.account, "account_key": self.auth.key}
        if self.auth.sas:
            return self.auth.sas
        if self._aad is None:
            from azure.identity.aio import DefaultAzureCredential

            quiet_identity_logs()
            self._aad = DefaultAzureCredential()
        return self._aad

    def _control(self) -> Any:
        """Where List Blobs and Create Container are sent (see _blob_control)."""
        if self._lister is None:
            from ._blob_control import control_for

            self._lister = control_for(self.auth, self._credential)
        return self._lister

    def _sdk(self) -> Any:
        if self._container is None:
            from azure.storage.blob.aio import ContainerClient

            credential = self._credential()
            self._container = ContainerClient(
                self.auth.endpoint,
                self.loc.bucket,
                credential=credential,
                api_version=API_VERSION,
                retry_policy=sdk_retry_policy(),
            )
        return self._container

    async def list(self) -> AsyncIterator[list[ObjectInfo]]:  # type: ignore[override]
        """List Blobs pages (sent as _blob_control sends them), each page parsed with
        ElementTree: the SDK's own model deserialization costs ~0.4 ms of CPU per blob, ~1
        CPU-hour for ten million keys."""
        from urllib.parse import quote

        control = self._control()
        url = f"{self.auth.endpoint}/{quote(self.loc.bucket, safe='$')}"
        url += f"?{self.auth.sas}" if self.auth.sas else ""
        marker = ""
        with translated(f"listing {self}"):
            await self._ready(f"listing {self}")
            while True:
                answer = await control.send("GET", _list_url(url, self.loc.prefix, marker))
                body = answer.body
                if answer.status != 200:
                    code = answer.headers.get("x-ms-error-code", "")
                    message = f"listing {self}: HTTP {answer.status} {code}".rstrip()
                    if answer.status in (401, 403):
                        raise AccessDeniedError(message + DENIED_HINT)
                    if code == "ContainerNotFound":
                        raise NoContainerError(
                            f"{message}: there is no container {self.loc.bucket!r} at "
                            f"{self.auth.endpoint}; check the URL"
                        )
                    raise StoreError(message)
                batch, marker = _parse_list_page(body, len(self.loc.prefix))
                if batch:
                    yield batch
                if not marker:
                    return

    async def _ready(self, what: str) -> None:
        """Before a verb's first call: something answers at the endpoint, and with Azure AD, a
        token (first: with none to be had, whether the endpoint answers does not matter).
        Without either, the retries take ~90 s to say so."""
        if self._aad is not None:
            await self._aad.get_token(STORAGE_SCOPE)
        await check_answers(self.auth.endpoint, what)

    async def create_root(self) -> bool:
        """Create the container if it is missing. Credentials that may not (a container SAS)
        leave it to the writes, which fail at once, with one error, if it is missing. Sent
        as the listing is: the storage SDK (and aiohttp) cost ~0.4 CPU s to import,
        in every run into Blob, even one with nothing to copy."""
        from urllib.parse import quote

        what = f"creating container {self.loc.bucket} at {self.auth.endpoint}"
        url = f"{self.auth.endpoint}/{quote(self.loc.bucket, safe='$')}?restype=container"
        url += f"&{self.auth.sas}" if self.auth.sas else ""
        with translated(what):
            await self._ready(what)
            answer = await self._control().send("PUT", url)
        status, code = answer.status, answer.headers.get("x-ms-error-code", "")
        if status == 201:
            return True
        if status == 403 or (status == 409 and code == "ContainerAlreadyExists"):
            return False
        message = f"{what}: HTTP {status} {code}".rstrip()
        if status == 401:
            raise AccessDeniedError(message + DENIED_HINT)
        raise StoreError(message)

    async def head(self, key: str) -> ObjectInfo | None:
        import obstore

        await check_answers(self.auth.endpoint, f"reading {self}/{key}")
        try:
            meta = await obstore.head_async(self._store, key)
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise translate(exc, f"reading {self}/{key}") from exc
        return ObjectInfo(key, meta["size"], _etag(meta))

    async def _get(self, key: str, start: int, end: int, etag: str | None) -> Any:
        """A GET of ``[start, end)``. With ``etag``, the version is checked on the response's
        ETag rather than sent as If-Match: the same guarantee (a response describes the version
        it serves), and a conditional GET costs the service more (Azurite ~0.6 ms each)."""
        import obstore

        result = await obstore.get_async(self._store, key, options={"range": (start, end)})
        if etag and _etag(result.meta) != etag:
            raise SourceChangedError(f"{self}/{key} changed while it was being copied")
        return result

    async def _get_bytes(self, key: str, start: int, end: int, etag: str | None) -> memoryview:
        """``[start, end)`` whole. Without a version to check, in one call (obstore's ranged
        read): a GET and then its body are two hand-overs between obstore's threads and the
        loop, ~0.13 ms more CPU for a 64 KiB object (most of a small file's own cost)."""
        if start >= end:
            return memoryview(b"")
        if etag is None:
            import obstore

            return memoryview(await obstore.get_range_async(self._store, key, start=start, end=end))
        return memoryview(await (await self._get(key, start, end, etag)).bytes_async())

    async def read_range(
        self, key: str, start: int, end: int, etag: str | None = None
    ) -> bytes | memoryview:
        with translated(f"reading {self}/{key}"):
            data = await self._get_bytes(key, start, end, etag)
        await take(self.limiter, len(data))  # (--bwlimit)
        return data

    async def read_chunks(
        self, key: str, start: int, end: int, etag: str | None = None
    ) -> AsyncIterator[bytes | memoryview]:
        """The range as it arrives, in pieces of about STREAM_CHUNK. A caller that writes each
        piece at once copies it while it is still in the CPU cache, where copying whole 8 MiB
        blocks into the page cache cost far more CPU (docs/stage-cpu-notes.md)."""
        if start >= end:
            return
        if end - start <= STREAM_CHUNK:  # one piece anyway: skip the stream's machinery
            yield await self.read_range(key, start, end, etag)
            return
        with translated(f"reading {self}/{key}"):
            result = await self._get(key, start, end, etag)
            async for chunk in result.stream(min_chunk_size=STREAM_CHUNK):
                await take(self.limiter, len(chunk))
                yield chunk

    async def write_file(
        self,
        key: str,
        source: Path,
        size: int,
        md5: str | None = None,
        *,
        gate: asyncio.Semaphore | None = None,
    ) -> str | None:
        """One Put Blob up to ``block_size`` (the service records its Content-MD5); above it,
        blocks, ``concurrency`` in flight, read and MD5-hashed in one pass as they go, resumable
        block by block, committed with the Content-MD5 (see _blocks.upload_file). Returns the
        MD5 set on a block upload."""
        if size <= self.block_size:
            data = await asyncio.to_thread(source.read_bytes)
            async with gate or contextlib.nullcontext():
                await self.write_bytes(key, data)
            return None
        from ._blocks import upload_file

        md5, _ = await upload_file(self, key, source, size, md5, gate=gate)
        return md5

    async def write_bytes(self, key: str, data: bytes) -> None:
        if len(data) > self.block_size:  # a block upload (see write_file)
            await super().write_bytes(key, data)
            return
        import obstore

        from ._blocks import content_type_of, put_small

        await take(self.limiter, len(data))  # (--bwlimit)
        if self.tier:  # (obstore's put cannot set one)
            await put_small(self, key, data)
            return
        try:  # one Put Blob: the service records its Content-MD5
            await obstore.put_async(
                self._store,
                key,
                data,
                use_multipart=False,
                attributes={"Content-Type": content_type_of(self, key)},
            )
        except Exception as exc:
            raise translate(exc, f"writing {self}/{key}") from exc

    async def create_bytes(self, key: str, data: bytes) -> bool:
        """One Put Blob sent with If-None-Match: * (the service refuses it, 409, where a blob
        of that name exists)."""
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        from ._blocks import content_type_of

        try:
            await obstore.put_async(
                self._store,
                key,
                data,
                mode="create",
                use_multipart=False,
                attributes={"Content-Type": content_type_of(self, key)},
            )
        except (AlreadyExistsError, PreconditionError):
            return False
        except Exception as exc:
            raise translate(exc, f"writing {self}/{key}") from exc
        return True

    def copies_from(self, src: Store) -> bool:
        """Copy Blob reads a source in the same account with this store's own credentials, and
        one in another account through the source's SAS, over HTTPS (the service must reach
        it: an emulator on this machine it cannot); Put Block From URL reads one in another
        account the service can reach (see _blob_copy.copies_by_blocks)."""
        from ._blob_copy import copies_by_blocks

        return isinstance(src, BlobStore) and (
            src.auth.endpoint == self.auth.endpoint
            or (bool(src.auth.sas) and src.auth.endpoint.startswith("https://"))
            or copies_by_blocks(src, self)
        )

    async def copy_from(
        self,
        src: Store,
        key: str,
        etag: str,
        md5: str | None,
        size: int | None = None,
        gate: asyncio.Semaphore | None = None,
    ) -> str | None:
        from ._blob_copy import copy_blob

        assert isinstance(src, BlobStore)
        return await copy_blob(src, self, key, etag, md5, size, gate)

    async def delete(self, key: str) -> None:
        import obstore

        try:
            await obstore.delete_async(self._store, key)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise translate(exc, f"deleting {self}/{key}") from exc

    async def close(self) -> None:
        if self._direct is not None:
            self._direct.close()
            self._direct = None
        if self._lister is not None:
            await self._lister.close()
            self._lister = None
        if self._container is not None:
            await self._container.close()
            self._container = None
        if self._aad is not None:  # (its own HTTP sessions: the container does not close them)
            await self._aad.close()
            self._aad = None
