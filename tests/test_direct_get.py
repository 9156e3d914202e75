"""Ranged GETs on worker threads (store/_direct_get.py) against a loopback Blob service that
speaks Get Blob's documented protocol (x-ms-range, 206 with Content-Range and ETag, error codes
in x-ms-error-code) and misbehaves on cue: a body cut short, a 503, a blob replaced between
two requests, a refusal, a wrong range, a service that goes silent mid-body. Azurite serves the
well-behaved case in the stage tests; it cannot be made to fail like this."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from azurite import Azurite
from self_signed import self_signed
from stoker.errors import AccessDeniedError, SourceChangedError, StoreError
from stoker.store import download, fetch_ranges, list_digest, open_store
from stoker.store._direct_get import SLICE
from stoker.store._unit_hasher import UnitHasher

MiB = 1 << 20
SAS = "sv=2022-11-02&sr=c&sp=r&sig=c2VjcmV0LXNpZ25hdHVyZQ%3D%3D"


class Blobs(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.data: dict[str, bytes] = {}
        self.etag = '"0x1"'
        self.cues: list[str] = []  # what the next requests do, in order; then they serve
        self.asked: list[tuple[str, int, int]] = []  # (blob, first, last) of each GET
        self.silent = threading.Event()  # set: a "stall" request may end

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # (a client that drops a connection mid-body: what these tests do)

    def cue(self) -> str:
        return self.cues.pop(0) if self.cues else "serve"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Blobs

    def log_message(self, *args: Any) -> None:
        pass

    def _fail(self, status: int, code: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("x-ms-error-code", code)
        self.send_header("Content-Length", "0")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        name = parts.path.split("/", 3)[3]  # /account/container/blob
        if "sig=" not in parts.query:
            return self._fail(403, "AuthenticationFailed")
        data = self.server.data.get(name)
        if data is None:
            return self._fail(404, "BlobNotFound")
        first, last = map(int, self.headers["x-ms-range"].removeprefix("bytes=").split("-"))
        self.server.asked.append((name, first, last))
        cue = self.server.cue()
        if cue == "503":
            return self._fail(503, "ServerBusy", **{"Retry-After": "0"})
        if cue == "403":
            return self._fail(403, "AuthorizationPermissionMismatch")
        if cue == "replace":  # another version is uploaded before this request is served
            self.server.etag = '"0x2"'
        if cue == "wrong-range":
            first, last = first + 1, last
        body = data[first : last + 1]
        self.send_response(206)
        self.send_header("ETag", self.server.etag)
        self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if cue == "cut":  # half the body, then the connection drops
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if cue == "stall":  # a piece, then silence until the test ends it
            self.wfile.write(body[:MiB])
            self.wfile.flush()
            self.server.silent.wait(30)
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture
def blobs() -> Iterator[Blobs]:
    server = Blobs()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.silent.set()
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def no_credentials_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN"):
        monkeypatch.delenv(var, raising=False)


def store_of(server: Blobs) -> Any:
    return open_store(f"http://127.0.0.1:{server.server_address[1]}/acct/cont?{SAS}")


def fetch(store: Any, key: str, size: int, **kw: Any) -> tuple[bytes, list[int]]:
    """``key`` through fetch_ranges in 1 MiB ranges, 4 to a request; the bytes, and the
    ranges finished in the order they were reported."""
    got, done = bytearray(size), []
    threads: set[str] = set()

    def sink(pos: int, piece: Any) -> None:
        threads.add(threading.current_thread().name)
        got[pos : pos + len(piece)] = piece

    async def go() -> None:
        try:
            await fetch_ranges(
                store,
                key,
                size,
                sink,
                range_size=MiB,
                per_request=4,
                range_done=lambda i, a, b: done.append(i),
                **kw,
            )
        finally:
            await store.close()

    asyncio.run(go())
    assert threads and all(t.startswith("stoker-get") for t in threads)  # the threads' path
    return bytes(got), done


def test_a_blob_comes_whole_through_the_threads(blobs: Blobs) -> None:
    data = blobs.data["d/x.bin"] = os.urandom(10 * MiB + 5)
    got, done = fetch(store_of(blobs), "d/x.bin", len(data), etag="0x1")
    assert got == data
    assert sorted(done) == list(range(11))  # every range reported once
    assert sorted(a for _, a, _ in blobs.asked) == [0, 4 * MiB, 8 * MiB]  # 4 ranges a GET


def test_a_body_cut_short_is_asked_for_again_from_where_it_stopped(blobs: Blobs) -> None:
    data = blobs.data["x.bin"] = os.urandom(4 * MiB)
    blobs.cues = ["cut"]
    got, done = fetch(store_of(blobs), "x.bin", len(data), etag="0x1")
    assert got == data and sorted(done) == [0, 1, 2, 3]
    (_, a1, b1), (_, a2, b2) = blobs.asked
    assert (a1, b1) == (0, 4 * MiB - 1)
    assert 0 < a2 <= 2 * MiB and b2 == 4 * MiB - 1  # the rest only, not the whole again


def test_a_busy_service_is_tried_again(blobs: Blobs) -> None:
    data = blobs.data["x.bin"] = os.urandom(2 * MiB)
    blobs.cues = ["503", "503"]
    got, _ = fetch(store_of(blobs), "x.bin", len(data))
    assert got == data and len(blobs.asked) == 3


def test_a_blob_replaced_mid_copy_stops_it(blobs: Blobs) -> None:
    data = blobs.data["x.bin"] = os.urandom(4 * MiB)
    blobs.cues = ["cut", "replace"]  # the second request, for the rest, meets a new version
    with pytest.raises(SourceChangedError, match=r"x\.bin changed while it was being copied"):
        fetch(store_of(blobs), "x.bin", len(data), etag="0x1")


def test_a_refusal_is_one_line_without_the_sas(blobs: Blobs) -> None:
    blobs.data["x.bin"] = os.urandom(2 * MiB)
    blobs.cues = ["403"]
    with pytest.raises(AccessDeniedError) as caught:
        fetch(store_of(blobs), "x.bin", 2 * MiB)
    message = str(caught.value)
    assert "HTTP 403 AuthorizationPermissionMismatch" in message and "\n" not in message
    assert "sig=" not in message and "c2VjcmV0" not in message


def test_a_blob_gone_mid_copy_says_so(blobs: Blobs) -> None:
    with pytest.raises(SourceChangedError, match="HTTP 404 BlobNotFound: it was deleted"):
        fetch(store_of(blobs), "gone.bin", 2 * MiB)


def test_bytes_other_than_those_asked_for_are_refused(blobs: Blobs) -> None:
    blobs.data["x.bin"] = os.urandom(2 * MiB)
    blobs.cues = ["wrong-range"]
    with pytest.raises(
        StoreError, match=r"asked for bytes 0-2097151, the service answered bytes 1-"
    ):
        fetch(store_of(blobs), "x.bin", 2 * MiB)


def test_a_cancelled_download_writes_nothing_after_it_returns(blobs: Blobs, tmp_path: Path) -> None:
    """Ctrl-C while a service is silent mid-body: the thread's socket is shut, the call
    returns at once, and no piece lands in the file afterwards."""
    blobs.data["x.bin"] = os.urandom(8 * MiB)
    blobs.cues = ["stall"]
    dest = tmp_path / "x.bin"
    store = store_of(blobs)

    async def go() -> float:
        task = asyncio.ensure_future(download(store, "x.bin", 8 * MiB, dest, range_size=8 * MiB))
        while not blobs.asked:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # the first piece has landed; the service is silent
        task.cancel()
        began = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - began

    took = asyncio.run(go())
    assert took < 5  # not the 120 s read timeout
    size = dest.stat().st_size
    blobs.silent.set()  # the service would now send the rest
    time.sleep(0.3)
    assert dest.stat().st_size == size and os.path.getsize(dest) == size
    assert Path(dest).read_bytes()[:MiB] == blobs.data["x.bin"][:MiB]


def test_a_tap_hashes_every_byte_as_it_lands_even_across_a_cut(
    blobs: Blobs, tmp_path: Path
) -> None:
    """As a no-MD5 import hashes: ``tap`` (the unit hasher) sees each part as it lands, in
    SLICE steps of whole 4 MiB pieces; a piece cut short is asked for again and tapped again,
    and the hash list still matches the file's (the unit it could not follow is read back)."""
    data = blobs.data["x.bin"] = os.urandom(12 * MiB + 5)
    blobs.cues = ["cut"]  # one request: half its body (6 MiB: mid-piece), then the rest
    path = tmp_path / "x.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, len(data))
    hasher = UnitHasher(fd, len(data), 4 * MiB)
    tapped: list[tuple[int, int]] = []

    def tap(pos: int, part: Any) -> None:
        tapped.append((pos, len(part)))
        hasher.chunk(pos, part)

    async def go() -> None:
        store = store_of(blobs)
        try:
            await fetch_ranges(
                store,
                "x.bin",
                len(data),
                lambda pos, piece: os.pwrite(fd, piece, pos),
                range_size=4 * MiB,
                per_request=4,
                piece=4 * MiB,
                tap=tap,
                range_done=lambda i, a, b: hasher.unit_done(i),
            )
        finally:
            await store.close()

    asyncio.run(go())
    os.close(fd)
    assert path.read_bytes() == data
    assert hasher.hexdigest() == list_digest(path, 4 * MiB)
    assert max(n for _, n in tapped) <= SLICE  # in the cache: a slice at a time
    covered = sorted(tapped)
    assert covered[0][0] == 0 and sum(n for _, n in tapped) > len(data)  # (a piece again)


def test_names_that_are_url_syntax_are_read_by_key_signed_requests(
    blob_env: str, azurite: Azurite, tmp_path: Path
) -> None:
    """Against Azurite, with the account key (each request signed over its encoded path): blob
    names with spaces, '%', '?', '#', '+' and non-ASCII come whole through the threads' GETs."""
    from stoker.stage import stage

    box = azurite.client(blob_env)
    files = {f"d/{name}": os.urandom(6 * MiB + i) for i, name in enumerate(NAMES)}
    for key, data in files.items():
        box.get_blob_client(key).upload_blob(data)
    dst = tmp_path / "dst"
    summary = stage(f"{blob_env}/d", str(dst), block_size=2 * MiB)
    assert summary.ok, summary.failed
    assert {p.name: p.read_bytes() for p in dst.iterdir() if p.is_file()} == {
        k.removeprefix("d/"): v for k, v in files.items()
    }


NAMES = ["a b.bin", "100%25 off.bin", "q?x=1.bin", "hash#1.bin", "plus+sign.bin", "ünï çødé.bin"]


def test_over_tls_the_threads_read_it_whole_and_check_the_certificate(
    blobs: Blobs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blob is HTTPS: the threads' connections speak TLS, verify the service's certificate
    against the trusted authorities (here the test's own, through SSL_CERT_FILE), and read
    the body through it; an untrusted certificate is one line that says what to do."""
    import ssl

    cert, key = self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    blobs.socket = context.wrap_socket(blobs.socket, server_side=True)
    data = blobs.data["x.bin"] = os.urandom(5 * MiB + 3)
    url = f"https://127.0.0.1:{blobs.server_address[1]}/acct/cont?{SAS}"

    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    got, done = fetch(open_store(url), "x.bin", len(data), etag="0x1")
    assert got == data and sorted(done) == [0, 1, 2, 3, 4, 5]

    monkeypatch.delenv("SSL_CERT_FILE")  # the test's authority is no longer trusted
    with pytest.raises(StoreError, match="certificate") as caught:
        fetch(open_store(url), "x.bin", len(data))
    assert "\n" not in str(caught.value) and "sig=" not in str(caught.value)
