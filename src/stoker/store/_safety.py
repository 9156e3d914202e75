"""Object keys become file paths only through here: nothing is ever written outside the root.

A key is refused, with an error that names it, when it is absolute, has an empty, ``.`` or
``..`` segment, contains NUL or a backslash, or has a name or path too long for the file system.
A symlink inside the root that points outside it is refused too.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UnsafeKeyError

PARTIAL_SUFFIX = ".stoker-partial"
STATE_DIR = ".stoker"


def check_key(key: str, name_max: int = 255, path_max: int = 4096) -> None:
    segs = key.split("/")
    why = None
    if not key:
        why = "it is empty"
    elif "\x00" in key:
        why = "it contains a NUL byte"
    elif "\\" in key:
        why = "it contains a backslash"
    elif key[0] == "/":
        why = "it is an absolute path"
    elif "" in segs or "." in segs or ".." in segs:
        why = "it has an empty, '.' or '..' segment"
    # (a character is at most 4 bytes: most keys pass the length checks without encoding)
    elif max(map(len, segs)) * 4 > name_max and any(len(seg.encode()) > name_max for seg in segs):
        why = f"a name in it is longer than the file system's {name_max} bytes"
    elif len(key) * 4 > path_max and len(key.encode()) > path_max:
        why = f"it is longer than the file system's {path_max}-byte path limit"
    elif key.endswith(PARTIAL_SUFFIX) or segs[0] == STATE_DIR:
        why = "it collides with stoker's own partial files or state directory"
    if why:
        raise UnsafeKeyError(f"refusing object key {key!r}: {why}; nothing was written for it")


class SafeRoot:
    """Checked paths under one root, remembering what it proved: the root's real path, and
    each folder found to stay inside it. Resolving a path costs a system call per component
    (root's included), and a listing names a folder's files one after another, all in flight
    before the first one creates the folder, so a folder is remembered once proved, existing
    or not, and resolved once. A folder not there yet is as safe as its nearest existing
    parent, which the resolution checked: stoker creates it as a real folder."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")
        self._real_root: str | None = None
        self._folders: set[str] = set()

    def file(self, key: str) -> str:
        """``root/key`` as a string (pathlib's objects cost more CPU than copying a small
        file), after checking the key and that no symlink leads outside the root."""
        check_key(key)
        path = f"{self.root}/{key}"
        folder = key.rpartition("/")[0]
        if folder in self._folders:
            return path
        if self._real_root is None:
            self._real_root = os.path.realpath(self.root or "/")
        parent = os.path.realpath(os.path.dirname(path))
        if os.path.commonpath([self._real_root, parent]) != self._real_root:
            raise UnsafeKeyError(
                f"refusing object key {key!r}: a symlink under {self.root or '/'} leads outside it"
            )
        self._folders.add(folder)
        return path


def safe_path(root: Path, key: str) -> Path:
    """``root / key``, checked (see SafeRoot)."""
    return Path(SafeRoot(str(root)).file(key))
