"""Ranged GETs of a blob read straight into a caller's sink on a worker thread.

A large download through obstore hands each piece from its runtime's threads to the event loop
and into Python as a fresh buffer: for a blob uploaded in blocks (no Content-MD5, so nothing to
hash in order), that hand-off was most of an import's CPU, about twice rclone's a GiB
(BENCHMARKS.md "stage cpu", the floors). Here one GET is one task on a small pool of threads:
the standard library's ``http.client`` reads the body with ``readinto`` into one buffer the
thread reuses, the sink (a ``pwrite``, and the unit's hash) takes each piece on that thread,
and the loop hears of the request only as it passes the ends of the caller's ranges.

Used where ``http.client`` can serve the credentials directly (an account key, signed per
request as _blob_control signs; or a SAS), with no proxy and no ``--bwlimit``; Azure AD and
proxies keep obstore's path. A response is checked as obstore's is: the ETag names the version
asked for, the Content-Range the bytes asked for. A connection that fails mid-body is asked
again for the rest, on the same budget and backoff as every other request
(``_retry._backoff``).
"""

from __future__ import annotations

import contextlib
import http.client
import mmap
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate
from urllib.parse import quote, urlsplit

from ..errors import AccessDeniedError, SourceChangedError, StoreError
from ._azure_errors import DENIED_HINT
from ._blob_control import refusal
from ._blob_list import API_VERSION, shared_key_header
from ._credentials import AzureAuth
from ._retry import _backoff, retry_after_value

# What one readinto asks for, and the reused buffer's size: small enough that the bytes the
# socket copied in are still in the CPU's cache when pwrite copies them out (1 MiB pieces cost
# about twice the system time a GiB of 256 KiB ones, 4 threads on 2 cores).
PIECE = 256 << 10
# With a tap (a hash of the bytes as they come), a piece is read this much at a time and each
# part tapped at once, while the socket's copy is still in the cache: a 4 MiB piece hashed
# whole was read back from memory (XXH3 at ~12 GB/s, against ~30 in the cache).
SLICE = 256 << 10
HUGE = 2 << 20  # a buffer this large or larger asks for huge pages
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
TIMEOUT_S = 120.0  # a connect, or one read, that takes longer is tried again


def pool_size(concurrency: int) -> int:
    """Threads for the GETs. Each piece a thread reads takes the GIL back: more threads than
    about two a core spent more CPU on handing it over than on the bytes (16 threads on 2 cores:
    ~3x the CPU a GiB of 4 threads, the same MB/s)."""
    return max(1, min(concurrency, max(4, 2 * (os.cpu_count() or 1))))


class Ticket:
    """One request's stop signal, from the loop to its thread: ``stop()`` is seen at the next
    piece, and shuts the request's socket so that a read waiting on a silent service returns
    at once (a cancelled copy waits for its threads: nothing may write after it returns)."""

    def __init__(self, failed: Callable[[], bool] = lambda: False) -> None:
        self._event, self._failed = threading.Event(), failed
        self.conn: http.client.HTTPConnection | None = None

    def stopped(self) -> bool:
        return self._event.is_set() or self._failed()

    def stop(self) -> None:
        self._event.set()
        sock = self.conn.sock if self.conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class DirectGets:
    """GETs of ``[start, end)`` of blobs in one container, on ``threads`` worker threads, each
    with its own kept connection and buffer."""

    def __init__(self, auth: AzureAuth, container: str, prefix: str, threads: int) -> None:
        parts = urlsplit(auth.endpoint)
        self.auth = auth
        self.tls, self.host, self.port = parts.scheme == "https", parts.hostname or "", parts.port
        self.base = f"{parts.path.rstrip('/')}/{quote(container, safe='$')}/"
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="stoker-get")
        self._local = threading.local()
        self._context = None

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self.tls:
                import ssl

                self._context = self._context or ssl.create_default_context()
                conn = http.client.HTTPSConnection(
                    self.host, self.port, timeout=TIMEOUT_S, context=self._context
                )
            else:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=TIMEOUT_S)
            self._local.conn = conn
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _buffer(self, size: int) -> memoryview:
        """This thread's buffer of ``size`` bytes: page-aligned (an anonymous map), so that a
        piece can go to a file opened with O_DIRECT (see _direct_write)."""
        buffers = getattr(self._local, "buffers", None)
        if buffers is None:
            buffers = self._local.buffers = {}
        if size not in buffers:
            buf = mmap.mmap(-1, size)
            if size >= HUGE and hasattr(mmap, "MADV_HUGEPAGE"):
                # O_DIRECT pins every page of a piece for each write: a 4 MiB piece in huge
                # pages is 2 pages to pin, not 1,024.
                with contextlib.suppress(OSError):
                    buf.madvise(mmap.MADV_HUGEPAGE)
            buffers[size] = memoryview(buf)
        return buffers[size]

    def _request(self, key: str, start: int, end: int) -> http.client.HTTPResponse:
        target = self.base + quote(self.prefix + key, safe="/")
        if self.auth.sas:
            target += f"?{self.auth.sas}"
        headers = {
            "x-ms-version": API_VERSION,
            "x-ms-date": formatdate(usegmt=True),  # per try: a retry signs anew
            "x-ms-range": f"bytes={start}-{end - 1}",
            "User-Agent": "stoker",
        }
        if self.auth.key:
            headers["Authorization"] = shared_key_header(
                self.auth.account, self.auth.key, "GET", target, headers
            )
        conn = self._connection()
        conn.request("GET", target, headers=headers)
        return conn.getresponse()

    def read(
        self,
        what: str,
        key: str,
        start: int,
        end: int,
        etag: str | None,
        sink: Callable[[int, memoryview], None],
        passed: Callable[[int], None],
        ticket: Ticket,
        piece: int = PIECE,
        tap: Callable[[int, memoryview], None] | None = None,
    ) -> int:
        """Bytes ``[start, end)`` of ``key`` into ``sink(pos, piece)`` (on this thread; the
        piece's memory is reused once it returns), ``passed(pos)`` after each; returns where it
        stopped (``end``, or earlier if the ``ticket`` was stopped). Every piece is ``piece``
        bytes (page-aligned memory) but the range's last: a piece cut short by the network is
        not handed over but asked for again. ``tap(pos, part)``, if given, sees each part as it
        lands (SLICE bytes at a time; a piece asked for again is tapped again). ``what`` names
        the object in errors (never the URL: a SAS is in it). Only the network's errors are
        retried; the sink's (a full disk) are the caller's."""
        retry = _Retry(what)
        buf, pos = self._buffer(piece), start
        while pos < end:
            if ticket.stopped():
                return pos
            ticket.conn = self._connection()
            try:
                response = self._open(what, key, pos, end, etag)
            except _Again as again:
                self._drop_connection()
                retry.wait(again.__cause__, again.after)
                continue
            except (OSError, http.client.HTTPException) as exc:
                self._drop_connection()
                if ticket.stopped():
                    return pos
                refused = refusal(self.auth.endpoint, exc)  # (TLS: no retry mends it)
                if refused:
                    raise StoreError(f"{what}: {refused}") from None
                retry.wait(exc)
                continue
            while pos < end:
                if ticket.stopped():
                    self._drop_connection()  # (the rest of the body is not read)
                    return pos
                want, n = min(piece, end - pos), 0
                step = SLICE if tap else want
                try:
                    while n < want:
                        got = response.readinto(buf[n : min(want, n + step)])
                        if not got:
                            raise http.client.IncompleteRead(b"", end - pos - n)
                        if tap is not None:
                            tap(pos + n, buf[n : n + got])
                        n += got
                except (OSError, http.client.HTTPException) as exc:
                    self._drop_connection()
                    if ticket.stopped():  # (its socket was shut by stop())
                        return pos
                    retry.wait(exc)  # then the rest is asked for again
                    break
                sink(pos, buf[:n])
                pos += n
                passed(pos)
            else:
                if response.will_close:
                    self._drop_connection()
        return pos

    def _open(
        self, what: str, key: str, start: int, end: int, etag: str | None
    ) -> http.client.HTTPResponse:
        """A GET of ``[start, end)`` whose body is ready to read, checked (``_check``)."""
        response = self._request(key, start, end)
        status = response.status
        if status in RETRY_STATUS:
            after = retry_after_value(response.getheader("Retry-After"))
            response.read()
            raise _Again(after) from http.client.HTTPException(f"HTTP {status}")
        if status not in (200, 206):
            code = response.getheader("x-ms-error-code", "")
            response.read()
            raise _refused(what, status, code)
        _check(what, response, start, end, etag)
        return response


class _Again(Exception):
    """A status the service asks to be tried again after (``after`` seconds, if it said)."""

    def __init__(self, after: float | None) -> None:
        super().__init__(after)
        self.after = after


class _Retry:
    """The backoff and budget of one request's tries (obstore's, as every request's)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.first, self.most, budget = _backoff()
        self.deadline = time.monotonic() + budget
        self.tries = 0

    def wait(self, exc: BaseException | None, after: float | None = None) -> None:
        if time.monotonic() >= self.deadline:
            raise StoreError(f"{self.what}: {exc or 'no answer'} (retried {self.tries} times)")
        self.tries += 1
        time.sleep(
            after
            if after is not None
            else random.uniform(0, min(self.most, self.first * 2**self.tries))
        )


def _check(
    what: str, response: http.client.HTTPResponse, start: int, end: int, etag: str | None
) -> None:
    """The response is of the version asked for, and of the bytes asked for."""
    got = (response.getheader("ETag") or "").strip('"')
    if etag and got != etag:
        response.close()
        raise SourceChangedError(f"{what} changed while it was being copied")
    served = response.getheader("Content-Range") or ""
    length = int(response.getheader("Content-Length") or -1)
    whole = response.status == 200 and start == 0 and length == end
    if not whole and (not served.startswith(f"bytes {start}-{end - 1}/") or length != end - start):
        response.close()
        raise StoreError(
            f"{what}: asked for bytes {start}-{end - 1}, the service answered "
            f"{served or 'without a Content-Range'} ({length} bytes)"
        )


def _refused(what: str, status: int, code: str) -> StoreError:
    message = f"{what}: HTTP {status} {code}".rstrip()
    if status in (401, 403):
        return AccessDeniedError(message + DENIED_HINT)
    if status == 404:
        return SourceChangedError(f"{message}: it was deleted while it was being copied")
    return StoreError(message)
