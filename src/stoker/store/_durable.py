"""How durable a large downloaded file is before it is named and recorded complete.

``Durability`` is the choice (``--durability``):

- ``fsync``: each file is fsynced before it is renamed into place and recorded: on the disk,
  whatever happens next. The default on network and shared file systems (NFS, Lustre, GPFS,
  BeeGFS, SMB, FUSE): there other nodes read the file, and a writer's crash loses the pages it
  had not sent to the servers while the name and the manifest's record stay.
- ``batch``: files are written through the page cache, with no fsync or writeback of their
  own; finished ones wait under their partial names until a sync point (every SYNC_EVERY bytes,
  and the end of the run) makes them durable together (an fsync each if they are few, else one
  ``syncfs`` per local file system), and only then are they renamed and recorded. The default
  on local file systems (ext4, XFS, btrfs, F2FS, tmpfs: node-local NVMe scratch). A
  ``kill -9`` or a power cut leaves the files since the last sync point unrecorded and under
  their partial names; the next run resumes them (their finished units, unless the machine
  rebooted since).
- ``none``: renamed and recorded as soon as written, never synced: as fast as a tool that
  leaves it all to the kernel. A process crash loses nothing (the page cache holds it), but
  after a power cut or a kernel crash a named file may be torn while the manifest counts it
  done: for scratch that is re-staged after a reboot.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Literal

from ._base import Store
from ._posix import PosixStore, disk_error, syncfs, syncs_as_a_whole

Durability = Literal["fsync", "batch", "none"]
DURABILITIES: tuple[Durability, ...] = ("fsync", "batch", "none")

# Files finished under ``batch`` are made durable and named once this many bytes of them wait:
# a sync point costs the disk's time for what it writes out, not a wait per file.
SYNC_EVERY = 4 << 30
FSYNC_UP_TO = 16  # a sync point of at most this many files fsyncs each (see _sync)


def default_durability(root: Path) -> Durability:
    """``batch`` where one syncfs covers every file written under ``root`` (a local file
    system), else ``fsync``."""
    return "batch" if syncs_as_a_whole(root) else "fsync"


def publish_synced(dst: Store, keys: list[str]) -> None:
    """Make the partial files of ``keys`` in ``dst`` (a folder: only downloads wait to be
    named) durable together, then rename each into place. If the sync fails no file is named
    and every one is removed (after a failed writeback their pages may be gone): the caller
    records them to be fetched again."""
    assert isinstance(dst, PosixStore)
    partials = [str(dst.partial(key)) for key in keys]
    try:
        _sync(partials)
    except OSError as exc:
        for path in partials:
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise disk_error(exc, partials[0] if partials else str(dst)) from exc
    for key, path in zip(keys, partials, strict=True):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise disk_error(exc, path) from exc
        dst.publish(key, fd, sync=False, sync_dir=False)  # (closes fd; durable already)


def _sync(partials: list[str]) -> None:
    """An fsync each for a few files; for more, one syncfs per file system that a syncfs covers
    whole (an fsync each elsewhere). A syncfs also waits for whatever else is dirty on that file
    system (other programs' writes on a shared scratch disk); a few fsyncs wait only for these
    files, where more would each wait for a journal commit."""
    whole = len(partials) > FSYNC_UP_TO
    synced: set[int] = set()  # devices a syncfs covered
    for path in partials:
        fd = os.open(path, os.O_RDONLY)
        try:
            device = os.fstat(fd).st_dev
            if device in synced:
                continue
            if whole and syncs_as_a_whole(Path(path)):
                syncfs(fd)
                synced.add(device)
            else:
                os.fsync(fd)
        finally:
            os.close(fd)
