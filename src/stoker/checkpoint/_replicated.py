"""Replicated state written once: which rank's shard file holds each replicated tensor.

``save(step, state, replicated=("model", "optim"))`` names the top-level keys whose values every
data-parallel rank holds identically (``replicated=True``: the whole state, DDP). Their tensors
are split among the ranks, greedily by size (largest first, each to the rank with the fewest
bytes so far; ties by name, then by lowest rank), so that each is written exactly once and the
writes are balanced. The assignment depends only on the names and sizes, which every rank has,
so every rank computes the same one without a collective. The other (private) entries are
written by their own rank, as before.

In a shard file the replicated tensors this rank holds come first, then its private ones: the
replicated part of each file is one contiguous range, which another rank reads in one request.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import CheckpointError

Replicated = bool | Sequence[str] | None


@dataclass(frozen=True)
class Plan:
    """What this rank writes: ``replicated`` (the argument, normalised), the private top-level
    keys (None: the whole state is private), and ``owner``: replicated tensor name -> rank."""

    rank: int
    world_size: int
    replicated: bool | list[str] | None
    private: list[str] | None
    owner: dict[str, int]
    layout: str = ""  # a hash of the replicated names and sizes: the same on every rank

    def holds(self, name: str) -> bool:
        """Whether this rank's file holds the tensor ``name`` (its own, or its replicated share)."""
        return self.owner.get(name, self.rank) == self.rank


def normalise(
    replicated: Replicated, state: Any, step: int
) -> tuple[bool | list[str] | None, list[str] | None]:
    """``replicated`` as the manifest records it, and the private top-level keys."""
    if replicated is None or replicated is False:
        return None, None
    if replicated is True:
        return True, []
    if isinstance(replicated, str):
        replicated = [replicated]
    keys = list(replicated)
    if not isinstance(state, dict):
        raise CheckpointError(
            f"step {step}: replicated={keys!r} names top-level keys, but the state is a "
            f"{type(state).__name__}, not a dict; pass replicated=True when the whole state is "
            "the same on every rank"
        )
    missing = [k for k in keys if k not in state]
    if missing:
        raise CheckpointError(
            f"step {step}: replicated= names {missing!r}, which the state does not have (its "
            f"keys: {list(state)!r}); name top-level keys of the state"
        )
    return keys, [k for k in state if k not in keys]


def is_replicated(path: str, replicated: bool | list[str] | None) -> bool:
    """Whether the tensor at ``path`` (flatten's path: ``['model']['w']``) is replicated."""
    if replicated is None:
        return False
    if replicated is True:
        return True
    for key in replicated:
        head = f"[{key!r}]"
        if path == head or path.startswith(head + "["):
            return True
    return False


def assign(sizes: Sequence[tuple[str, int]], world_size: int) -> dict[str, int]:
    """Replicated tensor name -> the rank that writes it: largest first, each to the rank with
    the fewest bytes so far (the lowest rank on a tie). Deterministic from names and sizes."""
    loads = [(0, rank) for rank in range(world_size)]
    heapq.heapify(loads)
    owner: dict[str, int] = {}
    for name, nbytes in sorted(sizes, key=lambda s: (-s[1], s[0])):
        load, rank = heapq.heappop(loads)
        owner[name] = rank
        heapq.heappush(loads, (load + nbytes, rank))
    return owner


def plan(
    tensors: Sequence[tuple[str, Any]],
    replicated: Replicated,
    state: Any,
    rank: int,
    world_size: int,
    step: int,
) -> Plan:
    """Which of ``tensors`` (flatten's (path, tensor) pairs) this rank writes."""
    keys, private = normalise(replicated, state, step)
    sizes = [(p, t.numel() * t.element_size()) for p, t in tensors if is_replicated(p, keys)]
    names = [p for p, _ in sizes]
    if len(set(names)) != len(names):  # (flatten's paths are unique; a guard for the future)
        raise CheckpointError(f"step {step}: two replicated tensors share a name")
    layout = hashlib.sha256(json.dumps(sorted(sizes)).encode()).hexdigest()
    return Plan(rank, world_size, keys, private, assign(sizes, world_size), layout)
