"""Pieces of a download written past the page cache (O_DIRECT) into a local file system.

A large import through the page cache copies every byte into pages the kernel has just taken
for it; on a VM whose host takes back memory freed a moment ago (this one), those fresh pages
were most of an import's system time, and it varied 1-5x from run to run with how recently
they had been freed (BENCHMARKS.md "stage cpu"). Written with O_DIRECT from the reader
threads' page-aligned buffers (_direct_get), the bytes go from those buffers to the disk: no
page cache to fill, none to write back, and what a write returned is on the device. Used only
where nothing reads the file back while it is written (no MD5 to take in file order) and on a
local file system (ext4, XFS on the node's NVMe): on Lustre or NFS each O_DIRECT write is a
synchronous round trip to the servers. A piece that is not whole (the file's last) or that the
file system refuses goes through the page cache instead.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ._posix import write_all

ALIGN = 4096  # the alignment O_DIRECT asks for on every local file system here (or less)
# A direct write a piece, and each is a request to the disk (on a VM, a notification that exits
# to the host): 1 MiB pieces cost ~15 % more CPU an import than 4 MiB ones, with no copy to keep
# in the CPU's cache in return. The reader threads hold one such buffer each.
PIECE = 4 << 20


class DirectWriter:
    """``write(pos, piece)`` into the file behind ``fd`` (opened again at ``path`` with
    O_DIRECT): whole aligned pieces straight to the disk, the rest through ``fd``."""

    def __init__(self, path: Path, fd: int) -> None:
        self.fd = fd
        try:
            self.direct = os.open(path, os.O_WRONLY | getattr(os, "O_DIRECT", 0))
        except OSError:  # (a file system that refuses O_DIRECT: the page cache, as before)
            self.direct = -1

    @property
    def bypassing(self) -> bool:
        return self.direct >= 0

    def write(self, pos: int, piece: bytes | memoryview) -> None:
        if self.direct >= 0 and pos % ALIGN == 0 and len(piece) % ALIGN == 0:
            try:
                write_all(self.direct, piece, pos)
                return
            except OSError as exc:
                if exc.errno != errno.EINVAL:  # (refused for its alignment: not a disk error)
                    raise
                self.close()  # ...so this file goes through the page cache from here on
        write_all(self.fd, piece, pos)

    def close(self) -> None:
        if self.direct >= 0:
            os.close(self.direct)
            self.direct = -1
