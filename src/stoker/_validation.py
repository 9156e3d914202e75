"""Turn pydantic's errors into one line per problem that names the field and what is allowed."""

from __future__ import annotations

from pydantic import ValidationError


def describe(exc: ValidationError, prefix: str = "") -> str:
    """``"cluster.vm_size: unknown VM size 'ND96'; known: ..."`` lines, one per error."""
    lines = []
    for error in exc.errors(include_url=False):
        parts = [*(prefix.split(".") if prefix else []), *error["loc"]]
        path = ".".join(str(part) for part in parts)
        message = error["msg"]
        for noise in ("Value error, ", "Assertion failed, "):
            message = message.removeprefix(noise)
        if error["type"] == "extra_forbidden":
            message = "unknown field; check its spelling against the documented fields"
        elif error["type"] == "missing":
            message = "required field is missing"
        elif error["type"] == "literal_error":
            message = f"{message} (got {error['input']!r})"
        lines.append(f"{path or '(top level)'}: {message}")
    return "\n".join(lines)
