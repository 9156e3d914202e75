"""The secrets stoker has seen, and ``redact``, which takes them out of any text it shows.

A module of its own, with no imports from stoker, so that ``errors`` can redact every message
at construction and the store layer can register each secret it resolves."""

from __future__ import annotations

import re

_SECRETS: set[str] = set()


def redact(text: str) -> str:
    """``text`` with every known secret, any SAS signature and any URL's password replaced by
    ``***``."""
    for secret in _SECRETS:
        text = text.replace(secret, "***")
    text = re.sub(r"(?i)(sig|AccountKey|SharedAccessSignature)=[^&;\s\"']+", r"\1=***", text)
    return re.sub(r"(://[^/\s:@]*:)[^/\s@]+@", r"\1***@", text)


def shown(text: str) -> str:
    """``text`` as a bar or status line shows it: redacted, printable, and every URL without
    its query (a SAS's other fields are no secret, but they fill the line and hide the path)."""
    text = re.sub(r"(\b[a-z][a-z0-9+.-]*://[^\s?]*)\?\S*", r"\1", redact(text))
    return printable(text, lines=False)


# C0 and C1 controls (ESC starts a terminal's escape sequences, CR rewrites the line, C1's
# 0x9b is a CSI of its own), the line and paragraph separators, and the bidi overrides that
# show text in another order than it is.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROLS_AND_LINES = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    c = ord(match.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: str, *, lines: bool = True) -> str:
    """``text`` with every control character written as its escape (ESC as ``\\x1b``), so a
    file, key or spec name never drives the terminal that shows it; ``lines`` keeps newlines
    and tabs (a message's own lines), else they are escaped too (a name on one line)."""
    return (_CONTROLS if lines else _CONTROLS_AND_LINES).sub(_escape, text)


def remember(*secrets: str | None) -> None:
    _SECRETS.update(s for s in secrets if s and len(s) >= 8)


class RedactFilter:
    """A logging filter that redacts each record's message: urllib3 logs every request's
    path and query at DEBUG, SAS signature included, where azure-core's own logging policy
    would have redacted it."""

    def filter(self, record: object) -> bool:
        import logging

        assert isinstance(record, logging.LogRecord)
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


_FILTER = RedactFilter()


def redact_logger(name: str) -> None:
    """Redact every record the logger ``name`` emits (idempotent)."""
    import logging

    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
