"""Loopback HTTP servers for the tests: a webhook that keeps what is posted to it, and any
handler class served on a free port, shut down when the block ends."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class Quiet(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def webhook() -> Iterator[tuple[str, list[dict]]]:
    """(its URL, the JSON bodies posted to it so far); answers 204."""
    posts: list[dict] = []

    class Hook(Quiet):
        def do_POST(self) -> None:  # noqa: N802
            posts.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

    with serving(Hook) as server:
        yield f"http://127.0.0.1:{server.server_port}/hook", posts


class Servers:
    """Servers started one by one in a test, all stopped at its end; ``stop`` is set first, so
    a handler that stalls on it (``stop.wait(30)``) lets go."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self._servers: list[ThreadingHTTPServer] = []

    def url(self, handler: type[BaseHTTPRequestHandler], path: str = "/metrics") -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{server.server_port}{path}"

    def close(self) -> None:
        self.stop.set()
        for server in self._servers:
            server.shutdown()
            server.server_close()
