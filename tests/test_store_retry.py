"""One retry budget: a request is retried below (obstore's and the SDK's policies, on
store._retry's time budget); a layer above that tries again (a stream's shard) does so only
while that budget lasts, and never for what no retry mends (refused credentials, no container)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stoker.errors import AccessDeniedError, StoreError, StreamError
from stoker.stream import ShardWriter, StreamingDataset, _shard_access


@pytest.fixture
def dataset(blob_env: str) -> str:
    url = f"{blob_env}/ds"
    with ShardWriter(url, shard_size="4KiB") as w:
        for i in range(4):
            w.write(bytes([i]) * 1000)
    return url


def _failing(monkeypatch: pytest.MonkeyPatch, exc: Exception) -> list[int]:
    calls: list[int] = []

    async def download(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        raise exc

    monkeypatch.setattr(_shard_access, "download", download)
    monkeypatch.setattr(_shard_access.time, "sleep", lambda s: None)
    return calls


@pytest.mark.parametrize(
    ("exc", "budget_s", "tries"),
    [
        (StoreError("reading x: connection reset"), 120.0, _shard_access.FETCH_TRIES),
        (StoreError("reading x: connection reset"), -1.0, 1),  # the requests spent the budget
        (AccessDeniedError("reading x: HTTP 403"), 120.0, 1),  # no retry mends it
    ],
)
def test_a_shard_is_fetched_again_only_within_the_budget_and_when_it_can_help(
    dataset: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    exc: Exception,
    budget_s: float,
    tries: int,
) -> None:
    ds = StreamingDataset(dataset, tmp_path / "cache", shuffle=False)
    calls = _failing(monkeypatch, exc)
    monkeypatch.setattr(_shard_access, "retry_budget_s", lambda: budget_s)
    with pytest.raises(StreamError, match=f"tried {tries} times"):
        ds[0]
    assert len(calls) == tries
