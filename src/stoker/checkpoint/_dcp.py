"""torch.distributed.checkpoint through stoker's tiers and commit protocol.

    dcp.save(state, storage_writer=ckpt.dcp_writer(step))        # or dcp.async_save
    dcp.load(state, storage_reader=ckpt.dcp_reader())            # any world size: DCP reshards

DCP's FileSystemWriter writes its files into the step folder on the fast tier. Each rank hashes
the files it wrote and hands the hashes to the coordinator inside DCP's own result gathering;
after DCP's ``.metadata`` the coordinator writes stoker's manifest (kind "dcp"), which is the
commit: a step without it is never read. The durable upload follows in the background: each
rank uploads the files it wrote, from its own fast tier (so node-local fast tiers work), and
the coordinator uploads ``.metadata`` and commits on the durable tier after every rank has
uploaded. The reader checks every file against the manifest before DCP reads it, and fetches
from the durable tier what its fast tier lacks (another node's files) or holds damaged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from ..errors import CheckpointError, CorruptCheckpointError
from ._load import committed_steps, fetch
from ._manifest import CheckpointManifest, FileRecord
from ._shardfile import hash_file

if TYPE_CHECKING:
    from ._checkpointer import Checkpointer

HASHES = "__stoker_file_hashes__"  # an extra result entry; removed before DCP's metadata
DCP_METADATA = ".metadata"


class DCPWriter(FileSystemWriter):
    def __init__(self, ckpt: Checkpointer, step: int, **options: Any) -> None:
        self.ckpt, self.step = ckpt, step
        self.coordinator = ckpt.group.leader
        self.names: list[str] = []  # the files this rank wrote
        self.stats = ckpt.last_save if ckpt.last_save and ckpt.last_save.step == step else None
        folder = ckpt.fast.path(step, "x").parent
        folder.mkdir(parents=True, exist_ok=True)
        super().__init__(folder, sync_files=True, **options)

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.coordinator = is_coordinator
        super().set_up_storage_writer(is_coordinator, *args, **kwargs)

    def write_data(self, plan: Any, planner: Any) -> Future[list[WriteResult]]:
        results = super().write_data(plan, planner).wait()
        names = sorted({r.storage_data.relative_path for r in results})
        rank = self.ckpt.group.rank
        records = [FileRecord(n, *self._size_and_hash(n), rank) for n in names]
        self.names = names
        if not self.coordinator and self.stats is not None:  # (the coordinator's, at finish)
            self.ckpt._pipeline.upload_files(self.stats, names, None)  # noqa: SLF001
        marker = WriteResult(MetadataIndex(HASHES), 0, records)
        done: Future[list[WriteResult]] = Future()
        done.set_result([*results, marker])
        return done

    def _size_and_hash(self, name: str) -> tuple[int, str]:
        path = self.ckpt.fast.path(self.step, name)
        size = path.stat().st_size
        return size, hash_file(path, size)

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        records: list[FileRecord] = []
        kept = []
        for rank_results in results:
            for r in rank_results:
                if r.index.fqn == HASHES:
                    records.extend(r.storage_data)
            kept.append([r for r in rank_results if r.index.fqn != HASHES])
        super().finish(metadata, kept)
        group = self.ckpt.group
        records.append(FileRecord(DCP_METADATA, *self._size_and_hash(DCP_METADATA), group.rank))
        manifest = CheckpointManifest(
            self.step,
            group.world_size,
            records,
            kind="dcp",
            nodes=group.nodes if group.node_local else None,
            job_id=self.ckpt.job_id,
        )
        self.ckpt.commit_external(manifest)
        if self.stats is not None:
            names = [*self.names, DCP_METADATA]
            self.ckpt._pipeline.upload_files(self.stats, names, manifest)  # noqa: SLF001


class DCPReader(FileSystemReader):
    def __init__(self, ckpt: Checkpointer, step: int | None = None) -> None:
        self.ckpt = ckpt
        self.step, manifest, tier = _newest_dcp(ckpt, step)
        # The lowest rank on each fast tier checks every file DCP may read and fetches from the
        # durable tier what is missing there (another node's files) or damaged; the others wait
        # (two ranks fetching one file into one folder would collide).
        error: tuple[bool, str] | None = None
        if ckpt.group.node_leader:
            try:
                _bring(ckpt, self.step, manifest, tier)
            except CheckpointError as exc:
                error = (isinstance(exc, CorruptCheckpointError), str(exc))
        failed = [e for e in ckpt.group.all_gather(error, "load") if e is not None]
        if failed:
            corrupt, why = failed[0]
            raise (CorruptCheckpointError if corrupt else CheckpointError)(why)
        super().__init__(ckpt.fast.path(self.step, DCP_METADATA).parent)


def _bring(ckpt: Checkpointer, step: int, manifest: CheckpointManifest, tier: Any) -> None:
    """Every file of a DCP step on the fast tier, verified; fetched from the durable tier
    when missing or damaged here; the manifest committed here when it was not."""
    for record in manifest.files:
        path = ckpt.fast.path(step, record.name)
        try:
            good = hash_file(path, record.size) == record.xxh3
        except (OSError, CheckpointError):  # missing (another node's file) or truncated
            good = False
        if good:
            continue
        source = tier if tier is not ckpt.fast else ckpt.durable
        if source is None:
            raise CorruptCheckpointError(
                f"{path}: missing, or its hash does not match the manifest of step {step}, "
                "and there is no durable tier to read it from"
            )
        fetch(source, ckpt.fast, step, record.name, manifest)
    if tier is not ckpt.fast:
        ckpt.fast.commit(manifest, pointer=False)


def _newest_dcp(ckpt: Checkpointer, step: int | None) -> tuple[int, CheckpointManifest, Any]:
    """The newest DCP step on any tier (or ``step``), its manifest and the fastest tier
    that has it committed."""
    found = committed_steps(ckpt.tiers, step)
    for s in sorted(found, reverse=True):
        tier = found[s][0]
        manifest = tier.manifest(s)
        if manifest is None or manifest.kind != "dcp":
            continue
        return s, manifest, tier
    what = f"step {step}" if step is not None else "any step"
    where = ", ".join(str(t) for t in ckpt.tiers)
    raise CheckpointError(
        f"no complete checkpoint saved through torch.distributed.checkpoint ({what}) on {where}"
    )
