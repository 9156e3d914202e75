"""torchrun's environment, read in one place for the whole package, with one rule.

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and GROUP_RANK for every process
it starts. stream (which batches a rank reads), stage (which node stages which keys), checkpoint
(who saves, who polls the node's events) and measure (the sweep's process group) all read them
here. The rule: a variable that is set is a whole number; RANK is below WORLD_SIZE (and set
when WORLD_SIZE is over 1), LOCAL_RANK below LOCAL_WORLD_SIZE, GROUP_RANK below the number of
nodes. Anything else is one error that
names the variable, its value and what to do. Unset, the process is a job of one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import StokerError

NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


@dataclass(frozen=True)
class TorchrunEnv:
    """One process's place in a torchrun job (a process torchrun did not start: 0 of 1)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    node_rank: int = 0  # GROUP_RANK
    launched: bool = False  # whether torchrun (or someone by hand) set WORLD_SIZE

    @property
    def nodes(self) -> int:
        return max(1, self.world_size // self.local_world_size)


def torchrun_env(
    environ: Mapping[str, str] | None = None, *, error: type[StokerError] = StokerError
) -> TorchrunEnv:
    """torchrun's variables from ``environ`` (os.environ), checked by the one rule; a bad one
    raises ``error`` (the caller's area: StreamError, StageError, ...) naming it."""
    env = os.environ if environ is None else environ
    world = _whole(env, "WORLD_SIZE", 1, least=1, error=error)
    local_world = _whole(env, "LOCAL_WORLD_SIZE", world, least=1, error=error)
    nodes = max(1, world // local_world)
    return TorchrunEnv(
        rank=_whole(env, "RANK", 0, below=("WORLD_SIZE", world), error=error),
        world_size=world,
        local_rank=_whole(
            env, "LOCAL_RANK", 0, below=("LOCAL_WORLD_SIZE", local_world), error=error
        ),
        local_world_size=local_world,
        node_rank=_whole(env, "GROUP_RANK", 0, below=("the node count", nodes), error=error),
        launched="WORLD_SIZE" in env,
    )


def rank_and_world(*, error: type[StokerError] = StokerError) -> tuple[int, int]:
    """torch.distributed's rank and world size when a process group is running, else
    torchrun's RANK and WORLD_SIZE (checked), else (0, 1)."""
    dist = sys.modules.get("torch.distributed")  # only a process that imported it has a group
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    env = torchrun_env(error=error)
    return env.rank, env.world_size


def _whole(
    env: Mapping[str, str],
    name: str,
    default: int,
    *,
    least: int = 0,
    below: tuple[str, int] | None = None,
    error: type[StokerError],
) -> int:
    text = env.get(name)
    if text is None or not text.strip():
        if name == "RANK" and below is not None and below[1] > 1:  # which of them is this?
            raise error(f"RANK is unset but WORLD_SIZE={below[1]}: {_FIX}")
        return default
    value = int(text) if text.strip().isdigit() else -1
    if value < least or (below is not None and value >= below[1]):
        upper = f" below {below[0]} ({below[1]})" if below is not None else ""
        raise error(f"{name}={text}: torchrun sets a whole number >= {least}{upper}; {_FIX}")
    return value


_FIX = (
    "launch with torchrun, which sets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, "
    "or unset the ones set by hand"
)
