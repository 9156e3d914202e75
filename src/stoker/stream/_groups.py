"""Data-parallel groups: which share of the epoch a rank reads.

The epoch is cut into global batches of ``dp_size x batch_size`` samples; data-parallel rank
``d`` reads slice ``d`` of each. Ranks that hold the same model replica (its tensor-, pipeline-
or context-parallel shards) have the same ``dp_rank``, and so read identical batches in
identical order; the ``dp_size`` replicas read disjoint slices that together make the epoch.

A rank learns its ``dp_rank`` and ``dp_size`` from, in order: ``dp_rank=`` / ``dp_size=``;
``process_group=`` (the data-parallel group: its rank and size); ``device_mesh=`` with
``mesh_dim=`` (a name or index, or several for a flattened dimension such as HSDP's
``("dp_replicate", "dp_shard")``); else the job's rank and world size (torch.distributed's, or
torchrun's), when every rank is its own replica. ``dp_size`` alone, smaller than the world, says
replicas exist but not which ranks form them: that is an error naming what to pass, not a guess.

Resolved once, at the dataset's construction, to two integers: nothing here runs per sample,
and the integers travel to DataLoader workers where a process group could not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._dist_env import rank_and_world
from ..errors import StreamError


@dataclass(frozen=True)
class DataGroup:
    """This rank's data-parallel rank and the number of data-parallel groups."""

    rank: int
    size: int


def fixed_group(
    dp_rank: int | None = None,
    dp_size: int | None = None,
    process_group: Any = None,
    device_mesh: Any = None,
    mesh_dim: str | int | Sequence[str | int] | None = None,
) -> DataGroup | None:
    """The group named by the dataset's arguments, or None when none names one (every rank
    is then its own replica: see ``current_group``)."""
    given = [
        name
        for name, value in (
            ("dp_rank", dp_rank),
            ("process_group", process_group),
            ("device_mesh", device_mesh),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise StreamError(
            f"StreamingDataset: {' and '.join(given)} both say which data-parallel group this "
            "rank is in: pass one of dp_rank= (with dp_size=), process_group= or device_mesh="
        )
    if mesh_dim is not None and device_mesh is None:
        raise StreamError("StreamingDataset mesh_dim=: pass device_mesh= beside it")
    if dp_size is not None and not _whole(dp_size, 1):
        raise StreamError(f"StreamingDataset dp_size={dp_size!r}: use a whole number >= 1")
    if dp_rank is not None:
        if dp_size is None:
            raise StreamError(
                f"StreamingDataset dp_rank={dp_rank!r}: pass dp_size= (the number of "
                "data-parallel groups) beside it"
            )
        if not _whole(dp_rank, 0) or dp_rank >= dp_size:
            raise StreamError(
                f"StreamingDataset dp_rank={dp_rank!r}: use a whole number from 0 to "
                f"dp_size - 1 ({dp_size - 1})"
            )
        return DataGroup(dp_rank, dp_size)
    if process_group is not None:
        group = _from_process_group(process_group)
    elif device_mesh is not None:
        group = _from_mesh(device_mesh, mesh_dim)
    else:
        return None if dp_size is None else _world_as_groups(dp_size)
    if dp_size is not None and dp_size != group.size:
        raise StreamError(
            f"StreamingDataset dp_size={dp_size}, but its {given[0]} has {group.size} "
            "data-parallel ranks: leave dp_size out, or make them agree"
        )
    return group


def current_group(fixed: DataGroup | None) -> DataGroup:
    """``fixed``, else every rank of the job its own data-parallel group."""
    if fixed is not None:
        return fixed
    rank, world = rank_and_world(error=StreamError)
    return DataGroup(rank, world)


def _world_as_groups(dp_size: int) -> DataGroup | None:
    rank, world = rank_and_world(error=StreamError)
    if dp_size == world:
        return DataGroup(rank, world)
    raise StreamError(
        f"StreamingDataset dp_size={dp_size} in a job of {world} ranks: which ranks share a "
        "model replica is not known, and a guess would feed a replica's ranks different "
        "batches: pass dp_rank= (this rank's data-parallel rank, e.g. rank // tp_size), "
        "process_group= (the data-parallel group) or device_mesh= with mesh_dim= (e.g. 'dp')"
    )


def _from_process_group(group: Any) -> DataGroup:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise StreamError(
            "StreamingDataset process_group=: torch.distributed is not started; call "
            "init_process_group() first"
        )
    rank = dist.get_rank(group)
    if rank < 0:
        raise StreamError(
            "StreamingDataset process_group=: this rank is not in that group; pass the "
            "data-parallel group this rank belongs to"
        )
    return DataGroup(rank, dist.get_world_size(group))


def _from_mesh(mesh: Any, mesh_dim: str | int | Sequence[str | int] | None) -> DataGroup:
    names = tuple(getattr(mesh, "mesh_dim_names", None) or ())
    if mesh_dim is None:
        if mesh.ndim != 1:
            raise StreamError(
                f"StreamingDataset device_mesh= has {mesh.ndim} dimensions "
                f"({', '.join(names) or 'unnamed'}): pass mesh_dim= naming the data-parallel "
                "one (or several, for a flattened one)"
            )
        mesh_dim = 0
    dims = [mesh_dim] if isinstance(mesh_dim, str | int) else list(mesh_dim)
    rank, size = 0, 1
    for dim in dims:  # several dimensions flatten in order, the last the fastest
        if isinstance(dim, str) and dim not in names:
            raise StreamError(
                f"StreamingDataset mesh_dim={dim!r}: the mesh's dimensions are "
                f"{', '.join(map(repr, names)) or 'unnamed (use an index)'}"
            )
        index = names.index(dim) if isinstance(dim, str) else dim
        if not 0 <= index < mesh.ndim:
            raise StreamError(
                f"StreamingDataset mesh_dim={dim!r}: the mesh has {mesh.ndim} dimensions"
            )
        rank = rank * mesh.size(index) + mesh.get_local_rank(index)
        size *= mesh.size(index)
    return DataGroup(rank, size)


def _whole(value: object, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least
