"""The Blob store's control requests (List Blobs, Create Container): sent through http.client
where the endpoint is reached directly with a key or SAS, through azure-core's pipeline with
Azure AD or a proxy; both against the real emulator, both answering the same."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from azurite import ACCOUNT, ACCOUNT_KEY, Azurite
from stoker.errors import StoreError
from stoker.store._blob_control import Direct, ThroughCore, control_for
from stoker.store._credentials import AzureAuth


def _auth(azurite: Azurite, *, key: str | None = ACCOUNT_KEY, sas: str | None = None) -> AzureAuth:
    return AzureAuth(ACCOUNT, azurite.endpoint, key, sas)


def _list(client: Direct | ThroughCore, azurite: Azurite, container: str, sas: str = "") -> tuple:
    async def run() -> tuple:
        try:
            url = f"{azurite.endpoint}/{container}?restype=container&comp=list"
            answer = await client.send("GET", url + (f"&{sas}" if sas else ""))
            return answer.status, answer.body.count(b"<Blob>")
        finally:
            await client.close()

    return asyncio.run(run())


def test_a_key_or_sas_goes_direct_azure_ad_or_a_proxy_through_azure_core(
    azurite: Azurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert isinstance(control_for(_auth(azurite), lambda: None), Direct)
    assert isinstance(control_for(_auth(azurite, key=None, sas="sv=x&sig=y"), lambda: None), Direct)
    aad = AzureAuth(ACCOUNT, "https://acct.blob.core.windows.net")
    made: list[str] = []

    def credential() -> object:
        made.append("credential")
        from azure.core.credentials import AccessToken

        class Fixed:
            async def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
                return AccessToken("t", 2**31)

            async def close(self) -> None:
                pass

        return Fixed()

    assert isinstance(control_for(aad, credential), ThroughCore) and made == ["credential"]
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    assert isinstance(control_for(_auth(azurite), lambda: None), ThroughCore)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # the emulator is not behind it
    assert isinstance(control_for(_auth(azurite), lambda: None), Direct)


def test_both_clients_list_and_sign_alike_with_a_key_and_with_a_sas(azurite: Azurite) -> None:
    container = azurite.container()
    for i in range(3):
        container.upload_blob(f"b{i}", b"x" * i)
    name = container.container_name
    sas = azurite.sas(name, read=True, list=True)
    assert _list(Direct(_auth(azurite)), azurite, name) == (200, 3)
    assert _list(ThroughCore(_auth(azurite), lambda: None), azurite, name) == (200, 3)
    no_key = _auth(azurite, key=None, sas=sas)
    assert _list(Direct(no_key), azurite, name, sas) == (200, 3)
    assert _list(ThroughCore(no_key, lambda: None), azurite, name, sas) == (200, 3)
    wrong = _auth(azurite, key="A" * 86 + "==")  # a key, but not the account's: refused
    assert _list(Direct(wrong), azurite, name)[0] == 403


def test_the_direct_client_keeps_its_connection_and_creates_a_container(azurite: Azurite) -> None:
    from azurite import unique_name

    name = unique_name()
    client = Direct(_auth(azurite))

    async def run() -> list[int]:
        url = f"{azurite.endpoint}/{name}?restype=container"
        statuses = [(await client.send("PUT", url)).status for _ in range(2)]
        listed = await client.send("GET", url + "&comp=list")
        assert len(client._idle) == 1  # one connection served all three requests
        await client.close()
        return [*statuses, listed.status]

    assert asyncio.run(run()) == [201, 409, 200]
    assert azurite.service().get_container_client(name).exists()


def test_an_import_with_a_key_loads_no_azure_sdk_at_all(azurite: Azurite, tmp_path: Path) -> None:
    container = azurite.container()
    container.upload_blob("only.bin", b"1")
    script = (
        "import sys; from stoker.stage import stage\n"
        f"s = stage('az://{container.container_name}', sys.argv[1]); assert s.ok, s\n"
        "print(sorted(m for m in sys.modules if m.startswith(('azure', 'requests'))))"
    )
    env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": azurite.connection_string}
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]", out.stdout
    assert (tmp_path / "out" / "only.bin").read_bytes() == b"1"


def _send(client_type: type, auth: AzureAuth, url: str) -> None:
    async def run() -> None:
        client = Direct(auth) if client_type is Direct else ThroughCore(auth, lambda: None)
        try:
            await client.send("GET", url)
        finally:
            await client.close()

    asyncio.run(run())


BOTH_CLIENTS = pytest.mark.parametrize("client_type", [Direct, ThroughCore])


@BOTH_CLIENTS
def test_https_to_a_plain_http_endpoint_fails_at_once_saying_so(
    azurite: Azurite, client_type: type
) -> None:
    endpoint = azurite.endpoint.replace("http://", "https://")
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"does not answer in TLS.*http://") as caught:
        _send(
            client_type,
            AzureAuth(ACCOUNT, endpoint, ACCOUNT_KEY),
            f"{endpoint}/c?restype=container",
        )
    assert endpoint in str(caught.value) and ACCOUNT_KEY not in str(caught.value)
    assert time.monotonic() - started < 10  # not the 2 min retry budget


@BOTH_CLIENTS
def test_a_certificate_this_machine_does_not_trust_fails_at_once_saying_so(
    tmp_path: Path, client_type: type
) -> None:
    import socket
    import ssl
    import threading

    from self_signed import self_signed

    self_signed(tmp_path)  # (an authority this machine does not trust)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            try:
                context.wrap_socket(conn, server_side=True).close()
            except (OSError, ssl.SSLError):
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    endpoint = f"https://127.0.0.1:{port}/{ACCOUNT}"
    started = time.monotonic()
    try:
        with pytest.raises(StoreError, match="TLS certificate was not accepted"):
            _send(
                client_type,
                AzureAuth(ACCOUNT, endpoint, ACCOUNT_KEY),
                f"{endpoint}/c?restype=container",
            )
    finally:
        server.close()
    assert time.monotonic() - started < 10
