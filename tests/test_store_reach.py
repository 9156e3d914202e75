"""An endpoint where nothing answers fails at once with what to check; one that answered keeps
its retries (tests/test_stage_faults.py restarts the emulator mid-copy)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from azurite import ACCOUNT, ACCOUNT_KEY, Azurite, free_port
from stoker.errors import StoreError
from stoker.store import _reach, open_store
from stoker.stream import StreamingDataset


def _connection_string(endpoint: str) -> str:
    return f"AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};BlobEndpoint={endpoint}"


@pytest.mark.parametrize("verb", ["stage", "verify", "cache"])
def test_a_cli_verb_against_a_dead_endpoint_fails_at_once(tmp_path: Path, verb: str) -> None:
    """It retried for ~90 s before saying anything."""
    endpoint = f"http://127.0.0.1:{free_port()}/{ACCOUNT}"
    env = dict(os.environ, AZURE_STORAGE_CONNECTION_STRING=_connection_string(endpoint))
    src = "az://data/p"
    args = ["cache", "pull", src, str(tmp_path)] if verb == "cache" else [verb, src, str(tmp_path)]
    out = subprocess.run(
        [str(Path(sys.executable).parent / "stoker"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,  # the retries would take minutes
    )
    assert out.returncode == 2, out.stderr
    assert f"nothing answers at 127.0.0.1:{endpoint.split(':')[2].split('/')[0]}" in out.stderr
    assert "connection refused" in out.stderr and "start the emulator" in out.stderr
    assert ACCOUNT_KEY not in out.stderr + out.stdout


def test_a_dataset_on_a_dead_endpoint_fails_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This process remembers the endpoints that answered; the free port may be one an earlier
    # test's emulator answered on (the fresh-clone run retried it for 120 s and failed).
    monkeypatch.setattr(_reach, "_answered", set())
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        _connection_string(f"http://127.0.0.1:{free_port()}/{ACCOUNT}"),
    )
    ds = StreamingDataset("az://data/ds", tmp_path / "cache")  # opens nothing yet
    with pytest.raises(StoreError, match=r"reading .*index.json: nothing answers at 127\.0\.0\.1"):
        len(ds)  # the first use reads the index


def test_a_host_name_that_does_not_resolve_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """.invalid never resolves (RFC 2606): a mistyped account name looks like this."""
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        _connection_string(f"https://{ACCOUNT}.blob.example.invalid"),
    )
    store = open_store("az://data/p")

    async def first_batch() -> None:
        try:
            async for _ in store.list():
                break
        finally:
            await store.close()

    with pytest.raises(StoreError, match=r"host name .*example\.invalid does not resolve"):
        asyncio.run(first_batch())


@pytest.mark.parametrize("variable", ["http_proxy", "HTTP_PROXY"])
def test_through_a_proxy_the_check_is_left_to_the_requests(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """The proxy may reach what this machine cannot connect to directly."""
    endpoint = f"http://127.0.0.1:{free_port()}/{ACCOUNT}"
    for name in [n for n in os.environ if n.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)
    with pytest.raises(StoreError, match="nothing answers"):
        asyncio.run(_reach.check_answers(endpoint, "listing"))
    monkeypatch.setenv(variable, "http://proxy.example:3128")
    asyncio.run(_reach.check_answers(endpoint, "listing"))  # no error: not checked
    monkeypatch.setenv("no_proxy", "localhost,127.0.0.1")  # ...unless the host bypasses it
    with pytest.raises(StoreError, match="nothing answers"):
        asyncio.run(_reach.check_answers(endpoint, "listing"))


def test_an_endpoint_that_answered_is_not_asked_again(
    azurite: Azurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked once per process: a later outage goes to the requests' retries."""
    asyncio.run(_reach.check_answers(azurite.endpoint, "listing"))
    assert ("127.0.0.1", azurite.port) in _reach._answered

    async def refuse(*args: object, **kwargs: object) -> None:
        raise ConnectionRefusedError

    monkeypatch.setattr(asyncio, "open_connection", refuse)
    asyncio.run(_reach.check_answers(azurite.endpoint, "listing"))  # no error: not asked
    with pytest.raises(StoreError, match="nothing answers"):
        asyncio.run(_reach.check_answers(f"http://127.0.0.1:{free_port()}/x", "listing"))
