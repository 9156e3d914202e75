"""A real Azurite blob emulator for the tests: started as a subprocess, stopped at teardown.

Nothing here mocks Azure: the tests talk HTTP to Azurite exactly as stoker talks to Blob Storage.
Azurite comes from ``npm install`` (``make test`` runs it); without it the tests say so.
"""

from __future__ import annotations

import datetime as dt
import http.client
import itertools
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from stoker.store._blob_list import API_VERSION

ROOT = Path(__file__).resolve().parents[1]
AZURITE_BIN = ROOT / "node_modules" / ".bin" / "azurite-blob"
ACCOUNT = "devstoreaccount1"
# Azurite's well-known development key (public, documented by Microsoft).
ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
START_TIMEOUT_S = 30.0

_names = itertools.count()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unique_name(prefix: str = "t") -> str:
    """A fresh, valid container name: 3-63 characters of lowercase letters, digits, dashes."""
    name = f"{prefix}-{next(_names)}-{uuid.uuid4().hex[:12]}".lower()
    assert 3 <= len(name) <= 63, name
    return name


class Azurite:
    """One azurite-blob process on 127.0.0.1. In memory unless ``location`` is given, in which
    case data lives on disk and survives ``restart()`` (which keeps the port)."""

    def __init__(
        self, location: Path | None = None, port: int | None = None, *, strict: bool = False
    ) -> None:
        self.location = location
        self.strict = strict  # as `azurite` starts by default: the API versions it knows only
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_dir = None if location else Path(tempfile.mkdtemp(prefix="stoker-azurite-"))
        self.log = (self._log_dir or location.parent) / f"azurite-{self.port}.log"  # type: ignore[union-attr]

    # ------------------------------------------------------------------ addresses and secrets
    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint={self.endpoint};"
        )

    # ------------------------------------------------------------------ process
    def command(self) -> list[str]:
        if not AZURITE_BIN.exists():
            raise RuntimeError(
                f"Azurite is not installed ({AZURITE_BIN} is missing): run `make test`, which "
                "runs `npm install` to put it in node_modules"
            )
        cmd = [
            str(AZURITE_BIN),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(self.port),
            *([] if self.strict else ["--skipApiVersionCheck", "--loose"]),
            "--silent",
            "--disableTelemetry",
        ]
        if self.location is None:
            cmd.append("--inMemoryPersistence")
        else:
            self.location.mkdir(parents=True, exist_ok=True)
            cmd += ["--location", str(self.location)]
        return cmd

    def start(self) -> Azurite:
        cmd = self.command()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"Azurite exited with {self.proc.returncode} at start: {self._log_tail()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(
            f"Azurite did not answer on 127.0.0.1:{self.port} within {START_TIMEOUT_S:.0f} s: "
            f"{self._log_tail()}"
        )

    def stop(self, *, kill: bool = False) -> None:
        """Terminate (SIGTERM lets Azurite save its metadata), then kill if it lingers."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        if kill:
            proc.kill()
        else:
            proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def close(self) -> None:
        """Stop for good and remove the log (kept in tmp_path when there is a location)."""
        self.stop()
        if self._log_dir is not None:
            shutil.rmtree(self._log_dir, ignore_errors=True)

    def restart(self) -> Azurite:
        self.stop()
        return self.start()

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:] or "(no output)"
        except OSError:
            return "(no log)"

    # ------------------------------------------------------------------ clients
    def service(self) -> Any:
        from azure.storage.blob import BlobServiceClient

        # The REST version stoker asks for: a strict emulator refuses the SDK's newer default.
        return BlobServiceClient.from_connection_string(
            self.connection_string, api_version=API_VERSION
        )

    def container(self, name: str | None = None) -> Any:
        """Create a fresh container (a unique name unless given) and return its client."""
        client = self.service().get_container_client(name or unique_name())
        client.create_container()
        return client

    def client(self, url: str) -> Any:
        """The container client for ``az://CONTAINER[/...]`` (or the path-style URL)."""
        rest = url.split("://", 1)[1]
        if not url.startswith("az://"):  # http://HOST:PORT/ACCOUNT/CONTAINER/...
            rest = rest.split("/", 2)[2]
        container = rest.split("/")[0]
        return self.service().get_container_client(container)

    def sas(self, container: str, *, expiry: dt.datetime | None = None, **permissions: bool) -> str:
        """A container SAS, URL-encoded so that any character of the signature survives."""
        from azure.storage.blob import ContainerSasPermissions, generate_container_sas

        token = generate_container_sas(
            ACCOUNT,
            container,
            account_key=ACCOUNT_KEY,
            permission=ContainerSasPermissions(**permissions),
            expiry=expiry or dt.datetime.now(dt.UTC) + dt.timedelta(hours=2),
        )
        return urlencode(parse_qsl(token))

    def put_raw(self, container: str, name: str, data: bytes) -> None:
        """Upload a blob under a name the SDK's HTTP stack would rewrite (``a/../b``): the
        request goes out byte for byte, the path segments percent-encoded."""
        path = "/".join(quote(seg, safe="") for seg in name.split("/"))
        sas = self.sas(container, read=True, write=True, create=True)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(
                "PUT",
                f"/{ACCOUNT}/{container}/{path}?{sas}",
                body=data,
                headers={"x-ms-blob-type": "BlockBlob", "x-ms-version": "2021-08-06"},
            )
            response = conn.getresponse()
            body = response.read()
        finally:
            conn.close()
        if response.status != 201:
            raise RuntimeError(f"PUT {name!r}: {response.status} {body[:300]!r}")


# ---------------------------------------------------------------------------------- data helpers
PARTIAL_SUFFIX = ".stoker-partial"


def read_tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by key, leaving out stoker's own ``.stoker`` state directory
    and partial files (see ``partials``)."""
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        key = path.relative_to(root).as_posix()
        if key == ".stoker" or key.startswith(".stoker/") or key.endswith(PARTIAL_SUFFIX):
            continue
        if path.is_file():
            out[key] = path.read_bytes()
    return out


def partials(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob(f"*{PARTIAL_SUFFIX}"))


def blob_tree(container: Any, prefix: str = "") -> dict[str, bytes]:
    """Every blob under ``prefix`` (``""`` or ending in ``/``) by key relative to it."""
    return {
        b.name[len(prefix) :]: container.download_blob(b.name).readall()
        for b in container.list_blobs(name_starts_with=prefix or None)
    }
