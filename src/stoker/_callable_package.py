"""A package that is also its main function: ``stoker.stage(src, dst)`` calls
``stoker.stage.stage`` while ``import stoker.stage.x`` still finds the package's modules (a
function bound to the package's name would be replaced by the package on the first such import).
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable
from typing import Any


class CallablePackage(types.ModuleType):
    __wrapped_function__: Callable[..., Any]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped_function__(*args, **kwargs)


def make_callable(package: str, function: Callable[..., Any]) -> None:
    """Make the package named ``package`` call ``function``; help() shows its signature."""
    module = sys.modules[package]
    module.__class__ = CallablePackage
    module.__wrapped_function__ = function  # type: ignore[attr-defined]
    module.__signature__ = inspect.signature(function)  # type: ignore[attr-defined]
