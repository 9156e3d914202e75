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
    """``text`` as a bar or status line shows it: redacted, and every URL without its query
    (a SAS's other fields are no secret, but they fill the line and hide the path)."""
    return re.sub(r"(\b[a-z][a-z0-9+.-]*://[^\s?]*)\?\S*", r"\1", redact(text))


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
