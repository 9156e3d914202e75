"""The one rule for a URL operate sends something to (ARM's base URL, a guard webhook): https,
or plain http to a loopback host only (a test server); a host. A base
URL (``base_only``: ARM's) has nothing after the host either, no user or password: requests add
their own path and credentials. A webhook may carry its own (shown redacted, never in clear)."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from .._redact import shown
from ..errors import StokerError


def check_url(
    url: object, flag: str, error: type[StokerError], *, sends: str, base_only: bool = False
) -> SplitResult:
    """``url``'s parts, or ``error`` naming ``flag`` (the URL shown redacted). ``sends``: what
    would go in clear over plain http ("the bearer token", "the evidence")."""
    from ..store import is_loopback

    if not isinstance(url, str):
        raise error(f"{flag}: give a URL string, not {type(url).__name__}")
    head = f"{flag} {shown(url)}"
    form = "https://HOST" if base_only else "an https://HOST/... URL"
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        raise error(f"{head}: not a URL ({exc})") from exc
    if parts.scheme not in ("https", "http") or not host:
        raise error(f"{head}: give {form}")
    if parts.scheme == "http" and not is_loopback(host):
        raise error(
            f"{head}: plain http would send {sends} in clear; use https (http is allowed to a "
            "loopback host only)"
        )
    if base_only and (parts.username is not None or parts.password is not None):
        raise error(f"{head}: a user or password in the URL; give {form} only")
    base_tail = parts.path not in ("", "/") or parts.query or parts.fragment
    if base_only and (base_tail or url.endswith(("?", "#"))):
        raise error(
            f"{head}: a base URL has no path, query or fragment (requests add their own); "
            f"give {form} only"
        )
    return parts
