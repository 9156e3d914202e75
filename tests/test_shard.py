"""The shard rule shared by stage and (later) the streaming loader."""

import pytest

from stoker.shard import owner, owns, rank_from_env


def test_every_key_has_exactly_one_owner_and_shares_are_even():
    keys = [f"train/{i:06d}.bin" for i in range(20_000)]
    counts = [0] * 8
    for key in keys:
        owners = [r for r in range(8) if owns(key, r, 8)]
        assert owners == [owner(key, 8)]
        counts[owners[0]] += 1
    assert max(counts) / min(counts) < 1.1


def test_torchrun_node_rank_and_node_count(monkeypatch: pytest.MonkeyPatch):
    # torchrun on 4 nodes x 8 processes: this is process 13, on node 1.
    for name, value in {
        "RANK": "13",
        "WORLD_SIZE": "32",
        "LOCAL_WORLD_SIZE": "8",
        "GROUP_RANK": "1",
    }.items():
        monkeypatch.setenv(name, value)
    assert rank_from_env() == (1, 4)
    monkeypatch.setenv("STOKER_NODES", "2")
    assert rank_from_env() == (1, 2)


def test_plain_rank_and_world_size(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "5")
    assert rank_from_env() == (3, 5)
