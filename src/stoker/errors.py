"""One exception tree for everything stoker tells a user.

    StokerError   every error stoker raises on purpose; the CLI prints it, no traceback
    ├── UnitError     a size, rate, duration or count that cannot be read ("400 Gbs")
    ├── SpecError     a job spec that is missing, unreadable or invalid (names file, field)
    ├── CatalogError  a catalog file or override that is invalid
    └── PriceError    the Azure Retail Prices API answered badly or could not be reached

Third-party errors (pydantic, tomllib, httpx) are translated where they are caught and chained
with ``raise ... from exc`` so a debug run still shows the cause.
"""

from __future__ import annotations


class StokerError(Exception):
    """Base of every error stoker raises for the user to act on."""


class UnitError(StokerError, ValueError):
    """A quantity written in a form stoker cannot read."""


class SpecError(StokerError):
    """A job spec that cannot be used; the message names the file and the field."""


class CatalogError(StokerError):
    """A catalog (built-in or user override) that cannot be used, or a lookup that fails."""


class PriceError(StokerError):
    """The Azure Retail Prices API could not be read or answered in an unexpected form."""
