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


def safe_file(root: str, key: str, checked: set[str] | None = None) -> str:
    """``root/key`` as a string, after checking the key and that no symlink leads outside
    ``root`` (a string: copying many small files, pathlib's objects cost more CPU than the
    copy).

    ``checked`` remembers folders already proven to stay inside ``root`` (resolving a path
    costs a system call per component, which adds up over millions of keys).
    """
    check_key(key)
    root = root.rstrip("/")
    path = f"{root}/{key}"
    folder = key.rpartition("/")[0]
    if checked is not None and folder in checked:
        return path
    real_root = os.path.realpath(root or "/")
    parent = os.path.realpath(os.path.dirname(path))
    if os.path.commonpath([real_root, parent]) != real_root:
        raise UnsafeKeyError(
            f"refusing object key {key!r}: a symlink under {root or '/'} leads outside it"
        )
    if checked is not None and os.path.isdir(parent):
        checked.add(folder)
    return path


def safe_path(root: Path, key: str, checked: set[str] | None = None) -> Path:
    """``root / key`` (see safe_file)."""
    return Path(safe_file(str(root), key, checked))
