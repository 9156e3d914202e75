"""Text a user gave, made safe for the place it is written: an ARM string, a shell word, a tag.

Every writer passes user text (the plan's name, the resource group, the install requirement)
through one of these rather than formatting it in: a name holding ``$(...)`` stays a name in
the README's commands, and a name like ``[listKeys(...)]`` stays a name in the template.
"""

from __future__ import annotations

import shlex
import unicodedata

from ..errors import ProvisionError

# Azure's limits on a tag (Microsoft.Resources/tags): name 512 characters, value 256.
TAG_NAME_MAX = 512
TAG_VALUE_MAX = 256
# Characters Azure refuses in a tag's name.
_TAG_NAME_FORBIDDEN = set("<>%&\\?/")


def sh(word: str) -> str:
    """``word`` as one POSIX shell word, taken literally (no $, `, ;, globs or quotes act)."""
    return shlex.quote(word)


def arm_literal(text: str) -> str:
    """``text`` as an ARM string value that ARM takes literally. ARM evaluates a string that
    starts with ``[`` and ends with ``]``; a leading ``[[`` is its escape for one. A string
    that does not end with ``]`` is already literal and must not be escaped (ARM's docs)."""
    if text.startswith("[") and text.endswith("]"):
        return "[" + text
    return text


def shown(text: str, most: int = 40) -> str:
    """``text`` for an error line: quoted, escaped, and cut to ``most`` characters."""
    cut = text if len(text) <= most else text[:most] + "..."
    return repr(cut)


def refuse_controls(field: str, text: str) -> None:
    """Refuse a control character (newline, ESC, DEL, ...) in ``text``: it would end a line of
    the README or cloud-init, or rewrite the terminal that shows it."""
    for i, ch in enumerate(text):
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            raise ProvisionError(
                f"{field}: {shown(text)} holds the control character {ch!r} at position {i}; "
                "use printable characters only"
            )


def check_tag(field: str, name: str, value: str) -> None:
    """One tag as Azure takes it: name 1-512 characters without <>%&\\?/, value up to 256."""
    if not name or len(name) > TAG_NAME_MAX or _TAG_NAME_FORBIDDEN & set(name):
        raise ProvisionError(
            f"{field}: tag name {shown(name)} is not 1-{TAG_NAME_MAX} characters without "
            "< > % & \\ ? /"
        )
    if len(value) > TAG_VALUE_MAX:
        raise ProvisionError(
            f"{field}: {shown(value)} is {len(value)} characters; it is written as the value of "
            f"the tag {name}, and Azure allows at most {TAG_VALUE_MAX}"
        )
