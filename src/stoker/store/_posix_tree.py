"""A POSIX folder tree as a store's listing: its files as keys, in batches, each folder's sorted.

Symbolic links are skipped and counted, or, when followed (a source's ``--follow-symlinks``),
taken as what they point to, files and folders, as if they were there: a link to a folder that
holds it (a loop) and a link that leads nowhere are skipped and named. Partial files and the
root's state folder are never listed. A file or subfolder removed while the listing runs (a
checkpoint pruned by another rank) is left out, not an error.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator

from ._base import LIST_BATCH, ObjectInfo
from ._safety import PARTIAL_SUFFIX, STATE_DIR

Folder = tuple[str, frozenset]  # a key prefix ("" the root, else "a/b/"), the folders above it


class TreeListing:
    def __init__(self, root: str, *, follow_symlinks: bool) -> None:
        self.root, self.follow = root, follow_symlinks
        self.links_skipped = 0  # symbolic links left out (not following them)
        self.skipped_links: list[str] = []  # keys of links left out: loops, dangling (following)

    async def batches(self) -> AsyncIterator[list[ObjectInfo]]:
        # Each folder with the (device, inode) of the folders above it when links are
        # followed: one met again is a loop.
        todo: list[Folder] = [("", frozenset())]
        batch: list[ObjectInfo] = []
        while todo:
            # (one folder at a time: scanning a few at once was slower, cold;
            # docs/stage-cpu-notes.md)
            prefix, above = todo.pop()
            folders, files = await asyncio.to_thread(self._scan, prefix, above)
            todo.extend(reversed(folders))
            for info in files:
                batch.append(info)
                if len(batch) >= LIST_BATCH:
                    yield batch
                    batch = []
        if batch:
            yield batch

    def _scan(self, prefix: str, above: frozenset) -> tuple[list[Folder], list[ObjectInfo]]:
        """One folder's subfolders and files, each sorted; the stats run in the calling thread,
        off the event loop."""
        folders: list[Folder] = []
        files: list[ObjectInfo] = []
        path = self.root + "/" + prefix
        try:
            if self.follow:  # (one stat per folder: a folder met again below itself is a loop)
                st = os.stat(path)
                here = (st.st_dev, st.st_ino)
                if here in above:
                    self.skipped_links.append(
                        f"{prefix.rstrip('/')} (a loop: it leads to a folder that holds it)"
                    )
                    return [], []
                above = above | {here}
            entries = os.scandir(path)
        except FileNotFoundError:
            if not prefix:
                raise
            return [], []  # a subfolder removed while the listing ran
        with entries:
            for entry in entries:
                if entry.is_symlink():
                    if not self.follow:
                        self.links_skipped += 1
                        continue
                    try:
                        st = entry.stat()  # what it points to
                    except OSError:  # dangling, or a loop of links
                        self.skipped_links.append(f"{prefix}{entry.name} (it leads nowhere)")
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        folders.append((f"{prefix}{entry.name}/", above))
                    elif stat.S_ISREG(st.st_mode) and not entry.name.endswith(PARTIAL_SUFFIX):
                        files.append(_info(prefix + entry.name, st))
                elif entry.is_dir(follow_symlinks=False):
                    if prefix or entry.name != STATE_DIR:
                        folders.append((f"{prefix}{entry.name}/", above))
                elif entry.is_file(follow_symlinks=False) and not entry.name.endswith(
                    PARTIAL_SUFFIX
                ):
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:  # removed since the folder was read
                        continue
                    files.append(_info(prefix + entry.name, st))
        folders.sort()
        files.sort(key=lambda info: info.key)
        return folders, files

    def notes(self, where: str) -> list[str]:
        """What this listing said of symbolic links in ``where``, for a summary's notes."""
        notes = []
        if self.links_skipped:
            notes.append(
                f"skipped {self.links_skipped:,} symbolic link(s) in {where}: "
                "--follow-symlinks copies what they point to"
            )
        if self.skipped_links:
            shown = "; ".join(self.skipped_links[:10])
            more = len(self.skipped_links) - 10
            notes.append(
                f"skipped {len(self.skipped_links):,} symbolic link(s) in {where} that cannot "
                f"be followed: {shown}" + (f"; and {more:,} more" if more > 0 else "")
            )
        return notes


def _info(key: str, st: os.stat_result) -> ObjectInfo:
    return ObjectInfo(key, st.st_size, f"{st.st_mtime_ns}:{st.st_size}")
