"""What a run reads from its source: the keys it takes (globs, then this rank's share) and the
checks that keep a mistyped source from passing as an empty one. Shared by stage and verify,
so that a copy is verified on the keys that made it."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from ..errors import StageError
from ..shard import owns, rank_from_env
from ..store import ObjectInfo, Store


@dataclass(frozen=True)
class Selection:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    rank: int = 0
    world_size: int = 1

    def matches(self, key: str) -> bool:
        """Whether the globs take ``key`` (this rank's share aside)."""
        if self.include and not any(fnmatch.fnmatchcase(key, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(key, p) for p in self.exclude)

    def wants(self, key: str) -> bool:
        return self.matches(key) and owns(key, self.rank, self.world_size)

    @property
    def filtered(self) -> bool:
        return bool(self.include or self.exclude)

    def describe(self) -> str:
        """The options that made this selection, as typed (for messages)."""
        parts = [f"--include '{p}'" for p in self.include]
        parts += [f"--exclude '{p}'" for p in self.exclude]
        if self.world_size > 1:
            parts.append(f"--rank {self.rank} --world-size {self.world_size}")
        return " ".join(parts)

    def takes(self, obj: ObjectInfo) -> bool:
        """Whether the run copies ``obj``: a key it wants, and not a folder marker (an empty
        "dir/" blob that hierarchical namespace or Storage Explorer leaves: no file)."""
        return not (obj.key.endswith("/") and not obj.size) and self.wants(obj.key)

    def __str__(self) -> str:
        return f"{self.include}|{self.exclude}|{self.rank}/{self.world_size}"


def select(
    include: tuple[str, ...], exclude: tuple[str, ...], rank: int | None, world_size: int | None
) -> Selection:
    """The keys a run takes; ``rank``/``world_size`` default to torchrun's environment."""
    if rank is None or world_size is None:
        env_rank, env_world = rank_from_env()
        rank = env_rank if rank is None else rank
        world_size = env_world if world_size is None else world_size
    if not 0 <= rank < world_size:
        raise StageError(f"--rank {rank} is outside --world-size {world_size}")
    return Selection(tuple(include), tuple(exclude), rank, world_size)


def is_utf8(key: str) -> bool:
    """False for a local file name that was not UTF-8 (Python holds its bytes as surrogates)."""
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_source(src: Store) -> None:
    """Raise unless a local source is a folder (a missing one would list as empty)."""
    root = src.local_root
    if root is not None and not root.is_dir():
        what = "is a file" if root.exists() else "does not exist"
        raise StageError(
            f"{src} {what}: the source is a folder (for one file, give its folder and "
            "--include NAME)"
        )


def nothing_selected(src: Store, sel: Selection, listed: int) -> str:
    return (
        f"{sel.describe()}: none of the {listed:,} objects {src} lists is taken; check the "
        "patterns (fnmatch on the whole key, where '*' also crosses '/': 'train/*.parquet', "
        "'*.json'); nothing was copied or deleted"
    )


def nothing_listed(src: Store) -> str:
    return (
        f"{src} lists no objects: check the container and the prefix (a prefix is a folder: "
        ".../data means data/...); nothing was copied or deleted"
    )
