"""The flags AzCopy and rclone users rely on, against Azurite: --bwlimit, --tier and
--content-type, server-side copy between accounts (Put Block From URL), and uploads that resume
block by block."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import azurite as azurite_module
from azurite import ACCOUNT, ACCOUNT_KEY, Azurite, blob_tree
from faulty_proxy import Fault, FaultyProxy
from stoker.cli import app
from stoker.errors import StageError
from stoker.stage import stage
from stoker.store._azure import BlobStore
from stoker.store._bwlimit import Bandwidth, parse_bwlimit
from stoker.store._direct_get import DirectGets

MiB = 1 << 20
ROOT = Path(__file__).resolve().parents[1]
# Put Block From URL came in Azurite 3.37 (the project's pin, 3.35, answers 501): the tests that
# need it run against one installed here, when it is:
#   npm install --prefix .bench/azurite-next --no-audit --no-fund azurite@3.37.0
NEWER_AZURITE = ROOT / ".bench" / "azurite-next" / "node_modules" / ".bin" / "azurite-blob"
OTHER = "otheracct"  # a second account on the same emulator: another account, one service


def _write(root: Path, files: dict[str, bytes]) -> Path:
    for key, data in files.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)
    return root


# ------------------------------------------------------------------------------ --bwlimit
@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("100M", 100e6),
        ("100MB/s", 100e6),
        ("800Mb/s", 100e6),
        ("800Mbps", 100e6),
        ("100MiB/s", 100 * MiB),
        ("1.5G", 1.5e9),
        ("250k", 250e3),
        (5e6, 5e6),
    ],
)
def test_bwlimit_reads_rates_and_bare_sizes_per_second(text: Any, rate: float) -> None:
    assert parse_bwlimit(text) == pytest.approx(rate)


@pytest.mark.parametrize("text", ["fast", "100 parsecs", "0", "10", "-5M"])
def test_a_bad_bwlimit_is_one_clear_error(text: str, tmp_path: Path) -> None:
    with pytest.raises(StageError, match=f"--bwlimit {re.escape(text)}"):
        stage(str(tmp_path), str(tmp_path / "out"), bwlimit=text)


def test_the_bucket_paces_concurrent_takers_to_the_rate() -> None:
    bucket = Bandwidth(4e6, burst=64 << 10)  # 4 MB/s

    async def taker() -> None:
        for _ in range(10):
            await bucket.take(64 << 10)

    async def main() -> float:
        t0 = time.monotonic()
        await asyncio.gather(*(taker() for _ in range(4)))  # 40 x 64 KiB = 2.6 MB
        return time.monotonic() - t0

    elapsed = asyncio.run(main())
    expected = (40 * (64 << 10) - (64 << 10)) / 4e6  # (the burst passes at once)
    assert expected * 0.95 <= elapsed <= expected * 1.3, elapsed


def test_bwlimit_caps_an_upload_a_download_and_a_local_copy(
    azurite: Azurite, blob_env: str, tmp_path: Path
) -> None:
    data = {"big.bin": os.urandom(12 * MiB), "small.bin": os.urandom(300_000)}
    src = _write(tmp_path / "src", data)
    total = sum(map(len, data.values()))
    cap = 6e6  # bytes per second: ~2 s each way
    legs = (
        (str(src), f"{blob_env}/up"),
        (f"{blob_env}/up", str(tmp_path / "down")),
        (str(src), str(tmp_path / "local")),  # (a file system mount shares the NIC too)
    )
    for source, dest in legs:
        t0 = time.perf_counter()
        summary = stage(source, dest, block_size=MiB, bwlimit=cap)
        rate = total / (time.perf_counter() - t0)
        assert summary.ok, summary.failed
        assert 0.75 * cap <= rate <= 1.1 * cap, f"{source} -> {dest}: {rate / 1e6:.2f} MB/s"
    assert (tmp_path / "down" / "big.bin").read_bytes() == data["big.bin"]


# ---------------------------------------------------------------------- --tier, --content-type
def _properties(container: Any, prefix: str) -> dict[str, tuple[str | None, str]]:
    return {
        b.name.removeprefix(prefix): (b.blob_tier, b.content_settings.content_type)
        for b in container.list_blobs(name_starts_with=prefix)
    }


def test_uploads_carry_a_guessed_content_type_or_the_one_given_and_the_tier(
    azurite: Azurite, blob_env: str, tmp_path: Path
) -> None:
    files = {
        "a.csv": b"x,y\n1,2\n",
        "b.json": b"{}",
        "c.weights": b"\0" * 10,  # no known extension
        "big.safetensors": os.urandom(3 * MiB),  # in blocks
        "big.txt": b"t" * (3 * MiB),
    }
    src = _write(tmp_path / "src", files)
    container = azurite.client(blob_env)

    assert stage(str(src), f"{blob_env}/guessed", block_size=MiB).ok
    got = _properties(container, "guessed/")
    assert {k: ct for k, (_, ct) in got.items()} == {
        "a.csv": "text/csv",
        "b.json": "application/json",
        "c.weights": "application/octet-stream",
        "big.safetensors": "application/octet-stream",
        "big.txt": "text/plain",
    }

    summary = stage(
        str(src), f"{blob_env}/cool", block_size=MiB, tier="cool", content_type="text/x-mine"
    )
    assert summary.ok, summary.failed
    assert _properties(container, "cool/") == dict.fromkeys(files, ("Cool", "text/x-mine"))
    for key, data in files.items():  # and each keeps its Content-MD5
        md5 = container.get_blob_client(f"cool/{key}").get_blob_properties().content_settings
        assert bytes(md5.content_md5).hex() == hashlib.md5(data).hexdigest(), key
    assert blob_tree(container, "cool/") == files

    result = CliRunner().invoke(
        app, ["stage", str(src), f"{blob_env}/archive", "--tier", "Archive", "--block-size", "1MiB"]
    )
    assert result.exit_code == 0, result.output
    tiers = {tier for tier, _ in _properties(container, "archive/").values()}
    assert tiers == {"Archive"}


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [("--tier", "lukewarm", "hot, cool, cold, archive"), ("--content-type", "csv", "media type")],
)
def test_a_bad_tier_or_content_type_is_one_clear_error(
    tmp_path: Path, option: str, value: str, says: str
) -> None:
    result = CliRunner().invoke(app, ["stage", str(tmp_path), str(tmp_path / "o"), option, value])
    assert result.exit_code == 2 and says in result.output, result.output


# ------------------------------------------------------------------------ upload resume
def _failing_after(blocks: int) -> tuple[list[int], Callable[[str, str], Fault | None]]:
    """A rule that forwards ``blocks`` Put Block requests, then refuses every later one (403:
    a fault the run stops on at once, as a revoked SAS)."""
    count, lock, forwarded = itertools.count(), threading.Lock(), [0]

    def rule(method: str, path: str) -> Fault | None:
        if method != "PUT" or "comp=block&" not in path + "&":
            return None
        with lock:
            if next(count) < blocks:
                forwarded[0] += 1
                return None
        return (403, "AuthorizationFailure", None)

    return forwarded, rule


def test_an_interrupted_upload_resumes_its_staged_blocks(
    azurite: Azurite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    block = 64 << 10
    data = os.urandom(40 * block + 123)  # 41 blocks
    src = _write(tmp_path / "src", {"model.bin": data})
    container = azurite.container()

    def put_blocks(proxy: FaultyProxy) -> int:
        return sum(
            1
            for r in proxy.log
            if r.method == "PUT" and "comp=block&" in r.path + "&" and not r.injected
        )

    forwarded, rule = _failing_after(25)
    with FaultyProxy(azurite.port, rule) as proxy:
        monkeypatch.setenv(
            "AZURE_STORAGE_CONNECTION_STRING",
            f"AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint={proxy.endpoint(ACCOUNT)}",
        )
        url = f"az://{container.container_name}/up"
        failed = stage(str(src), url, block_size=block, concurrency=4)
        assert not failed.ok and "model.bin" in failed.failed[0]
        first = put_blocks(proxy)
        assert first == 25
        assert blob_tree(container) == {}  # nothing committed: no torn blob
        proxy.fault = lambda method, path: None
        proxy.log.clear()
        summary = stage(str(src), url, block_size=block, concurrency=4)
        assert summary.ok, summary.failed
        second = put_blocks(proxy)
    assert second == 41 - 25, f"the re-run sent {second} blocks; 25 of 41 were staged"
    assert summary.bytes_copied == len(data) - 25 * block  # only what this run sent
    assert blob_tree(container) == {"up/model.bin": data}
    props = container.get_blob_client("up/model.bin").get_blob_properties()
    assert bytes(props.content_settings.content_md5).hex() == hashlib.md5(data).hexdigest()


def _most_in_flight(monkeypatch: pytest.MonkeyPatch, cls: type, method: str) -> list[int]:
    """Count the calls of ``cls.method`` under way at once; ``[0]``: the most there were."""
    real = getattr(cls, method)
    now, most = [0], [0]

    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        now[0] += 1
        most[0] = max(most[0], now[0])
        try:
            return await real(self, *args, **kwargs)
        finally:
            now[0] -= 1

    monkeypatch.setattr(cls, method, counted)
    return most


def test_block_uploads_of_many_files_keep_to_the_runs_requests_in_flight(
    azurite: Azurite, blob_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--concurrency counts the blocks in flight across every file, not per file (two files
    of 32 blocks of 8 MiB each held 875 MiB), and each file still lands whole with its MD5."""
    from azure.storage.blob.aio import BlobClient

    block = 64 << 10
    files = {f"f{i}.bin": os.urandom(6 * block + i) for i in range(4)}
    src = _write(tmp_path / "src", files)
    container = azurite.container()
    most = _most_in_flight(monkeypatch, BlobClient, "stage_block")
    url = f"az://{container.container_name}/up"
    summary = stage(str(src), url, block_size=block, concurrency=3)
    assert summary.ok, summary.failed
    assert blob_tree(container, "up/") == files
    assert 1 < most[0] <= 3, f"{most[0]} blocks in flight with --concurrency 3"
    for key, data in files.items():
        props = container.get_blob_client(f"up/{key}").get_blob_properties()
        assert bytes(props.content_settings.content_md5).hex() == hashlib.md5(data).hexdigest()


def test_block_ids_name_the_block_and_the_source_version() -> None:
    """Blocks staged for an older version of a file are never taken for the new one."""
    from stoker.store._blocks import block_id

    ids = [block_id("f.bin", "100:5000", i * 1000, 1000) for i in range(5)]
    assert len(set(ids)) == 5 and {len(i) for i in ids} == {32}  # one length per blob
    assert block_id("f.bin", "101:5000", 0, 1000) != ids[0]  # a newer mtime
    assert block_id("g.bin", "100:5000", 0, 1000) != ids[0]
    assert block_id("f.bin", "100:5000", 0, 999) != ids[0]


# -------------------------------------------------------------- server-side copy, by blocks
def _two_accounts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, binary: Path | None) -> Azurite:
    """One emulator holding two accounts (as two storage accounts in one region)."""
    monkeypatch.setenv("AZURITE_ACCOUNTS", f"{ACCOUNT}:{ACCOUNT_KEY};{OTHER}:{ACCOUNT_KEY}")
    if binary is not None:
        monkeypatch.setattr(azurite_module, "AZURITE_BIN", binary)
    server = Azurite(location=tmp_path / "azurite-two").start()
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", server.connection_string)
    return server


def _other_container(server: Azurite, name: str) -> tuple[Any, str]:
    """A container in the second account, and its URL with a container SAS."""
    import datetime as dt

    from azure.storage.blob import (
        BlobServiceClient,
        ContainerSasPermissions,
        generate_container_sas,
    )

    endpoint = f"http://127.0.0.1:{server.port}/{OTHER}"
    service = BlobServiceClient(
        endpoint,
        credential={"account_name": OTHER, "account_key": ACCOUNT_KEY},
        api_version=azurite_module.API_VERSION,
    )
    container = service.get_container_client(name)
    container.create_container()
    sas = generate_container_sas(
        OTHER,
        name,
        account_key=ACCOUNT_KEY,
        permission=ContainerSasPermissions(read=True, write=True, list=True, create=True, add=True),
        expiry=dt.datetime.now(dt.UTC) + dt.timedelta(hours=2),
    )
    return container, f"{endpoint}/{name}?{sas}"


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count every byte read through the stores' data path (a relay reads each one)."""
    read = [0]
    real_chunks, real_range = BlobStore.read_chunks, BlobStore.read_range

    async def chunks(self: BlobStore, *args: Any, **kwargs: Any) -> Any:
        async for chunk in real_chunks(self, *args, **kwargs):
            read[0] += len(chunk)
            yield chunk

    async def whole(self: BlobStore, *args: Any, **kwargs: Any) -> Any:
        data = await real_range(self, *args, **kwargs)
        read[0] += len(data)
        return data

    real_direct = DirectGets.read

    def direct(self: DirectGets, what: str, key: str, start: int, end: int, *args: Any) -> int:
        read[0] += end - start  # (asked: the test wants none at all)
        return real_direct(self, what, key, start, end, *args)

    monkeypatch.setattr(BlobStore, "read_chunks", chunks)
    monkeypatch.setattr(BlobStore, "read_range", whole)
    monkeypatch.setattr(DirectGets, "read", direct)
    return read


FILES = {
    "big.bin": os.urandom(5 * MiB + 7),  # 6 blocks of 1 MiB
    "mid/m.safetensors": os.urandom(MiB),
    "small.json": b'{"a": 1}',
    "empty.bin": b"",
}


@pytest.mark.skipif(not NEWER_AZURITE.exists(), reason=f"needs Azurite 3.37+ at {NEWER_AZURITE}")
def test_another_account_is_copied_by_the_service_block_by_block(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = _two_accounts(monkeypatch, tmp_path, NEWER_AZURITE)
    try:
        from azure.storage.blob import ContentSettings

        src = server.container()
        png = ContentSettings(content_type="image/png")  # carried to the copy, not guessed
        for key, data in FILES.items():
            src.upload_blob(key, data, content_settings=png if key == "big.bin" else None)
        dst, dst_url = _other_container(server, "copies")
        read = _counting_reads(monkeypatch)
        summary = stage(f"az://{src.container_name}", dst_url, block_size=MiB, concurrency=8)
        assert summary.ok, summary.failed
        assert read[0] == 0, f"{read[0]} bytes passed through stoker"
        assert summary.bytes_copied == sum(map(len, FILES.values()))
        assert blob_tree(dst) == FILES
        for key, data in FILES.items():
            settings = dst.get_blob_client(key).get_blob_properties().content_settings
            assert bytes(settings.content_md5 or b"").hex() == hashlib.md5(data).hexdigest()
        big = dst.get_blob_client("big.bin").get_blob_properties().content_settings
        assert big.content_type == "image/png"
        blocks = dst.get_blob_client("big.bin").get_block_list("committed")[0]
        assert [b.size for b in blocks] == [MiB] * 5 + [7]
        # A changed source is copied again; the unchanged ones are skipped.
        src.upload_blob("small.json", b'{"a": 2}', overwrite=True)
        again = stage(f"az://{src.container_name}", dst_url, block_size=MiB)
        assert (again.files_copied, again.files_skipped) == (1, len(FILES) - 1)
        assert blob_tree(dst)["small.json"] == b'{"a": 2}' and read[0] == 0
    finally:
        server.close()


@pytest.mark.skipif(not NEWER_AZURITE.exists(), reason=f"needs Azurite 3.37+ at {NEWER_AZURITE}")
def test_a_block_copy_of_many_files_keeps_to_the_runs_requests_in_flight(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """--concurrency counts Put Block From URL requests across every file, not per file (two
    files of 32 blocks each in flight had the emulator time out)."""
    from azure.storage.blob.aio import BlobClient

    server = _two_accounts(monkeypatch, tmp_path, NEWER_AZURITE)
    try:
        src = server.container()
        files = {f"f{i}.bin": os.urandom(4 * MiB + i) for i in range(4)}
        for key, data in files.items():
            src.upload_blob(key, data)
        dst, dst_url = _other_container(server, "gated")
        most = _most_in_flight(monkeypatch, BlobClient, "stage_block_from_url")
        summary = stage(f"az://{src.container_name}", dst_url, block_size=MiB, concurrency=3)
        assert summary.ok, summary.failed
        assert blob_tree(dst) == files
        assert 1 < most[0] <= 3, f"{most[0]} blocks in flight with --concurrency 3"
    finally:
        server.close()


def test_a_service_without_put_block_from_url_relays_through_a_spool(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Azurite 3.35 answers Put Block From URL with 501: the copy goes through a spool file."""
    server = _two_accounts(monkeypatch, tmp_path, None)
    try:
        src = server.container()
        for key, data in FILES.items():
            src.upload_blob(key, data)
        dst, dst_url = _other_container(server, "copies")
        summary = stage(f"az://{src.container_name}", dst_url, block_size=MiB, state_dir=tmp_path)
        if not summary.ok and "Put Block From URL" not in " ".join(summary.failed):
            raise AssertionError(summary.failed)
        assert summary.ok, summary.failed
        assert blob_tree(dst) == FILES
    finally:
        server.close()


@pytest.mark.skipif(not NEWER_AZURITE.exists(), reason=f"needs Azurite 3.37+ at {NEWER_AZURITE}")
def test_a_block_copy_of_a_changed_source_fails_and_logs_no_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each Put Block From URL reads the listed version only; the source URL carries a SAS
    (the source's, or one signed with its key), which no log line or error shows."""
    import logging

    server = _two_accounts(monkeypatch, tmp_path, NEWER_AZURITE)
    try:
        src = server.container()
        src.upload_blob("k.bin", os.urandom(3 * MiB))
        dst, dst_url = _other_container(server, "copies")
        real = BlobStore.list

        async def listing_then_change(self: BlobStore) -> Any:
            async for batch in real(self):
                yield batch
            if self.loc.bucket == src.container_name:
                src.upload_blob("k.bin", b"a newer version", overwrite=True)

        monkeypatch.setattr(BlobStore, "list", listing_then_change)
        caplog.set_level(logging.DEBUG)
        summary = stage(f"az://{src.container_name}", dst_url, block_size=MiB)
        assert not summary.ok and "changed while it was being copied" in summary.failed[0]
        assert blob_tree(dst) == {}
        shown = caplog.text + " ".join(summary.failed)
        leaked = re.findall(r"sig=(?!\*\*\*|REDACTED)[^&\s'\"]+", shown)
        assert not leaked, leaked
        monkeypatch.setattr(BlobStore, "list", real)
        assert stage(f"az://{src.container_name}", dst_url, block_size=MiB).ok
        assert blob_tree(dst) == {"k.bin": b"a newer version"}
    finally:
        server.close()


def test_a_copy_in_one_account_takes_the_tier(azurite: Azurite, blob_env: str) -> None:
    """Copy Blob (the service's copy within an account) sets --tier too."""
    src = azurite.client(blob_env)
    src.upload_blob("in/a.bin", b"a" * 1000)
    assert stage(f"{blob_env}/in", f"{blob_env}/out", tier="cool").ok
    assert src.get_blob_client("out/a.bin").get_blob_properties().blob_tier == "Cool"
