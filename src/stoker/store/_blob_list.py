"""List Blobs over REST, as the Blob store's listing sends it through azure-core's public
pipeline: the request's URL, Shared Key signing (the SDK's own policy is private), and each
page parsed with ElementTree (the SDK's model deserialization costs ~0.4 ms of CPU a blob). Also
the small readings of what the service answers (ETag, an MD5 kept in metadata)."""

from __future__ import annotations

import functools
import hashlib
from datetime import UTC, datetime
from typing import Any

from ..errors import StoreError
from ._base import LIST_BATCH, ObjectInfo

# The first page is small, so that the copy starts as soon as it comes: a large first page
# keeps every request waiting on the listing. The pages after it, listed while the copy runs,
# are of LIST_BATCH.
FIRST_PAGE = 100
MD5_METADATA = "stoker_md5"  # where earlier stoker kept a block upload's MD5 (still read)


def _md5_hex(value: str | None) -> str | None:
    """A metadata MD5, if it is one (32 hex digits); anything else is ignored."""
    if value and len(value) == 32 and all(c in "0123456789abcdef" for c in value.lower()):
        return value.lower()
    return None


def _etag(meta: Any) -> str:
    """obstore's e_tag without the quotes, as the SDK's listing gives it."""
    return str(meta["e_tag"] or "").strip('"')


STORAGE_SCOPE = "https://storage.azure.com/.default"
# The REST version the SDK's calls ask for. The SDK's own default moves with each release, ahead of
# what the Azurite emulator (3.35) accepts without --skipApiVersionCheck; the service accepts
# older versions, and nothing here needs a newer one.
API_VERSION = "2025-11-05"


SIGNED_HEADERS = (
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
)


def shared_key_header(
    account: str, key: str, method: str, url: str, headers: dict[str, str]
) -> str:
    """The Authorization header of a request signed with the account key, as the storage SDK
    signs it (its policy is private); ``url`` whole, or its path and query as sent:
    https://learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key"""
    import base64
    import hmac
    from urllib.parse import parse_qsl, urlsplit

    named = {k.lower(): v for k, v in headers.items() if v}
    if named.get("content-length") == "0":
        del named["content-length"]
    parts = urlsplit(url)
    query = sorted(parse_qsl(parts.query, keep_blank_values=True))
    text = (
        f"{method}\n"
        + "".join(named.get(name, "") + "\n" for name in SIGNED_HEADERS)
        + "".join(f"{k}:{v}\n" for k, v in sorted(named.items()) if k.startswith("x-ms-"))
        + f"/{account}{parts.path}"
        + "".join(f"\n{k.lower()}:{v}" for k, v in query)
    )
    digest = hmac.new(base64.b64decode(key), text.encode(), hashlib.sha256).digest()
    return f"SharedKey {account}:{base64.b64encode(digest).decode()}"


def _list_url(container_url: str, prefix: str, marker: str) -> str:
    """The List Blobs URL: the container's (with its SAS, if any) plus the listing's query
    (FIRST_PAGE objects at first, LIST_BATCH after a marker)."""
    from urllib.parse import quote, urlencode, urlsplit, urlunsplit

    parts = urlsplit(container_url)
    query = {
        "restype": "container",
        "comp": "list",
        "maxresults": LIST_BATCH if marker else min(FIRST_PAGE, LIST_BATCH),
        "include": "metadata",
    }
    if prefix:
        query["prefix"] = prefix
    if marker:
        query["marker"] = marker
    # A space as %20, not '+': the shared-key signature covers the decoded query, and '+'
    # signed as '+' was refused (HTTP 403) for every prefix holding a space.
    own = urlencode(query, quote_via=quote)
    return urlunsplit(parts._replace(query=f"{parts.query}&{own}" if parts.query else own))


def _parse_list_page(body: bytes, cut: int) -> tuple[list[ObjectInfo], str]:
    """One List Blobs page: its objects (keys relative to the prefix) and the next marker."""
    import base64
    from urllib.parse import unquote
    from xml.etree import ElementTree

    root = ElementTree.fromstring(body)
    infos = []
    for blob in root.iterfind("Blobs/Blob"):
        name_el, props = blob.find("Name"), blob.find("Properties")
        if name_el is None or props is None:
            raise StoreError(
                f"a List Blobs answer has a blob without a name or properties: {body[:200]!r}"
            )
        name = name_el.text or ""
        if name_el.get("Encoded") == "true":  # percent-encoded: not valid in XML as it is
            name = unquote(name)
        content_md5 = props.findtext("Content-MD5")
        md5 = (
            base64.b64decode(content_md5).hex()
            if content_md5
            else _md5_hex(blob.findtext(f"Metadata/{MD5_METADATA}"))
        )
        infos.append(
            ObjectInfo(
                name[cut:],
                int(props.findtext("Content-Length") or 0),
                (props.findtext("Etag") or "").strip('"'),
                md5,
                _seconds(props.findtext("Last-Modified")),
            )
        )
    return infos, root.findtext("NextMarker") or ""


_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}


@functools.lru_cache(maxsize=4096)
def _seconds(http_date: str | None) -> float | None:
    """An HTTP date ("Wed, 02 Dec 2026 10:00:00 GMT") as seconds since the epoch. The fixed
    form the service sends is read directly (email.utils' general parser cost 11 us, half of
    a listed blob's whole parse), and cached: a listing repeats the same second many times."""
    if not http_date:
        return None
    try:
        _, day, month, year, clock, zone = http_date.split()
        hour, minute, second = clock.split(":")
        if zone == "GMT" and month in _MONTHS:
            when = datetime(
                int(year), _MONTHS[month], int(day), int(hour), int(minute), int(second), tzinfo=UTC
            )
            return when.timestamp()
    except ValueError:  # not the fixed form: the general parser below
        pass
    from email.utils import parsedate_to_datetime

    try:
        return parsedate_to_datetime(http_date).timestamp()
    except (TypeError, ValueError):
        return None
