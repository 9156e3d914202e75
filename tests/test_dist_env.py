"""torchrun's environment, read by one helper with one rule for stream, stage, checkpoint and
measure: each bad value is one error naming the variable, in the reader's own error class."""

from __future__ import annotations

import pytest

from stoker._dist_env import torchrun_env
from stoker.errors import CheckpointError, StageError, StokerError, StreamError

TORCHRUN = {"RANK": "13", "WORLD_SIZE": "32", "LOCAL_RANK": "5", "LOCAL_WORLD_SIZE": "8"}


def test_torchruns_variables_and_a_job_of_one() -> None:
    env = torchrun_env(TORCHRUN | {"GROUP_RANK": "1"})
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size) == (13, 32, 5, 8)
    assert (env.node_rank, env.nodes, env.launched) == (1, 4, True)
    alone = torchrun_env({})
    assert (alone.rank, alone.world_size, alone.local_rank, alone.launched) == (0, 1, 0, False)
    assert torchrun_env({"WORLD_SIZE": "1"}).rank == 0  # one process: RANK may be left out


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WORLD_SIZE": "0"}, r"^WORLD_SIZE=0: torchrun sets a whole number >= 1;"),
        ({"WORLD_SIZE": "two"}, r"^WORLD_SIZE=two: torchrun sets a whole number >= 1;"),
        ({"WORLD_SIZE": "2"}, r"^RANK=\(unset\): .* >= 0 below WORLD_SIZE \(2\);"),
        ({"WORLD_SIZE": "2", "RANK": "2"}, r"^RANK=2: .* below WORLD_SIZE \(2\);"),
        ({"RANK": "1"}, r"^RANK=1: .* below WORLD_SIZE \(1\);"),
        ({"RANK": "-1"}, r"^RANK=-1: .* below WORLD_SIZE \(1\);"),
        (TORCHRUN | {"LOCAL_RANK": "8"}, r"^LOCAL_RANK=8: .* below LOCAL_WORLD_SIZE \(8\);"),
        (TORCHRUN | {"LOCAL_WORLD_SIZE": "0"}, r"^LOCAL_WORLD_SIZE=0: .* >= 1;"),
        (TORCHRUN | {"GROUP_RANK": "4"}, r"^GROUP_RANK=4: .* below the node count \(4\);"),
    ],
)
def test_one_rule_one_message_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(StokerError, match=message + r" launch with torchrun"):
        torchrun_env(env)


def test_each_area_reads_it_through_the_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    """stream, stage, checkpoint and measure: the same rule, each in its own error class."""
    from stoker.checkpoint._group import Group
    from stoker.measure._process_group import LAUNCH, init_from_env
    from stoker.shard import rank_from_env
    from stoker.stream._dataset import rank_and_world

    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "4")
    for call, error in (
        (rank_and_world, StreamError),
        (rank_from_env, StageError),
        (lambda: Group.__new__(Group).refuse_unstarted(), CheckpointError),  # (reads env first)
    ):
        with pytest.raises(error, match=r"^RANK=4: torchrun sets .* below WORLD_SIZE \(4\)"):
            call()
    with pytest.raises(StokerError, match=rf"^RANK=4: .*; run it as `{LAUNCH}`"):
        init_from_env()
