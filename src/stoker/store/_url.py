"""Storage URLs: one parser for every place stoker reads or writes.

    az://CONTAINER/PATH, abfs[s]://CONTAINER/PATH   the account from the environment
    az|abfs[s]|wasb[s]://CONTAINER@ACCOUNT.dfs|blob.SUFFIX/PATH
    https://ACCOUNT.blob|dfs.SUFFIX/CONTAINER/PATH[?SAS]
    http://HOST:PORT/ACCOUNT/CONTAINER/PATH          path style: an emulator
    s3://BUCKET/PREFIX, gs://BUCKET/PREFIX           through obstore
    /path, ./path, file:///path                      POSIX

A remote path with a '.' or '..' segment, anything that looks like a URL but is none of these,
and a user:password@ are refused, never read as a local path. A SAS is kept only in
``Location.sas``; ``str()`` never shows it. The rules (the account of ``az://``, path style,
other clouds' suffixes): docs/urls.md.
"""

from __future__ import annotations

import difflib
import functools
import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from ..errors import StoreError
from ._env_account import account_host, env_account

Scheme = Literal["az", "s3", "gs", "file"]

AZ_SCHEMES = ("az", "abfs", "abfss", "wasb", "wasbs")
SCHEMES = (*AZ_SCHEMES, "https", "http", "s3", "gs", "file")
FORMS = (
    "az://CONTAINER/PATH (the account from AZURE_STORAGE_ACCOUNT_NAME, AZURE_STORAGE_ACCOUNT or "
    "AZURE_STORAGE_CONNECTION_STRING), abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PATH, "
    "https://ACCOUNT.blob.core.windows.net/CONTAINER/PATH, "
    "http://127.0.0.1:10000/ACCOUNT/CONTAINER/PATH (an emulator), s3://BUCKET/PATH, "
    "gs://BUCKET/PATH, or a local path (./NAME for one that starts like a URL)"
)

# Hosts of Azure's clouds: one of them that is not an account's Blob host is a mistake.
_AZURE_SUFFIXES = (
    "core.windows.net",
    "core.usgovcloudapi.net",
    "core.chinacloudapi.cn",
    "core.cloudapi.de",
    "storage.azure.net",
)
CONTAINER_NAME = re.compile(r"(?=.{3,63}$)[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9]))*")
_SPECIAL_CONTAINERS = ("$root", "$web", "$logs")
# A scheme and a colon at the start: "az:", "https:", "s3:", "c+x:".
_SCHEME_START = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")


@dataclass(frozen=True)
class Location:
    scheme: Scheme
    bucket: str = ""  # Blob container, S3/GCS bucket
    prefix: str = ""  # key prefix inside the bucket, "" or ending in "/"
    account: str = ""  # Azure storage account
    endpoint: str = ""  # Blob endpoint, e.g. https://acct.blob.core.windows.net
    path: Path | None = None  # POSIX root
    sas: str = field(default="", repr=False)
    # Where the endpoint came from, for messages: "" (the URL), or the variable that gave it.
    endpoint_from: str = ""

    @property
    def is_remote(self) -> bool:
        return self.scheme != "file"

    def __str__(self) -> str:
        return self._shown

    @functools.cached_property
    def _shown(self) -> str:  # (an error message per object names its store: made once)
        if self.scheme == "file":
            return str(self.path)
        if self.scheme == "az":
            return f"{self.endpoint.rstrip('/')}/{self.bucket}/{self.prefix}".rstrip("/")
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


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _container(shown: str, name: str, example: str) -> str:
    if not name:
        raise StoreError(f"{shown}: the URL names no container; write it as {example}")
    if not CONTAINER_NAME.fullmatch(name) and name not in _SPECIAL_CONTAINERS:
        raise StoreError(
            f"{shown}: {name!r} is not a container name (3-63 lowercase letters, digits and "
            f"single hyphens, starting and ending with a letter or digit); write it as {example}"
        )
    return name


def _not_a_url(text: str, why: str) -> StoreError:
    return StoreError(f"{text}: {why}. Write {FORMS}")


def _looks_like_url(text: str) -> str | None:
    """The scheme of a string that starts like a URL and is no local path anyone means, else
    None: ``az:/x``, ``az:x``, ``htps:/x``, ``s3:bucket``."""
    m = _SCHEME_START.match(text)
    if not m:
        return None
    scheme = m.group(1).lower()
    rest = text[m.end() :]
    if rest.startswith("/") or scheme in SCHEMES:  # ("data:2024" stays a folder's name)
        return scheme
    return None


def _check_dots(shown: str, path: str) -> None:
    """Refuse a remote path with a '.' or '..' segment, written as it is or percent-encoded
    (%2e%2e, %2E., ..%2f), or with a backslash. An HTTP client or the service may resolve
    them (Blob reads a backslash as '/'), and the prefix would then name another folder, or
    another container, than the one the URL seems to: a copy or a --delete would act there."""
    decoded = unquote(path)
    if "\\" in decoded:
        raise StoreError(
            f"{shown}: a backslash in a storage URL's path (Blob reads it as '/'); write '/'"
        )
    for seg in decoded.split("/"):
        if seg in (".", ".."):
            raise StoreError(
                f"{shown}: the path has a {seg!r} segment (written as it is or percent-encoded); "
                "a storage URL names its container and prefix as they are: write them without "
                "'.' or '..'"
            )


def _close_scheme(scheme: str) -> str | None:
    close = difflib.get_close_matches(scheme, SCHEMES, n=1, cutoff=0.6)
    return close[0] if close else None


def parse_url(url: str | Path) -> Location:
    """Read a storage URL or path; raises StoreError naming what is wrong (never a secret)."""
    text = str(url)
    if isinstance(url, Path):
        return Location("file", path=url.expanduser().resolve())
    if "://" not in text:
        scheme = _looks_like_url(text)
        if scheme is None:
            return Location("file", path=Path(text).expanduser().resolve())
        shown = text.split("?", 1)[0]
        raise _not_a_url(
            shown,
            f"a URL needs '://' after {scheme!r} (this one would be a local folder named "
            f"{text.split('/', 1)[0]!r})",
        )
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    segments = [s for s in parts.path.split("/") if s]
    userinfo, at, host = parts.netloc.rpartition("@")
    shown = f"{text.split('://', 1)[0]}://{host}{parts.path}"  # no query (a SAS), no password
    if scheme not in SCHEMES:
        close = _close_scheme(scheme)
        hint = f" (did you mean {close}://?)" if close else ""
        raise _not_a_url(shown, f"unknown scheme {scheme!r}{hint}")
    named_container = scheme in AZ_SCHEMES and at and ":" not in userinfo and userinfo
    if at and not named_container:  # Blob, S3 and GCS take no credentials there: they'd show
        raise StoreError(
            f"{shown}: a storage URL takes no user:password@ (it was left out here); give "
            "credentials as a SAS in the URL or in the environment (see the README)"
        )
    if named_container:
        shown = f"{scheme}://{userinfo}@{host}{parts.path}"
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
    if scheme != "file":
        _check_dots(shown, parts.path)
    if scheme == "file":
        if host not in ("", "localhost"):
            raise _not_a_url(shown, f"a file:// URL names a path on this machine, not {host!r}")
        return Location("file", path=Path(parts.path).resolve())
    if scheme in ("s3", "gs"):
        if not host:
            raise StoreError(f"{shown}: give a bucket, like {scheme}://BUCKET/PREFIX")
        return Location(scheme, bucket=host, prefix=_prefix(segments))  # type: ignore[arg-type]
    if scheme in AZ_SCHEMES:
        return _parse_az(shown, scheme, userinfo if named_container else "", host, segments)
    try:
        port = parts.port
    except ValueError:
        raise _not_a_url(shown, "its port is not a number from 0 to 65535") from None
    return _parse_http(shown, scheme, parts.hostname or "", port, segments, parts.query)


def _parse_az(shown: str, scheme: str, userinfo: str, host: str, segments: list[str]) -> Location:
    if userinfo:  # CONTAINER@ACCOUNT.dfs.core.windows.net
        found = account_host(host.lower())
        if found is None:
            raise _not_a_url(
                shown,
                f"after '@', {scheme}:// takes an account's host, ACCOUNT.dfs.core.windows.net or "
                f"ACCOUNT.blob.core.windows.net (or another cloud's suffix), not {host!r}",
            )
        account, blob_host = found
        example = f"{scheme}://CONTAINER@{host}/PATH"
        return Location(
            "az",
            bucket=_container(shown, userinfo, example),
            prefix=_prefix(segments),
            account=account,
            endpoint=f"https://{blob_host}",
        )
    if account_host(host.lower()) or "." in host or ":" in host:
        raise _not_a_url(
            shown,
            f"{scheme}://{host} names a host, and {scheme}:// takes a container there: write "
            f"{scheme}://CONTAINER/PATH with the account from the environment, or "
            f"https://{host}/CONTAINER/PATH",
        )
    container = _container(shown, host, f"{scheme}://CONTAINER/PATH")
    account, endpoint, source = env_account(shown, container, "/".join(segments))
    return Location(
        "az",
        bucket=container,
        prefix=_prefix(segments),
        account=account,
        endpoint=endpoint,
        endpoint_from=source,
    )


def _parse_http(
    shown: str, scheme: str, host: str, port: int | None, segments: list[str], query: str
) -> Location:
    sas = query  # as written: decoding would turn a signature's %2B into a space
    if not host:
        raise _not_a_url(shown, "the URL names no host")
    found = account_host(host)
    if found:
        account, blob_host = found
        example = f"{scheme}://{host}/CONTAINER/PATH"
        return Location(
            "az",
            bucket=_container(shown, segments[0] if segments else "", example),
            prefix=_prefix(segments[1:]),
            account=account,
            endpoint=f"{scheme}://{blob_host}" + (f":{port}" if port is not None else ""),
            sas=sas,
        )
    if any(host == s or host.endswith("." + s) for s in _AZURE_SUFFIXES):
        raise _not_a_url(
            shown,
            f"{host} is not a storage account's Blob host (ACCOUNT.blob.SUFFIX or "
            "ACCOUNT.dfs.SUFFIX, e.g. ACCOUNT.blob.core.windows.net)",
        )
    if not (port is not None or _is_ip(host) or "." not in host):
        raise _not_a_url(
            shown,
            f"{host} is not a Blob Storage host (ACCOUNT.blob.core.windows.net, or another "
            "cloud's suffix), and a path-style URL (an emulator's) is read only with an IP "
            "address, a one-label host name or an explicit port: "
            f"{scheme}://{host}:PORT/ACCOUNT/CONTAINER/PATH",
        )
    if len(segments) < 2:
        raise StoreError(
            f"{shown}: a path-style Blob URL is {scheme}://HOST:PORT/ACCOUNT/CONTAINER/PATH"
        )
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{port}" if port is not None else ""
    example = f"{scheme}://{netloc}/ACCOUNT/CONTAINER/PATH"
    return Location(
        "az",
        bucket=_container(shown, segments[1], example),
        prefix=_prefix(segments[2:]),
        account=segments[0],
        endpoint=f"{scheme}://{netloc}/{segments[0]}",
        sas=sas,
    )
