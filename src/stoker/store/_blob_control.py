"""How the Blob store's control requests (List Blobs, Create Container) are sent.

With an account key or a SAS, and the endpoint reached directly, they go through the standard
library's ``http.client`` in a worker thread: importing azure-core with its requests transport
would cost every run that lists Blob a fixed ~0.13 CPU s (docs/stage-cpu-notes.md). With Azure
AD (a bearer token from azure-identity's credential chain) or through a proxy (which requests
honours and ``http.client`` does not), they go through azure-core's public pipeline as before.

Both retry the same way (``_retry``): connection errors and the transient statuses, Retry-After
honoured, jittered exponential backoff, within obstore's time budget.
"""

from __future__ import annotations

import asyncio
import http.client
import random
import time
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any
from urllib.parse import urlsplit

from ..errors import StoreError
from ._blob_list import API_VERSION, STORAGE_SCOPE, shared_key_header
from ._credentials import AzureAuth
from ._reach import _through_proxy
from ._retry import _backoff, core_retry_policy, retry_after_value, tls_failure

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
TIMEOUT_S = 120.0  # a socket's connect, or one read, that takes longer is tried again


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes


def control_for(auth: AzureAuth, credential: Any) -> Direct | ThroughCore:
    """The direct client where it can serve ``auth``; azure-core's pipeline otherwise
    (``credential()`` gives the Azure AD credential, made only when it is needed)."""
    parts = urlsplit(auth.endpoint)
    if auth.uses_aad or _through_proxy(parts.scheme, parts.hostname or ""):
        return ThroughCore(auth, credential)
    return Direct(auth)


class Direct:
    """Requests through ``http.client``, each in a worker thread, on connections kept for the
    next; signed with the account key, or with the SAS in the URL."""

    def __init__(self, auth: AzureAuth) -> None:
        self.auth = auth
        parts = urlsplit(auth.endpoint)
        self.tls, self.host, self.port = parts.scheme == "https", parts.hostname or "", parts.port
        self._idle: list[http.client.HTTPConnection] = []
        self._context: Any = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._idle:
            return self._idle.pop()
        if not self.tls:
            return http.client.HTTPConnection(self.host, self.port, timeout=TIMEOUT_S)
        if self._context is None:
            import ssl

            self._context = ssl.create_default_context()
        return http.client.HTTPSConnection(
            self.host, self.port, timeout=TIMEOUT_S, context=self._context
        )

    def _once(self, conn: http.client.HTTPConnection, method: str, url: str) -> Answer:
        parts = urlsplit(url)
        target = f"{parts.path}?{parts.query}" if parts.query else parts.path
        headers = {
            "x-ms-version": API_VERSION,
            "x-ms-date": formatdate(usegmt=True),  # per try: a retry signs anew
            "User-Agent": "stoker",
        }
        if method in ("PUT", "POST"):
            headers["Content-Length"] = "0"
        if self.auth.key:
            headers["Authorization"] = shared_key_header(
                self.auth.account, self.auth.key, method, target, headers
            )
        conn.request(method, target, headers=headers)
        response = conn.getresponse()
        body = response.read()
        named = {name.lower(): value for name, value in response.getheaders()}
        if response.will_close:
            conn.close()
        return Answer(response.status, named, body)

    async def send(self, method: str, url: str) -> Answer:
        first, most, budget = _backoff()
        deadline = time.monotonic() + budget
        tries = 0
        while True:
            conn = self._connection()
            wait: float | None = None
            try:
                answer = await asyncio.to_thread(self._once, conn, method, url)
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                refused = refusal(self.auth.endpoint, exc)
                if refused:
                    raise StoreError(refused) from None
                if time.monotonic() >= deadline:
                    raise
            else:
                self._idle.append(conn)
                if answer.status not in RETRY_STATUS or time.monotonic() >= deadline:
                    return answer
                wait = retry_after_value(answer.headers.get("retry-after"))
            tries += 1
            if wait is None:
                wait = random.uniform(0, min(most, first * 2**tries))
            await asyncio.sleep(wait)

    async def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle = []


class ThroughCore:
    """Requests through azure-core's public pipeline client: its requests transport (a worker
    thread per request), the bearer token policy for Azure AD, and the retries on obstore's
    budget."""

    def __init__(self, auth: AzureAuth, credential: Any) -> None:
        from azure.core import AsyncPipelineClient
        from azure.core.pipeline.policies import (
            AsyncBearerTokenCredentialPolicy,
            HeadersPolicy,
            UserAgentPolicy,
        )
        from azure.core.pipeline.transport import AsyncioRequestsTransport

        from .._redact import redact_logger

        policies: list[Any] = [
            HeadersPolicy({"x-ms-version": API_VERSION}),
            UserAgentPolicy(sdk_moniker="stoker"),
            core_retry_policy(),  # not the storage SDK's: importing it costs 0.6 CPU s
        ]
        if auth.key:
            policies.append(_SharedKey(auth))
        elif not auth.sas:  # (a SAS is in the URL)
            policies.append(AsyncBearerTokenCredentialPolicy(credential(), STORAGE_SCOPE))
        redact_logger("urllib3.connectionpool")  # the transport's DEBUG lines carry the SAS
        self.auth = auth
        self._core = AsyncPipelineClient(
            auth.endpoint, policies=policies, transport=AsyncioRequestsTransport()
        )

    async def send(self, method: str, url: str) -> Answer:
        from azure.core.rest import HttpRequest

        try:
            response = await self._core.send_request(HttpRequest(method, url))
        except Exception as exc:  # (the retry policy gave these up at once)
            refused = refusal(self.auth.endpoint, exc)
            if refused:
                raise StoreError(refused) from None
            raise
        body = await response.read()
        named = {name.lower(): value for name, value in response.headers.items()}
        return Answer(response.status_code, named, body)

    async def close(self) -> None:
        await self._core.close()


def refusal(endpoint: str, exc: BaseException) -> str | None:
    """What to do about a TLS failure no retry can mend (said at once: retried, it took the
    whole 2 min budget to fail), or None."""
    import ssl

    failure = tls_failure(exc)
    if isinstance(failure, ssl.SSLCertVerificationError):
        return (
            f"{endpoint}: its TLS certificate was not accepted ({failure.verify_message}): "
            "check the host name in the endpoint, or make this machine trust the "
            "certificate's authority (SSL_CERT_FILE names a CA bundle)"
        )
    if failure is not None:
        return (
            f"{endpoint} does not answer in TLS (plain HTTP?): check the port, or write the "
            "endpoint with http:// (the emulator speaks plain HTTP)"
        )
    return None


def _SharedKey(auth: AzureAuth) -> Any:  # noqa: N802 - a policy, named as azure-core's are
    """Shared Key signing as an azure-core policy (shared_key_header, per try)."""
    from azure.core.pipeline.policies import SansIOHTTPPolicy

    class SharedKey(SansIOHTTPPolicy):  # type: ignore[misc]
        def on_request(self, request: Any) -> None:
            http_request = request.http_request
            http_request.headers["x-ms-date"] = formatdate(usegmt=True)
            http_request.headers["Authorization"] = shared_key_header(
                auth.account,
                auth.key or "",
                http_request.method,
                http_request.url,
                dict(http_request.headers),
            )

    return SharedKey()
