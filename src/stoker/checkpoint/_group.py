"""The ranks that save one checkpoint together: torch.distributed when it is initialized (every
rank writes its shard; rank 0 commits after all have written), else this process alone."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from .._dist_env import torchrun_env
from ..errors import CheckpointError

CHANNELS = ("write", "upload", "load")


class Group:
    def __init__(self) -> None:
        self.rank, self.world_size = 0, 1
        # the ranks that share each fast tier (one list per folder; sorted); [[0]] alone
        self.nodes: list[list[int]] = [[0]]
        self._groups: dict[str, Any] = {}
        try:
            import torch.distributed as dist
        except ImportError:  # pragma: no cover - torch without distributed support
            return
        if dist.is_available() and dist.is_initialized():
            self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
            # Each background thread gets its own gloo group: two threads must never run
            # collectives on one group at once, and the training loop's NCCL group stays free.
            self._groups = {c: dist.new_group(backend="gloo") for c in CHANNELS}
            self.nodes = [list(range(self.world_size))]

    def find_nodes(self, root: Path, *, create: bool = True) -> None:
        """Which ranks share the fast tier ``root``: each rank leaves a probe file there, and
        sees whose probes it can see. One folder for everyone (Lustre, NetApp, one VM) gives
        one group; local NVMe on each node gives one group per node (emulated nodes, with a
        folder each, too). A rank that cannot probe is taken to share with everyone, as
        before (its tier raises at its first save anyway)."""
        if self.world_size == 1:
            return
        token, probe = uuid.uuid4().hex, None
        try:
            if create:
                root.mkdir(parents=True, exist_ok=True)
            probe = root / f".stoker-node-probe-{token}"
            probe.touch()
        except OSError:
            token = ""
        tokens = self.all_gather(token, "write")
        seen = [
            r for r, t in enumerate(tokens) if t and (root / f".stoker-node-probe-{t}").exists()
        ]
        views = self.all_gather(seen if token else None, "write")  # everyone has looked
        if probe is not None:
            probe.unlink(missing_ok=True)
        if any(v is None for v in views):
            return
        self.nodes = sorted({tuple(v) for v in views}, key=lambda ranks: ranks[0])  # type: ignore[assignment]
        self.nodes = [list(ranks) for ranks in self.nodes]

    @property
    def node(self) -> list[int]:
        """The ranks that share this rank's fast tier."""
        return next((n for n in self.nodes if self.rank in n), [self.rank])

    @property
    def node_leader(self) -> bool:
        """The lowest rank on this rank's fast tier: it prunes that tier."""
        return self.rank == min(self.node)

    @property
    def node_local(self) -> bool:
        """Whether the ranks write to several fast tiers (local disks on several nodes)."""
        return len(self.nodes) > 1

    def refuse_unstarted(self) -> None:
        """Refuse to save as one rank where torchrun started several (WORLD_SIZE > 1) without a
        process group, or with one started after the Checkpointer: every rank would write the
        same step's files into the same folders."""
        world = torchrun_env(error=CheckpointError).world_size
        if self.world_size == 1 and world > 1:
            raise CheckpointError(
                f"WORLD_SIZE={world} (torchrun's), but this Checkpointer saves as one process "
                "alone, so every rank would write the same files: call "
                "torch.distributed.init_process_group() before creating the Checkpointer"
            )

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def all_gather(self, obj: Any, channel: str) -> list[Any]:
        if self.world_size == 1:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj, group=self._groups[channel])
        return out

    def min(self, value: float, channel: str) -> float:
        """The smallest of every rank's ``value``: one all-reduce of 8 bytes, cheap enough to run
        every training step (``all_gather`` pickles, and makes two collectives)."""
        if self.world_size == 1:
            return value
        import torch
        import torch.distributed as dist

        tensor = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(tensor, op=dist.ReduceOp.MIN, group=self._groups[channel])
        return float(tensor.item())
