"""Names on a tier, and the manifest that commits a checkpoint.

    PREFIX/step-000000001000/shard-00000-of-00002.bin   one per rank (or DCP's files)
    PREFIX/step-000000001000/manifest.json              written last: the commit
    PREFIX/latest.json                                   {"step": 1000}, a hint for humans/tools

A step folder without ``manifest.json`` is incomplete: never loaded, cleaned up later. The same
names are used on a POSIX tier and on Blob, so the commit protocol is the same on both.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from ..errors import CheckpointError, CorruptCheckpointError

FORMAT = "stoker.checkpoint/2"
READS = ("stoker.checkpoint/1", FORMAT)  # /1: no layout (every rank's shard holds its whole state)
MANIFEST = "manifest.json"
POINTER = "latest.json"
STEP_RE = re.compile(r"^step-(\d{12,})$")  # 12 digits at least: steps may count tokens


def step_dir(step: int) -> str:
    if not isinstance(step, int) or isinstance(step, bool):
        raise CheckpointError(f"step {step!r}: a checkpoint step is a whole number")
    if step < 0:
        raise CheckpointError(f"step {step} is negative; checkpoint steps count up from 0")
    return f"step-{step:012d}"


def step_of(folder: str) -> int | None:
    m = STEP_RE.match(folder)
    return int(m.group(1)) if m else None


def shard_name(rank: int, world_size: int) -> str:
    return f"shard-{rank:05d}-of-{world_size:05d}.bin"


@dataclass(frozen=True)
class FileRecord:
    name: str  # relative to the step folder
    size: int
    xxh3: str
    rank: int | None = None  # the rank that wrote it (None: not recorded, format /1)
    # replicated tensors this file holds, for other ranks' ranged reads:
    # name -> [offset, nbytes, dtype, shape, device, xxh3 of those bytes]
    tensors: dict[str, list] = field(default_factory=dict, compare=True, hash=False)


@dataclass
class CheckpointManifest:
    step: int
    world_size: int
    files: list[FileRecord]
    kind: str = "stoker"  # "stoker": one shard per rank; "dcp": torch.distributed.checkpoint
    created: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    format: str = FORMAT
    # save(replicated=...): True (the whole state), the top-level keys every rank holds
    # identically, or None (nothing replicated: each shard holds its rank's whole state)
    replicated: bool | list[str] | None = None
    private: list[str] | None = None  # top-level keys each rank holds for itself (None: all)
    # the ranks that share each fast tier, when there are several (node-local disks); None:
    # one fast tier for every rank
    nodes: list[list[int]] | None = None
    # the job that wrote it (see _claim.py): retention, load and listing act only on their
    # job's steps; None: written by a stoker from before job ids (its tier's holder owns it)
    job_id: str | None = None

    @property
    def node_local(self) -> bool:
        return bool(self.nodes) and len(self.nodes) > 1

    def node_of(self, rank: int | None) -> int | None:
        """The index in ``nodes`` of the fast tier ``rank`` wrote to (None: not node-local)."""
        for i, ranks in enumerate(self.nodes or []):
            if rank in ranks:
                return i
        return None

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    def file(self, name: str) -> FileRecord:
        for f in self.files:
            if f.name == name:
                return f
        raise CheckpointError(f"step {self.step}: the manifest lists no file {name}")

    def to_json(self) -> bytes:
        raw = asdict(self)
        for f in raw["files"]:  # a DCP file, or a shard without replicated tensors
            if f["rank"] is None:
                del f["rank"]
            if not f["tensors"]:
                del f["tensors"]
        for key in ("replicated", "private", "nodes", "job_id"):
            if raw[key] is None:
                del raw[key]
        return json.dumps(raw, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> CheckpointManifest:
        try:
            raw = json.loads(data)
            if raw.get("format") not in READS:
                raise CheckpointError(
                    f"{where}: format {raw.get('format')!r} is not one of {', '.join(READS)}; "
                    "it was written by another tool or a newer stoker"
                )
            raw["files"] = [FileRecord(**f) for f in raw["files"]]
            return cls(**raw)
        except CheckpointError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CorruptCheckpointError(
                f"{where}: unreadable checkpoint manifest ({exc})"
            ) from exc
