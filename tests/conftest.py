"""Shared fixtures: an isolated environment for every test, and a loopback Retail Prices API.

The price server serves tests/fixtures/retail_prices_page{1,2}.json. The prices in those files
are made up (round numbers chosen for the tests); only the response format is the API's.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from azurite import Azurite

# rich fixes a console's width when it is built with $COLUMNS set, and pytest-xdist's workers
# start with COLUMNS=80: unset, the CLI's consoles read it per print (isolated_env sets it).
os.environ.pop("COLUMNS", None)

FIXTURES = Path(__file__).parent / "fixtures"
API_PATH = "/api/retail/prices"


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Never read the user's ~/.config, $STOKER_CATALOG or the real price API; pin the width."""
    prices = tmp_path / "no-such-dir" / "prices.toml"
    monkeypatch.setenv("STOKER_PRICES", str(prices))
    monkeypatch.delenv("STOKER_CATALOG", raising=False)
    monkeypatch.delenv("STOKER_DEBUG", raising=False)
    # Port 9 (discard) on loopback: anything that forgets to point at the test server fails fast.
    monkeypatch.setenv("STOKER_PRICES_API", "http://127.0.0.1:9/api/retail/prices")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    # rich reads COLUMNS on every print: a wide, fixed width keeps table cells whole.
    monkeypatch.setenv("COLUMNS", "200")
    return prices


@dataclass
class PriceServer:
    """A loopback Retail Prices API. ``mode`` picks the answer to the first page."""

    base: str
    mode: str = "ok"  # ok | 500 | no-items | not-json | empty
    requests: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.base + API_PATH

    def first_query(self) -> dict[str, list[str]]:
        first = next(r for r in self.requests if urlsplit(r).path == API_PATH)
        return parse_qs(urlsplit(first).query)


def _page(name: str, base: str) -> bytes:
    text = (FIXTURES / name).read_text("utf-8").replace("{base}", base)
    return text.encode("utf-8")


@pytest.fixture
def price_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[PriceServer]:
    """A real HTTP server on 127.0.0.1 (ephemeral port) with $STOKER_PRICES_API pointed at it."""
    state = PriceServer(base="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests.append(self.path)
            path = urlsplit(self.path).path
            if path == API_PATH:
                if state.mode == "500":
                    self._send(500, b'{"Error": "internal"}')
                elif state.mode == "no-items":
                    self._send(200, json.dumps({"BillingCurrency": "USD", "Count": 0}).encode())
                elif state.mode == "not-json":
                    self._send(200, b"<html>maintenance</html>", "text/html")
                elif state.mode == "empty":
                    body = {
                        "BillingCurrency": "USD",
                        "CustomerEntityId": "Default",
                        "CustomerEntityType": "Retail",
                        "Items": [],
                        "NextPageLink": None,
                        "Count": 0,
                    }
                    self._send(200, json.dumps(body).encode())
                else:
                    self._send(200, _page("retail_prices_page1.json", state.base))
            elif path == "/page2":
                self._send(200, _page("retail_prices_page2.json", state.base))
            else:
                self._send(404, b'{"Error": "not found"}')

        def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    host, port = server.server_address[:2]
    state.base = f"http://{host}:{port}"
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    )
    thread.start()
    monkeypatch.setenv("STOKER_PRICES_API", state.url)
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# ---------------------------------------------------------------------------------- storage
# A real Azurite (tests/azurite.py), never a mock: stoker talks HTTP to it as to Blob Storage.

_STORAGE_VARS = (
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_ACCOUNT",
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "STOKER_ALLOW_HTTP",
    "RANK",
    "WORLD_SIZE",
    "GROUP_RANK",
    "NODE_RANK",
    "NNODES",
    "STOKER_NODES",
)


@pytest.fixture(autouse=True)
def isolated_storage_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credential, rank or cache directory of the user's leaks in (or out: manifests of
    copies to Blob go under $XDG_CACHE_HOME)."""
    for var in _STORAGE_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    """One in-memory Azurite for the session; ``.container()`` gives each test its own."""
    server = Azurite().start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def blob_env(azurite: Azurite, monkeypatch: pytest.MonkeyPatch) -> str:
    """Credentials for Azurite in the environment, and a fresh container's URL (its account,
    devstoreaccount1, is the connection string's)."""
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)
    return f"az://{azurite.container().container_name}"


@pytest.fixture
def azurite_factory(tmp_path: Path) -> Iterator[Callable[[], Azurite]]:
    """Start separate Azurites whose data lives on disk (so it survives a restart)."""
    started: list[Azurite] = []

    def start() -> Azurite:
        server = Azurite(location=tmp_path / f"azurite-data-{len(started)}")
        started.append(server)
        return server.start()

    try:
        yield start
    finally:
        for server in started:
            server.close()
