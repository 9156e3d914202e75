"""``Store.read_all``: a small object whole, or None where there is none, including one that
another process deletes between the size request and the read (a rank's part record, which
rank 0 removes once it has published the index: tests/test_shards_convert.py met it so)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from azurite import Azurite
from stoker.errors import StoreError
from stoker.store import open_store


def _deleted_after_head(store, delete) -> None:  # noqa: ANN001 - any Store
    """``store`` whose reads find the object gone: ``delete`` runs after head, before the read."""
    read_range = store.read_range

    async def late(key: str, start: int, end: int, etag: str | None = None) -> bytes:
        delete(key)
        return await read_range(key, start, end, etag)

    store.read_range = late


def test_a_local_object_deleted_between_head_and_read_reads_as_absent(tmp_path: Path) -> None:
    (tmp_path / "part-1.json").write_bytes(b'{"part": 1}')
    store = open_store(str(tmp_path))
    assert asyncio.run(store.read_all("part-1.json")) == b'{"part": 1}'
    assert asyncio.run(store.read_all("missing.json")) is None
    _deleted_after_head(store, lambda key: (tmp_path / key).unlink())
    assert asyncio.run(store.read_all("part-1.json")) is None


def test_a_blob_deleted_between_head_and_read_reads_as_absent(
    blob_env: str, azurite: Azurite
) -> None:
    container = azurite.client(blob_env)
    container.upload_blob("records/part-1.json", b'{"part": 1}')
    store = open_store(f"{blob_env}/records")
    assert asyncio.run(store.read_all("part-1.json")) == b'{"part": 1}'
    _deleted_after_head(store, lambda key: container.delete_blob(f"records/{key}"))
    assert asyncio.run(store.read_all("part-1.json")) is None


def test_a_read_that_fails_while_the_object_is_still_there_is_raised(tmp_path: Path) -> None:
    (tmp_path / "part-1.json").write_bytes(b"{}")
    store = open_store(str(tmp_path))

    async def broken(key: str, start: int, end: int, etag: str | None = None) -> bytes:
        raise StoreError(f"reading {key}: the service answered 500")

    store.read_range = broken
    with pytest.raises(StoreError, match="answered 500"):
        asyncio.run(store.read_all("part-1.json"))
