"""The one reader of files a user names (a job spec, a catalog, a measured record, a plan or a
simulation's JSON): each problem is one error line naming the file.

A file argument may be anything the shell can name: ``/dev/zero`` and ``/dev/urandom`` never end,
a FIFO with no writer blocks ``open`` forever and one whose writer never stops never ends, and a
sparse file can claim gigabytes it would take as many to read. So the file is stat'ed before it
is opened and refused unless it is a regular file of at most ``max_bytes``; it is opened with
O_NONBLOCK (a FIFO put in its place after the stat cannot block the open) and checked again on
the opened descriptor; and no more than ``max_bytes`` are read, whatever the file claims.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from typing import Any

from ._redact import printable
from .errors import StokerError

# A job spec or a catalog is a few KiB: a file past this is not one (and would take a while
# to parse). Measured records carry series: a week of one-second points is ~20 MiB of JSON.
MAX_TOML_BYTES = 16 * 2**20
MAX_JSON_BYTES = 256 * 2**20

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


def read_user_bytes(
    path: str | os.PathLike[str],
    what: str,
    error: type[StokerError] = StokerError,
    *,
    max_bytes: int = MAX_TOML_BYTES,
    name: str | None = None,
    missing_hint: str = "",
) -> bytes:
    """The bytes of the user's file ``path``, a ``what`` (e.g. "job spec"); anything else is
    ``error`` naming the file (``name`` when given, e.g. "--measured PATH")."""
    label = printable(name if name is not None else str(path))
    try:
        _check(os.stat(path), label, what, error, max_bytes)
        fd = os.open(path, _OPEN_FLAGS)
    except StokerError:
        raise
    except (FileNotFoundError, NotADirectoryError) as exc:
        # (NotADirectoryError: a folder on the way is a file, so there is no such file either)
        raise error(f"{label}: no such {what} file (it does not exist){missing_hint}") from exc
    except OSError as exc:
        raise error(f"{label}: cannot read the {what}: {exc.strerror}") from exc
    try:
        _check(os.fstat(fd), label, what, error, max_bytes)  # the file that was opened
        os.set_blocking(fd, True)
        chunks, got = [], 0
        while got <= max_bytes:  # the size stat gave is a claim: /proc's files say 0
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise error(f"{label}: cannot read the {what}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if got > max_bytes:
        raise error(_too_large(label, what, max_bytes))
    return b"".join(chunks)


def _check(
    st: os.stat_result, label: str, what: str, error: type[StokerError], max_bytes: int
) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{label}: is a folder; give the {what} file")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{label}: not a regular file (a device, FIFO or socket); give the {what} file")
    if st.st_size > max_bytes:
        raise error(_too_large(label, what, max_bytes))


def _too_large(label: str, what: str, max_bytes: int) -> str:
    return f"{label}: larger than {max_bytes // 2**20} MiB, too large for a {what}"


def read_user_text(
    path: str | os.PathLike[str], what: str, error: type[StokerError] = StokerError, **kw: Any
) -> str:
    """The user's file as UTF-8 text (see ``read_user_bytes``)."""
    data = read_user_bytes(path, what, error, **kw)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        label = printable(kw.get("name") or str(path))
        raise error(f"{label}: not UTF-8 text ({exc.reason}); a {what} is text") from exc


def load_user_toml(
    path: str | os.PathLike[str], what: str, error: type[StokerError] = StokerError, **kw: Any
) -> dict[str, Any]:
    """The user's TOML file as a dict; a file that is not TOML is one line naming the line."""
    text = read_user_text(path, what, error, **kw)
    try:
        return tomllib.loads(text)
    except (ValueError, RecursionError) as exc:  # (an int of 5,000 digits is a ValueError)
        label = printable(kw.get("name") or str(path))
        raise error(f"{label}: not valid TOML: {exc or 'nested too deep'}") from exc


def load_user_json(
    path: str | os.PathLike[str], what: str, error: type[StokerError] = StokerError, **kw: Any
) -> Any:
    """The user's JSON file, parsed; an empty file or one that is not JSON is one line."""
    kw.setdefault("max_bytes", MAX_JSON_BYTES)
    text = read_user_text(path, what, error, **kw)
    label = printable(kw.get("name") or str(path))
    if not text.strip():
        raise error(f"{label}: the {what} file is empty; write it again with stoker")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(
            f"{label}: not JSON ({exc.msg}, line {exc.lineno}); give the {what} as stoker wrote it"
        ) from exc
    except (ValueError, RecursionError) as exc:  # 5,000 digits; [[[[... past Python's stack
        why = str(exc) or "nested too deep"
        raise error(f"{label}: not JSON ({why}); give the {what} as stoker wrote it") from exc


def check_user_output(
    path: str | os.PathLike[str], flag: str, error: type[StokerError] = StokerError
) -> None:
    """Refuse an output path that names a device, FIFO or socket. stoker writes its file
    aside and renames it over the path: ``--out /dev/null`` run as root would replace the
    device itself, and a FIFO a reader waits on would be swapped for a file it never sees."""
    try:
        st = os.stat(path)
    except OSError:
        return  # not there (made), or unreachable (the write says why)
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        raise error(
            f"{flag} {printable(str(path))}: not a regular file (a device, FIFO or socket); "
            "stoker writes a file aside and renames it over the path, which would replace "
            "it: give a file name"
        )
