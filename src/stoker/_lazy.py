"""One lazy loader for the packages whose names are costly to import (torch, prometheus-client):
a module ``__getattr__`` (PEP 562) that imports a name from its module on first use, then keeps
it in the package, so the second use is a plain attribute."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any


def lazy_names(
    package: str, where: Mapping[str, str], *, modules: Collection[str] = ()
) -> Callable[[str], Any]:
    """``__getattr__`` for ``package``: ``where`` maps each name to the module (relative to the
    package) that defines it; a name in ``modules`` is that module itself (``stoker.stage``)."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f".{where[name]}", package)
        value = module if name in modules else getattr(module, name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
