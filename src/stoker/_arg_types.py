"""The Python twins' arguments checked for type at the door: ``teardown(deployment=123)`` or
``provision(..., force="no")`` is one error naming the argument, not a traceback from deep
inside, and never a wrong reading (``"no"`` is a true value: it would force).

    check_args(TeardownError, deployment=(deployment, PATH), dry_run=(dry_run, bool))
"""

from __future__ import annotations

import os
from typing import Any

from ._redact import printable
from .errors import StokerError

PATH = (str, os.PathLike)  # a file or folder argument
NUMBER = (int, float)


def _names(kinds: type | tuple[type, ...]) -> str:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    words = {str: "a string", bool: "True or False", int: "an integer", float: "a number"}
    words[os.PathLike] = "a path"  # type: ignore[index]
    words[type(None)] = "None"
    if int in kinds and float in kinds:
        kinds = tuple(k for k in kinds if k is not int)  # "a number" says it
    return " or ".join(dict.fromkeys(words.get(k, k.__name__) for k in kinds))


def check_args(error: type[StokerError], **args: tuple[Any, type | tuple[type, ...]]) -> None:
    """Raise ``error`` naming the first argument whose value is not of its kinds. A bool is
    not a number here (``keep_last=True`` is a slip), and a number is not a bool."""
    for name, (value, kinds) in args.items():
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        wants_bool = bool in kinds
        ok = isinstance(value, kinds) and (wants_bool or not isinstance(value, bool))
        if not ok:
            got = printable(repr(value), lines=False)
            got = got if len(got) <= 40 else got[:40] + "..."
            raise error(f"{name}={got}: give {_names(kinds)}, not {type(value).__name__}")
