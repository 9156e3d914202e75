"""``StageOptions``: every option of a stage run, typed once and checked in one place.

``stage()``, ``verify()``, their async twins, ``cache_pull()`` and ``stoker stage`` all build
this one object; what runs below them takes it, never the options one by one. Each field says
its default and the ``stoker stage`` flag it is. A bad value is one StageError line naming the
option, raised when the object is built (before anything is opened or copied).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import StageError
from ..store import DURABILITIES, Durability
from ..units import parse_bytes
from ._flags import Flags
from ._selection import Selection, select

Tier = Literal["hot", "cool", "cold", "archive"]
"""A Blob access tier as ``--tier`` takes it (any case: ``Hot`` is ``hot``)."""

MIN_BLOCK = 64 << 10  # smaller blocks only multiply requests (one byte each would never end)
MAX_BLOCK = 4000 << 20  # Blob's largest block (Put Block, service version 2019-12-12 on)


@dataclass(frozen=True)
class StageOptions:
    """How a stage (or verify) run copies; the defaults are ``stoker stage``'s."""

    include: tuple[str, ...] = ()
    """--include: take only keys matching one of these globs (fnmatch on the whole key)."""
    exclude: tuple[str, ...] = ()
    """--exclude: skip keys matching any of these globs."""
    rank: int | None = None
    """--rank: this node's share, 0-based; None: torchrun's RANK, else 0."""
    world_size: int | None = None
    """--world-size: number of shares; None: torchrun's WORLD_SIZE, else 1."""
    concurrency: int = 32
    """--concurrency: requests in flight (1 or more; verify's default is 8)."""
    block_size: int | str = 8 << 20
    """--block-size: range/block size in bytes, or text such as ``"8 MiB"`` (64 KiB to
    4000 MiB); always bytes (an int) once built."""
    dry_run: bool = False
    """--dry-run: say what would move; move nothing, write nothing."""
    delete: bool = False
    """--delete: delete what the destination has and the source does not (in the selection)."""
    hash_files: bool | None = None
    """--hash/--no-hash: MD5 every file; None: on when either side is remote."""
    checksum: bool = False
    """--checksum: a file already there counts as copied when its MD5 is the source's."""
    follow_symlinks: bool = False
    """--follow-symlinks: copy what a local source's symbolic links point to."""
    bwlimit: float | str | None = None
    """--bwlimit: bytes per second for all transfers together, or ``"100MB/s"``; None: no cap."""
    tier: Tier | None = None
    """--tier: Blob access tier of uploads; None: the account's default."""
    content_type: str | None = None
    """--content-type: Content-Type of uploads; None: guessed from each key's extension."""
    allow_http: bool = False
    """--allow-http: allow plain HTTP to a non-loopback endpoint (also STOKER_ALLOW_HTTP=1)."""
    durability: Durability | None = None
    """--durability: how durable a large downloaded file is before it is named and recorded
    complete: ``fsync`` (each file fsynced), ``batch`` (made durable together at sync points,
    named and recorded only then), ``none`` (never synced: a power cut may tear a file counted
    done); None: ``batch`` on a local file system, ``fsync`` on a network or shared one
    (Lustre, NFS, ...). See docs/design/stage.md, "Durability"."""
    state_dir: Path | None = None
    """--state-dir: where the resumable manifest lives; None: DST/.stoker for a local
    destination, else ~/.cache/stoker/stage."""

    # Worked out from the fields above when the object is built (checked there, once).
    selection: Selection = field(init=False, repr=False, compare=False)
    flags: Flags = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The order of the checks is the order stage() always checked them in.
        selection = select(tuple(self.include), tuple(self.exclude), self.rank, self.world_size)
        flags = Flags.checked(self.follow_symlinks, self.bwlimit, self.tier, self.content_type)
        block_size = self.block_size
        if isinstance(block_size, str):  # "8 MiB", as the CLI takes it
            block_size = int(parse_bytes(block_size))
        if self.concurrency < 1:
            raise StageError(f"--concurrency {self.concurrency}: use 1 or more (default 32)")
        if self.durability is not None and self.durability not in DURABILITIES:
            raise StageError(
                f"--durability {self.durability!r}: use one of {', '.join(DURABILITIES)} "
                "(default: batch on a local file system, fsync on a shared one)"
            )
        if not MIN_BLOCK <= block_size <= MAX_BLOCK:
            raise StageError(
                f"--block-size {block_size:,} bytes: use {MIN_BLOCK >> 10} KiB to "
                f"{MAX_BLOCK >> 20} MiB (default 8 MiB)"
            )
        state_dir = None if self.state_dir is None else Path(self.state_dir)
        for name, value in (
            ("include", tuple(self.include)),
            ("exclude", tuple(self.exclude)),
            ("block_size", block_size),
            ("state_dir", state_dir),
            ("selection", selection),
            ("flags", flags),
        ):
            object.__setattr__(self, name, value)  # (frozen: set once, here)

    @property
    def block_bytes(self) -> int:
        """``block_size`` in bytes (text was read when the object was built)."""
        return int(self.block_size)

    @classmethod
    def merged(
        cls,
        options: StageOptions | None,
        given: dict[str, Any],
        defaults: dict[str, Any] | None = None,
    ) -> StageOptions:
        """The options of one call that takes both keywords and ``options=``: ``options`` with
        each keyword in ``given`` that differs from its default (``defaults``, else the field's)
        put in its place; no ``options``: the keywords alone."""
        if options is None:
            return cls(**given)
        fields = {f.name: f.default for f in dataclasses.fields(cls) if f.init}
        defaults = {**fields, **(defaults or {})}
        changed = {k: v for k, v in given.items() if v != defaults[k]}
        return dataclasses.replace(options, **changed) if changed else options
