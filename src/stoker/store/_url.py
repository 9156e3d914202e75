"""Storage URLs: one parser for every place stoker reads or writes.

    az://ACCOUNT/CONTAINER/PREFIX                       Azure Blob (endpoint from credentials)
    https://ACCOUNT.blob.core.windows.net/CONTAINER/PREFIX[?SAS]
    http://127.0.0.1:10000/ACCOUNT/CONTAINER/PREFIX     path-style, e.g. the Azurite emulator
    s3://BUCKET/PREFIX, gs://BUCKET/PREFIX             through obstore, credentials from env
    /path, ./path, file:///path                         POSIX (Lustre, NetApp, NVMe, Files)

A SAS token in a URL is taken out at parse time and kept only in ``Location.sas``; ``str()``
of a Location never shows it. A URL with a user:password@ is refused without showing it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from ..errors import StoreError

Scheme = Literal["az", "s3", "gs", "file"]
_BLOB_HOST = ".blob.core.windows.net"


@dataclass(frozen=True)
class Location:
    scheme: Scheme
    bucket: str = ""  # Blob container, S3/GCS bucket
    prefix: str = ""  # key prefix inside the bucket, "" or ending in "/"
    account: str = ""  # Azure storage account
    endpoint: str = ""  # explicit Blob endpoint, e.g. http://127.0.0.1:10000/devstoreaccount1
    path: Path | None = None  # POSIX root
    sas: str = field(default="", repr=False)

    @property
    def is_remote(self) -> bool:
        return self.scheme != "file"

    def __str__(self) -> str:
        if self.scheme == "file":
            return str(self.path)
        if self.scheme == "az":
            base = self.endpoint.rstrip("/") if self.endpoint else f"az://{self.account}"
            return f"{base}/{self.bucket}/{self.prefix}".rstrip("/")
        return f"{self.scheme}://{self.bucket}/{self.prefix}".rstrip("/")


def _prefix(parts: list[str]) -> str:
    text = "/".join(p for p in parts if p)
    return text + "/" if text else ""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_url(url: str | Path) -> Location:
    """Read a storage URL or path; raises StoreError naming what is wrong (never a secret)."""
    text = str(url)
    if isinstance(url, Path) or "://" not in text:
        return Location("file", path=Path(text).expanduser().resolve())
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    segments = [s for s in parts.path.split("/") if s]
    host = parts.netloc.rpartition("@")[2]
    shown = f"{scheme}://{host}{parts.path}"  # no query (a SAS), no user:password
    if host != parts.netloc:  # Blob, S3 and GCS take no credentials there: they would show
        raise StoreError(
            f"{shown}: a storage URL takes no user:password@ (it was left out here); give "
            "credentials as a SAS in the URL or in the environment (see the README)"
        )
    # A '#' or '?' would cut the prefix short without a word: another prefix would be
    # copied, or, with --delete, emptied.
    if parts.fragment or "#" in text:
        raise StoreError(f"{shown}: '#' ends a URL's path; name a prefix without '#'")
    is_sas = "sig=" in parts.query and scheme in ("http", "https")
    if parts.query and not is_sas:
        raise StoreError(
            f"{shown}: '?' starts a query, and only an https:// (or http://) Blob URL takes "
            "one, its SAS; name a prefix without '?'"
        )
    if scheme == "file":
        return Location("file", path=Path(parts.path).resolve())
    if scheme in ("s3", "gs"):
        if not parts.netloc:
            raise StoreError(f"{shown}: give a bucket, like {scheme}://BUCKET/PREFIX")
        return Location(scheme, bucket=parts.netloc, prefix=_prefix(segments))  # type: ignore[arg-type]
    if scheme == "az":
        if not parts.netloc or not segments:
            raise StoreError(f"{shown}: write Blob URLs as az://ACCOUNT/CONTAINER/PREFIX")
        return Location(
            "az", bucket=segments[0], prefix=_prefix(segments[1:]), account=parts.netloc
        )
    if scheme in ("http", "https"):
        host = parts.hostname or ""
        sas = parts.query  # as written: decoding would turn a signature's %2B into a space
        if host.endswith(_BLOB_HOST):
            if not segments:
                raise StoreError(f"{shown}: the URL names no container")
            account = host[: -len(_BLOB_HOST)]
            return Location(
                "az",
                bucket=segments[0],
                prefix=_prefix(segments[1:]),
                account=account,
                endpoint=f"{scheme}://{host}",
                sas=sas,
            )
        if len(segments) < 2:
            raise StoreError(f"{shown}: a path-style Blob URL is http(s)://HOST/ACCOUNT/CONTAINER")
        endpoint = f"{scheme}://{parts.netloc}/{segments[0]}"
        return Location(
            "az",
            bucket=segments[1],
            prefix=_prefix(segments[2:]),
            account=segments[0],
            endpoint=endpoint,
            sas=sas,
        )
    raise StoreError(
        f"{shown}: unknown scheme {scheme!r}; use az://, https://, s3://, gs:// or a path"
    )
