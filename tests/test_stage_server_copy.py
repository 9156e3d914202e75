"""Blob -> Blob: within one account the service copies each blob itself (Copy Blob), with no
byte passing through stoker; between endpoints stoker relays through a spool file."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from azurite import ACCOUNT, Azurite, blob_tree
from stoker.stage import stage, verify
from stoker.store import open_store
from stoker.store._azure import BlobStore
from stoker.store._direct_get import DirectGets

BLOCK = 1 << 20
FILES = {
    "empty.bin": b"",
    "a/small.bin": os.urandom(10_000),
    "a/b/big.bin": os.urandom(2 * BLOCK + 77),  # uploaded in blocks: stoker sets its MD5
}


def _md5s(container: Any) -> dict[str, bytes | None]:
    return {
        b.name: b.content_settings.content_md5 for b in container.list_blobs(include=["metadata"])
    }


def _no_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a blob was read through stoker; the service should copy it")

    monkeypatch.setattr(BlobStore, "read_range", refuse)
    monkeypatch.setattr(BlobStore, "read_chunks", refuse)
    monkeypatch.setattr(DirectGets, "read", refuse)


def test_one_account_is_copied_by_the_service(
    azurite: Azurite, blob_env: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    src, dst = azurite.container(), azurite.container()
    staged = tmp_path / "files"
    for key, data in FILES.items():
        (staged / key).parent.mkdir(parents=True, exist_ok=True)
        (staged / key).write_bytes(data)
    src_url = f"az://{src.container_name}/in"
    assert stage(str(staged), src_url, block_size=BLOCK).ok
    dst_url = f"az://{dst.container_name}/out"

    _no_reads(monkeypatch)
    first = stage(src_url, dst_url, block_size=BLOCK)
    assert first.ok, first.failed
    assert (first.files_copied, first.bytes_copied) == (len(FILES), sum(map(len, FILES.values())))
    assert blob_tree(dst, "out/") == FILES
    sources = {k.removeprefix("in/"): v for k, v in _md5s(src).items()}
    copies = {k.removeprefix("out/"): v for k, v in _md5s(dst).items()}
    assert copies == sources and all(copies.values())  # every copy carries its MD5
    report = verify(src_url, dst_url)  # (it lists both sides and compares their MD5s)
    assert report.ok and (report.checked, report.hashed) == (len(FILES), len(FILES))

    again = stage(src_url, dst_url, block_size=BLOCK)
    assert (again.files_copied, again.files_skipped) == (0, len(FILES))
    src.upload_blob("in/a/small.bin", b"new bytes", overwrite=True)
    changed = stage(src_url, dst_url, block_size=BLOCK)
    assert (changed.files_copied, changed.files_skipped) == (1, len(FILES) - 1)
    assert blob_tree(dst, "out/")["a/small.bin"] == b"new bytes"


def test_a_source_changed_after_the_listing_is_not_copied(
    azurite: Azurite, blob_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst = azurite.container(), azurite.container()
    src.upload_blob("k.bin", b"listed version")
    real = BlobStore.list

    async def listing_then_change(self: BlobStore) -> Any:
        async for batch in real(self):
            yield batch
        src.upload_blob("k.bin", b"a newer version", overwrite=True)  # after the listing

    monkeypatch.setattr(BlobStore, "list", listing_then_change)
    src_url = f"az://{src.container_name}"
    dst_url = f"az://{dst.container_name}"
    summary = stage(src_url, dst_url)
    assert not summary.ok and "changed while it was being copied" in summary.failed[0]
    assert blob_tree(dst) == {}
    monkeypatch.setattr(BlobStore, "list", real)
    assert stage(src_url, dst_url).ok
    assert blob_tree(dst) == {"k.bin": b"a newer version"}


def test_another_endpoint_goes_through_a_spool(
    azurite_factory: Callable[[], Azurite], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    one, two = azurite_factory(), azurite_factory()
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", one.connection_string)
    src, dst = one.container(), two.container()
    for key, data in FILES.items():
        src.upload_blob(key, data)
    src_url = f"{one.endpoint}/{src.container_name}"
    dst_url = f"{two.endpoint}/{dst.container_name}"

    async def refuse(*args: Any) -> None:
        raise AssertionError("Copy Blob cannot read a source on another endpoint here")

    monkeypatch.setattr(BlobStore, "copy_from", refuse)
    # The spool sits beside the job's manifest; what a killed run left there goes, and what a
    # running one holds stays.
    spool = tmp_path / "spool"
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    killed, running = spool / f"{host}-{dead.pid}-x1", spool / f"{host}-{os.getpid()}-x2"
    for folder in (killed, running):
        (folder / "a").mkdir(parents=True)
        (folder / "a" / "big.bin").write_bytes(b"left by a run")
    summary = stage(src_url, dst_url, block_size=BLOCK, state_dir=tmp_path)
    assert summary.ok, summary.failed
    assert blob_tree(dst) == FILES
    assert {k: bool(v) for k, v in _md5s(dst).items()} == dict.fromkeys(FILES, True)
    assert sorted(p.name for p in spool.iterdir()) == [running.name]  # and nothing of this run


def test_which_sources_the_service_can_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", "")
    sas = "sv=2024-01-01&sr=c&sp=rl&sig=c2lnbmF0dXJl"
    here = open_store("https://one.blob.core.windows.net/dst", allow_http=True)
    same = open_store("https://one.blob.core.windows.net/src", allow_http=True)
    other_sas = open_store(f"https://two.blob.core.windows.net/src?{sas}")
    other_key = open_store("https://two.blob.core.windows.net/src")
    local_sas = open_store(f"http://127.0.0.1:10000/{ACCOUNT}/src?{sas}")
    assert here.copies_from(same) and here.copies_from(other_sas)
    # Put Block From URL: the source's blocks read with its Azure AD token (no key, no SAS)
    assert here.copies_from(other_key)
    assert not here.copies_from(local_sas)  # the service cannot reach this machine
    assert not here.copies_from(open_store("/tmp"))


def test_an_azurite_started_as_its_docs_say_takes_every_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`azurite` with no flags refuses REST versions newer than its own: the SDK's default one
    failed every listing (HTTP 400 InvalidHeaderValue)."""
    strict = Azurite(strict=True).start()
    try:
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", strict.connection_string)
        src = tmp_path / "src"
        for key, data in FILES.items():
            (src / key).parent.mkdir(parents=True, exist_ok=True)
            (src / key).write_bytes(data)
        up = f"az://{strict.container().container_name}/data"
        copy = f"az://{strict.container().container_name}"
        assert stage(str(src), up, block_size=BLOCK).ok  # uploads set Content-MD5 by the SDK
        assert stage(up, copy).ok  # Copy Blob, by the SDK
        assert stage(copy, str(tmp_path / "back")).ok  # listed by the SDK
        assert verify(str(src), copy).ok and verify(up, str(tmp_path / "back")).ok
    finally:
        strict.close()
