"""One exception tree for everything stoker tells a user.

    StokerError   every error stoker raises on purpose; the CLI prints it, no traceback;
                  its message never shows a secret (a SAS signature, a key: see _Redacted)
    ├── UnitError     a size, rate, duration or count that cannot be read ("400 Gbs")
    ├── SpecError     a job spec that is missing, unreadable or invalid (names file, field)
    ├── CatalogError  a catalog file or override that is invalid
    ├── PriceError    the Azure Retail Prices API answered badly or could not be reached
    ├── StoreError    a storage URL, credential or request that failed (never shows a secret)
    │   ├── AccessDeniedError   credentials refused, or none found; stops a run
    │   ├── NoContainerError    a container that does not exist and was not created; stops a run
    │   ├── UnsafeKeyError      an object key that would escape the destination (names it)
    │   ├── SourceChangedError  the source object changed mid-copy; a re-run takes the new one
    │   └── ChecksumError       a copy whose MD5 does not match the source's
    ├── StageError    a copy that cannot go on (a full or read-only disk, bad options,
    │                 nothing listed, another run into the destination); a re-run resumes
    ├── StreamError   a dataset, shard or sample that cannot be read (names the shard, offset)
    ├── CheckpointError  a save that failed in the background, or a checkpoint that cannot load
    │   ├── CorruptCheckpointError  a shard whose size or hash does not match its manifest
    │   └── UntrustedStateError     a state with arbitrary objects, loaded without trusted=True
    ├── ProvisionError  a deployment stoker refuses to write (a name, region, size or subnet
    │                   Azure would reject); names the field, and nothing is written
    ├── PreflightError  a deployment preflight cannot read (not a provision folder, a bad
    │                   argument); names the file or argument. Failed checks are a report
    ├── TeardownError  a deployment that cannot be torn down (names the resource, what to do);
    │   │              a re-run resumes where it stopped
    │   └── ArchiveError   the Lustre archive to Blob failed or was cancelled: the file
    │                      system is left in place, not deleted
    └── ReportError   a report input (plan, simulation, measured record) that cannot be read,
                      or a report that cannot be written; names the file and key

    StreamWarning (a UserWarning)  a dataset that reads, but not as meant (an epoch with no batch)

User files (specs, catalogs, JSON records) are read by stoker._user_files, which turns each
problem (missing, a folder, a device or FIFO, too large, not UTF-8, not TOML/JSON) into the
caller's error class, one line naming the file.

Third-party errors (pydantic, tomllib, httpx) are translated where they are caught and chained
with ``raise ... from exc`` so a debug run still shows the cause.
"""

from __future__ import annotations

from ._redact import printable, redact


class _Redacted:
    """A message with the secrets taken out as the exception or warning is made: many are built
    from the URL the user gave, SAS and all, and str, repr, a traceback and a copy pickled from
    a worker all read the message. Its control characters are escaped then too (a file or key
    name holding ESC or CR, shown raw, would drive the user's terminal)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(printable(redact(a)) if isinstance(a, str) else a for a in args))


class StokerError(_Redacted, Exception):
    """Base of every error stoker raises for the user to act on."""


class UnitError(StokerError, ValueError):
    """A quantity written in a form stoker cannot read."""


class SpecError(StokerError):
    """A job spec that cannot be used; the message names the file and the field."""


class CatalogError(StokerError):
    """A catalog (built-in or user override) that cannot be used, or a lookup that fails."""


class PriceError(StokerError):
    """The Azure Retail Prices API could not be read or answered in an unexpected form."""


class StoreError(StokerError):
    """A storage URL, credential or request that failed. Messages never include secrets."""


class AccessDeniedError(StoreError):
    """The service refused the credentials (HTTP 401 or 403): every request would fail alike."""


class NoContainerError(StoreError):
    """The container (or bucket) does not exist, and these credentials did not create it."""


class UnsafeKeyError(StoreError):
    """An object key that cannot be written safely under the destination."""


class SourceChangedError(StoreError):
    """The source object changed while it was being copied; a re-run copies the new version."""


class ChecksumError(StoreError):
    """A copy whose hash does not match its source's; the re-run fetches it again."""


class StageError(StokerError):
    """A transfer that cannot go on; what was already copied stays and a re-run resumes."""


class StreamError(StokerError):
    """A shard dataset that cannot be written or read; names the shard and sample offset."""


class StreamWarning(_Redacted, UserWarning):
    """A dataset that reads, but not as the user likely meant (an epoch with no batch)."""


class CheckpointError(StokerError):
    """A checkpoint that could not be saved or loaded; the message names the step and file."""


class UntrustedStateError(CheckpointError):
    """A checkpoint whose state holds arbitrary objects, loaded without ``trusted=True``."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint shard whose size or hash differs from its manifest (names the file)."""


class TeardownError(StokerError):
    """A teardown step that cannot go on; names the resource. Each step reads the resource's
    state first, so a re-run resumes where this one stopped."""


class ArchiveError(TeardownError):
    """The file system's archive to Blob failed or was cancelled; it was not deleted."""


class ProvisionError(StokerError):
    """A deployment that cannot be written as asked; names the field, and nothing is written."""


class PreflightError(StokerError):
    """A deployment or argument ``preflight`` cannot work from (names it); what Azure says
    about the deployment is the report, not this error."""


class ReportError(StokerError):
    """A report input that cannot be used, or an output that cannot be written (names the file
    and the key)."""
