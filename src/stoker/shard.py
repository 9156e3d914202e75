"""Which rank owns an object: one stable rule shared by ``stoker stage --rank`` and the
streaming loader, so each VM pulls to its NVMe exactly what it will read.

The rule hashes the key (BLAKE2b, 64 bits) modulo the world size: it needs no listing order,
no coordination between ranks, and every key has exactly one owner.
"""

from __future__ import annotations

import hashlib
import os


def owner(key: str, world_size: int) -> int:
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % world_size


def owns(key: str, rank: int, world_size: int) -> bool:
    return world_size <= 1 or owner(key, world_size) == rank


def rank_from_env() -> tuple[int, int]:
    """(rank, world size) of this node from torchrun's environment, else (0, 1).

    Staging is per node, so GROUP_RANK / NODE_RANK and the node count win over the per-process
    RANK when torchrun provides them. torchrun's variables are read (and checked) by
    stoker._dist_env, as everywhere in stoker.
    """
    from ._dist_env import torchrun_env
    from .errors import StageError

    env = torchrun_env(error=StageError)
    node = str(env.node_rank) if "GROUP_RANK" in env.given else os.environ.get("NODE_RANK")
    nodes = os.environ.get("STOKER_NODES")
    if nodes is None and {"WORLD_SIZE", "LOCAL_WORLD_SIZE"} <= env.given:
        nodes = str(env.nodes)  # torchrun's
    if node is not None and nodes is not None:
        return int(node), int(nodes)
    if {"RANK", "WORLD_SIZE"} <= env.given:
        return env.rank, env.world_size
    return 0, 1
