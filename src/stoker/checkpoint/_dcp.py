"""torch.distributed.checkpoint through stoker's tiers and commit protocol.

    dcp.save(state, storage_writer=ckpt.dcp_writer(step))        # or dcp.async_save
    dcp.load(state, storage_reader=ckpt.dcp_reader())            # any world size: DCP reshards

DCP's FileSystemWriter writes its files into the step folder on the fast tier. Each rank hashes
the files it wrote and hands the hashes to the coordinator inside DCP's own result gathering;
after DCP's ``.metadata`` the coordinator writes stoker's manifest (kind "dcp"), which is the
commit: a step without it is never read. The durable upload follows in the background (by the
coordinator, so the fast tier must be shared by the ranks, as Lustre or NetApp are, or the job
runs on one node). The reader checks every file against the manifest before DCP reads it.
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
        folder = ckpt.fast.path(step, "x").parent
        folder.mkdir(parents=True, exist_ok=True)
        super().__init__(folder, sync_files=True, **options)

    def write_data(self, plan: Any, planner: Any) -> Future[list[WriteResult]]:
        results = super().write_data(plan, planner).wait()
        names = sorted({r.storage_data.relative_path for r in results})
        records = [FileRecord(n, *self._size_and_hash(n)) for n in names]
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
        records.append(FileRecord(DCP_METADATA, *self._size_and_hash(DCP_METADATA)))
        manifest = CheckpointManifest(self.step, self.ckpt.group.world_size, records, kind="dcp")
        self.ckpt.commit_external(manifest)


class DCPReader(FileSystemReader):
    def __init__(self, ckpt: Checkpointer, step: int | None = None) -> None:
        self.ckpt = ckpt
        self.step, manifest = _newest_dcp(ckpt, step)
        for record in manifest.files:  # every byte DCP may read is checked first
            path = ckpt.fast.path(self.step, record.name)
            if hash_file(path, record.size) != record.xxh3:
                raise CorruptCheckpointError(
                    f"{path}: hash does not match the manifest of step {self.step}"
                )
        super().__init__(ckpt.fast.path(self.step, DCP_METADATA).parent)


def _newest_dcp(ckpt: Checkpointer, step: int | None) -> tuple[int, CheckpointManifest]:
    found = committed_steps(ckpt.tiers, step)
    for s in sorted(found, reverse=True):
        tier = found[s][0]
        manifest = tier.manifest(s)
        if manifest is None or manifest.kind != "dcp":
            continue
        if tier is not ckpt.fast:  # a DCP load may read any file: bring them all
            for record in manifest.files:
                fetch(tier, ckpt.fast, s, record.name, manifest)
            ckpt.fast.commit(manifest, pointer=False)
        return s, manifest
    what = f"step {step}" if step is not None else "any step"
    where = ", ".join(str(t) for t in ckpt.tiers)
    raise CheckpointError(
        f"no complete checkpoint saved through torch.distributed.checkpoint ({what}) on {where}"
    )
