"""Whether anything answers at an endpoint, asked once before the first request to it.

Requests are retried for up to two minutes (an emulator restart or a throttled account
recovers within that), so a mistyped endpoint or account name took ~90 s to fail. One TCP
connect tells those apart at once: a refused connection, or a host name that does not exist,
fails with what to check. A timeout, a name the resolver could not look up just now, or a
proxy in the way are left to the retries. Once an endpoint has answered, this process does not
ask again: a later outage (the emulator restarting mid-copy) is retried as before.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from urllib.parse import urlsplit

from ..errors import StoreError

CONNECT_TIMEOUT_S = 5.0
_answered: set[tuple[str, int]] = set()


async def check_answers(endpoint: str, what: str) -> None:
    """Raise StoreError, naming ``endpoint`` and what to check, when nothing can answer there."""
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if not host or (host, port) in _answered or _through_proxy(parts.scheme, host):
        return
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port), timeout=CONNECT_TIMEOUT_S
        )
    except ConnectionRefusedError:
        raise StoreError(
            f"{what}: nothing answers at {host}:{port} (connection refused): check the endpoint "
            "(the URL, or BlobEndpoint in the connection string), or start the emulator"
        ) from None
    except socket.gaierror as exc:
        if exc.errno != socket.EAI_NONAME:
            return  # e.g. EAI_AGAIN: the resolver may answer on a retry
        raise StoreError(
            f"{what}: the host name {host} does not resolve from this machine: check the "
            "account name and the endpoint (a private endpoint's name resolves only where its "
            "DNS zone is linked)"
        ) from None
    except (TimeoutError, OSError):
        return
    writer.close()
    _answered.add((host, port))


def _through_proxy(scheme: str, host: str) -> bool:
    """Requests that go through a proxy may reach a host this machine cannot connect to."""
    if sys.platform.startswith("linux") and not any(
        name.lower().endswith("_proxy") for name in os.environ
    ):
        return False  # (all getproxies() reads here; urllib.request alone takes ~8 ms to load)
    import urllib.request

    return scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(host)
