"""A throttled account: Blob Storage answers 503 ServerBusy or 500 OperationTimedOut when a
partition is over its targets, and a client must back off and retry. Here a proxy in front of
the real Azurite answers some requests so, and the copies must still complete, whole."""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path

import pytest

from azurite import ACCOUNT, ACCOUNT_KEY, Azurite, read_tree
from faulty_proxy import Fault, FaultyProxy
from stoker.stage import stage, verify

MiB = 1 << 20
THROTTLED = ((503, "ServerBusy", None), (500, "OperationTimedOut", None))


def every_third(limit: int) -> tuple[list[int], object]:
    """A rule that throttles every third request (503 and 500 in turn), ``limit`` in all."""
    count, lock, served = itertools.count(1), threading.Lock(), [0]
    answers = itertools.cycle(THROTTLED)

    def rule(method: str, path: str) -> Fault | None:
        with lock:
            if next(count) % 3 or served[0] >= limit:
                return None
            served[0] += 1
            return next(answers)

    return served, rule


def _files() -> dict[str, bytes]:
    files = {f"small/{i:02d}.bin": os.urandom(1000 + i) for i in range(12)}
    files["big.bin"] = os.urandom(3 * MiB + 5)  # blocks of 1 MiB
    return files


def _through(proxy: FaultyProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        f"AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};BlobEndpoint={proxy.endpoint(ACCOUNT)}",
    )


def test_a_throttled_import_export_and_verify_complete(
    azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _files()
    container = azurite.container()
    for key, data in files.items():
        container.upload_blob(f"in/{key}", data)
    url = f"az://{container.container_name}"
    local = tmp_path / "local"

    served, rule = every_third(12)
    with FaultyProxy(azurite.port, rule) as proxy:
        _through(proxy, monkeypatch)
        pulled = stage(f"{url}/in", str(local), block_size=MiB, concurrency=4)
        assert pulled.ok, pulled.failed
        pushed = stage(str(local), f"{url}/out", block_size=MiB, concurrency=4)
        assert pushed.ok, pushed.failed
        report = verify(str(local), f"{url}/out")
    assert read_tree(local) == files
    assert report.ok, report
    assert served[0] == 12, "the rule should have throttled 12 requests"
    methods = {r.method for r in proxy.log if r.injected}
    assert {"GET", "PUT"} <= methods, methods  # reads, listings and uploads were throttled
    uploaded = {b.name.removeprefix("out/"): b.size for b in container.list_blobs("out/")}
    assert uploaded == {k: len(v) for k, v in files.items()}


def test_a_throttled_listing_waits_as_long_as_it_is_asked(
    azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing (the Azure SDK's call) waited ~15 s before its first retry whatever the
    answer said; it now backs off from 100 ms, and waits as long as a Retry-After asks."""
    container = azurite.container()
    container.upload_blob("in/a.bin", b"a" * 100)
    url = f"az://{container.container_name}/in"
    asked = iter([(503, "ServerBusy", 1.0), (500, "OperationTimedOut", None)])

    def rule(method: str, path: str) -> Fault | None:
        return next(asked, None) if "comp=list" in path else None

    with FaultyProxy(azurite.port, rule) as proxy:
        _through(proxy, monkeypatch)
        summary = stage(url, str(tmp_path / "dst"))
    assert summary.ok, summary.failed
    listings = [r for r in proxy.log if "comp=list" in r.path]
    assert [r.injected for r in listings] == [503, 500, None]
    assert listings[1].at - listings[0].at >= 1.0  # as Retry-After asked
    assert listings[2].at - listings[1].at < 1.0  # backoff from 100 ms (was ~15 s)
