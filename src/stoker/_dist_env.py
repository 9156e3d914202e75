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
    # TORCHELASTIC_RUN_ID: the same for every rank and restart of one torchrun job (None: unset,
    # or torchrun's "none", its value when no --rdzv-id was given)
    run_id: str | None = None
    given: frozenset[str] = frozenset()  # the variables that were set

    @property
    def launched(self) -> bool:
        """Whether torchrun (or someone by hand) set WORLD_SIZE."""
        return "WORLD_SIZE" in self.given

    @property
    def nodes(self) -> int:
        return max(1, self.world_size // self.local_world_size)


def torchrun_env(
    environ: Mapping[str, str] | None = None,
    *,
    error: type[StokerError] = StokerError,
    launch: str = "",
) -> TorchrunEnv:
    """torchrun's variables from ``environ`` (os.environ), checked by the one rule; a bad one
    raises ``error`` (the caller's area: StreamError, StageError, ...) naming it, and says to
    run ``launch`` (a command line) when given."""
    env = os.environ if environ is None else environ
    fix = f"run it as `{launch}`" if launch else _FIX

    def whole(name: str, default: int, least: int = 0, below: tuple[str, int] | None = None) -> int:
        return _whole(env, name, default, least=least, below=below, error=error, fix=fix)

    world = whole("WORLD_SIZE", 1, least=1)
    local_world = whole("LOCAL_WORLD_SIZE", world, least=1)
    nodes = max(1, world // local_world)
    return TorchrunEnv(
        rank=whole("RANK", 0, below=("WORLD_SIZE", world)),
        world_size=world,
        local_rank=whole("LOCAL_RANK", 0, below=("LOCAL_WORLD_SIZE", local_world)),
        local_world_size=local_world,
        node_rank=whole("GROUP_RANK", 0, below=("the node count", nodes)),
        given=frozenset(n for n in NAMES if (env.get(n) or "").strip()),
        run_id=_run_id(env),
    )


def _run_id(env: Mapping[str, str]) -> str | None:
    text = (env.get("TORCHELASTIC_RUN_ID") or "").strip()
    return None if text.lower() in ("", "none") else text


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
    least: int,
    below: tuple[str, int] | None,
    error: type[StokerError],
    fix: str,
) -> int:
    text = (env.get(name) or "").strip()
    # RANK must be said where there are several: which of them is this one?
    if not text and not (name == "RANK" and below is not None and below[1] > 1):
        return default
    value = int(text) if text.isdigit() else -1
    if value < least or (below is not None and value >= below[1]):
        upper = f" below {below[0]} ({below[1]})" if below is not None else ""
        shown = text or "(unset)"
        raise error(f"{name}={shown}: torchrun sets a whole number >= {least}{upper}; {fix}")
    return value


_FIX = (
    "launch with torchrun, which sets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, "
    "or unset the ones set by hand"
)
