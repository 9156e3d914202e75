"""The ``--out`` folder: stoker writes only what it proves is its own.

A folder is stoker's for this deployment when its ``stoker-deployment.json`` is a valid
``stoker.deployment/1`` record of the same plan and resource group. The record holds the
sha256 of each file stoker wrote, so a re-run tells the user's edits from stoker's own text:
an edited ``main.parameters.json`` is kept as the user left it, any other edited file is
refused. Without ``force``, a folder holding anything else (a user's own ``main.json``,
another deployment, files stoker never wrote) is refused, naming what is there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._atomic import write_whole
from .._redact import printable
from .._user_files import load_user_json, read_user_bytes
from ..errors import ProvisionError, StokerError
from ._text import shown

SCHEMA = "stoker.deployment/1"
RECORD = "stoker-deployment.json"
FILES = (
    "main.json",
    "main.parameters.json",
    "cloud-init.yaml",
    "ccws.parameters.json",
    "README.md",
    RECORD,
)
# Files a user is expected to edit (their values): kept on a re-run, not refused.
KEPT_WHEN_EDITED = ("main.parameters.json",)
_ID = re.compile(r"[0-9a-f]{32}")
# The largest record and file stoker writes (a template of 800 resources is ~2 MiB): a file
# past these is not one stoker wrote.
_RECORD_MAX_BYTES = 16 << 20
_FILE_MAX_BYTES = 64 << 20


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Prior:
    """What an earlier run of this same deployment left in the folder."""

    deployment_id: str | None = None  # kept, so the resources' ownership tag stays the same
    hashes: dict[str, str] | None = None  # name -> sha256 stoker recorded when it wrote it


def _names(out: Path) -> list[str]:
    try:
        return sorted(p.name for p in out.iterdir())
    except OSError as exc:
        raise ProvisionError(f"--out {_p(out)}: cannot be read ({exc.strerror or exc})") from exc


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return True  # gone since the listing, or a dangling link: a rename replaces it


def _p(path: Path) -> str:
    return printable(str(path), lines=False)  # a name never drives the terminal


def _listed(names: list[str]) -> str:
    names = [printable(n, lines=False) for n in names]
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _record(out: Path) -> dict[str, Any] | str:
    """The folder's record, or why it is not a valid ``stoker.deployment/1`` one."""
    try:
        data = load_user_json(out / RECORD, "deployment record", max_bytes=_RECORD_MAX_BYTES)
    except StokerError as exc:  # a FIFO or device planted there, too large, not JSON
        why = str(exc).split(": ", 1)[-1]  # (the line names the file; the caller does too)
        return f"cannot be read as JSON ({why})"
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return f"is not a {SCHEMA} record"
    for key in ("plan", "resource_group", "deployment_id"):
        if not isinstance(data.get(key), str):
            return f"has no {key}"
    if not _ID.fullmatch(data["deployment_id"]):
        return f"has a deployment_id that is not 32 hex digits ({shown(data['deployment_id'])})"
    hashes = data.get("sha256", {})
    if not isinstance(hashes, dict) or not all(isinstance(v, str) for v in hashes.values()):
        return "has a sha256 that is not a map of file name to hash"
    return data


def prior(
    out: Path, plan: str, resource_group: str, *, force: bool, files: tuple[str, ...] = FILES
) -> Prior:
    """Refuse (ProvisionError naming ``--out``) a folder that is not this deployment's; return
    what an earlier run of it recorded. ``force`` refuses nothing but a file in the way.
    ``files``: the names this target writes (``--target aks`` writes others)."""
    if out.exists() and not out.is_dir():
        raise ProvisionError(f"--out {_p(out)}: is a file; give a folder for the deployment")
    if not out.is_dir():
        return Prior()
    names = _names(out)
    odd = [n for n in names if n in files and not _regular(out / n)]
    if odd:
        raise ProvisionError(
            f"--out {_p(out)}: {_listed(odd)} {'is' if len(odd) == 1 else 'are'} not a "
            "regular file (a folder, device, FIFO or socket) where stoker writes its files; move "
            f"{'it' if len(odd) == 1 else 'them'} aside"
        )
    record = _record(out) if RECORD in names else None
    same = (
        isinstance(record, dict)
        and record["plan"] == plan
        and record["resource_group"] == resource_group
    )
    found = Prior()
    if same and isinstance(record, dict):
        found = Prior(record["deployment_id"], dict(record.get("sha256", {})))
    if force:
        return found
    again = "; give an empty or new folder, or --force to write stoker's files there anyway"
    strangers = [n for n in names if n not in files]
    if strangers:
        raise ProvisionError(
            f"--out {_p(out)}: holds files stoker did not write ({_listed(strangers)}){again}"
        )
    if not names:
        return found
    if record is None:
        raise ProvisionError(
            f"--out {_p(out)}: holds {_listed(names)} but no {RECORD}, so stoker did not write "
            f"them{again} (it overwrites them)"
        )
    if isinstance(record, str):
        raise ProvisionError(f"--out {_p(out)}: its {RECORD} {record}{again} (it overwrites them)")
    if not same:
        raise ProvisionError(
            f"--out {_p(out)}: holds the deployment of plan {shown(record['plan'])} in resource "
            f"group {shown(record['resource_group'])}, not of plan {shown(plan)} in "
            f"{shown(resource_group)}; give another folder, or --force to replace it"
        )
    return found


def edited(out: Path, found: Prior, texts: dict[str, str], *, force: bool) -> list[str]:
    """The files of this deployment the user changed since stoker wrote them, to be kept as
    they are; refuses any other edited file. A file equal to what stoker writes now is not an
    edit (a run cut short between files leaves such ones)."""
    if force or found.hashes is None:
        return []
    changed = []
    for name, text in texts.items():
        path = out / name
        if name == RECORD or not path.exists():
            continue
        try:  # (a FIFO planted under the name must not block the read)
            have = digest(read_user_bytes(path, "deployment file", max_bytes=_FILE_MAX_BYTES))
        except StokerError:
            have = ""  # unreadable, or not a file: not provably stoker's text
        if have not in (found.hashes.get(name), digest(text.encode())):
            changed.append(name)
    refused = [n for n in changed if n not in KEPT_WHEN_EDITED]
    if refused:
        raise ProvisionError(
            f"--out {_p(out)}: {_listed(refused)} changed since stoker wrote "
            f"{'it' if len(refused) == 1 else 'them'}; move your edits aside, or --force to "
            "overwrite them"
        )
    return changed


def write(out: Path, texts: dict[str, str], keep: list[str]) -> list[Path]:
    """Each file whole or not at all (written aside, flushed, renamed), the record last, then
    the folder flushed; ``keep`` are left untouched. A folder that cannot be written (missing
    parent, read-only, full) is one error that names it."""
    written = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():
            path = out / name
            if name not in keep:
                write_whole(path, text.encode("utf-8"))
            written.append(path)
        fd = os.open(out, os.O_RDONLY)
        try:
            with contextlib.suppress(OSError):  # not every file system flushes a folder
                os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ProvisionError(
            f"--out {_p(out)}: cannot write the deployment there ({exc.strerror or exc}); "
            "give a folder this user can write"
        ) from exc
    return written
