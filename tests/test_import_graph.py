"""The import graph: packages talk through public faces.

A module in ``stoker.A`` never imports a private module (or a private name) of another package
``stoker.B``: only what ``stoker.B`` exposes in its ``__init__`` or a public module. The root's
own private helpers (``stoker._atomic``, ``stoker._flock``, ...) are shared by every package and
are allowed. Imports inside functions count as much as those at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "stoker"


def _module_parts(path: Path) -> tuple[list[str], list[str]]:
    """(the module's dotted parts, the package it belongs to)."""
    parts = ["stoker", *path.relative_to(SRC).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
        return parts, parts
    return parts, parts[:-1]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def reaches(path: Path, text: str | None = None) -> list[str]:
    """Every ``stoker.B._private...`` that ``path`` imports from a package other than its own
    (``text``: the module's source, where it is not read from ``path``)."""
    _, package = _module_parts(path)
    own = package[1] if len(package) > 1 else None
    found = []
    for t in _imported(path, text):
        if len(t) < 3 or t[0] != "stoker" or t[1] == own:
            continue
        if not (SRC / t[1]).is_dir():  # a root module: stoker._atomic is shared
            continue
        if any(_private(p) for p in t[2:]):
            found.append(".".join(t))
    return sorted(set(found))


def _imported(path: Path, text: str | None = None) -> list[list[str]]:
    """Every dotted name a module imports (a ``from`` import gives the module and each name
    from it), relative imports resolved; inside functions too."""
    _, package = _module_parts(path)
    out: list[list[str]] = []
    for node in ast.walk(ast.parse(text if text is not None else path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = base + (node.module.split(".") if node.module else [])
            else:
                mod = (node.module or "").split(".")
            out.append(mod)
            out += [mod + [a.name] for a in node.names]
        elif isinstance(node, ast.Import):
            out += [a.name.split(".") for a in node.names]
    return out


def all_reaches() -> dict[str, list[str]]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        hits = reaches(path)
        if hits:
            out[str(path.relative_to(SRC.parent))] = hits
    return out


def test_no_package_imports_another_packages_private_modules() -> None:
    found = all_reaches()
    lines = [f"{f}: {', '.join(h)}" for f, h in found.items()]
    assert not found, "private modules reached across packages:\n" + "\n".join(lines)


@pytest.mark.parametrize(
    ("source", "bad"),
    [
        ("from ..store._loop import run_sync\n", True),
        ("from ..store import _loop\n", True),
        ("from ..store import run_sync\n", False),
        ("from .._atomic import write_atomic\n", False),
        ("from ._engine import Engine\n", False),
        ("def f():\n    from stoker.catalog._schema import Provisioning\n", True),
        ("import stoker.report._records\n", True),
    ],
)
def test_the_check_itself_catches_a_reach(source: str, bad: bool) -> None:
    # As if the source were a module of stage/.
    assert bool(reaches(SRC / "stage" / "_probe.py", source)) is bad


# Which packages each package may import (the root's own modules, stoker.errors, stoker.units
# and the like, are open to all). The layers: catalog at the bottom; plan over it; simulate and
# provision over the plan; store at the bottom of the data path, stage and stream over it;
# measure over the data path (its benches run stage and stream); checkpoint beside them;
# operate over provision's tags; report reads the plan, the simulation (their JSON's TypedDicts)
# and the measured records; the CLI and the root's re-exports over everything.
ALLOWED = {
    "catalog": set(),
    "plan": {"catalog"},
    "simulate": {"catalog", "plan"},
    "provision": {"catalog", "plan"},
    "operate": {"catalog", "measure", "provision", "store"},
    "store": set(),
    "stage": {"store"},
    "stream": {"measure", "store"},  # the stall metrics are served by measure's exporter
    "measure": {"catalog", "plan", "stage", "stream"},
    "checkpoint": {"catalog", "measure", "plan", "store"},
    "report": {"measure", "plan", "simulate"},
    "cli": {
        "catalog",
        "checkpoint",
        "measure",
        "operate",
        "plan",
        "provision",
        "report",
        "simulate",
        "stage",
        "stream",
    },
}


def package_imports() -> dict[str, set[str]]:
    """Each package's imports of other packages, from every module in it."""
    deps: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        _, package = _module_parts(path)
        if len(package) < 2:
            continue  # the root re-exports everything
        own = package[1]
        for t in _imported(path):
            if len(t) >= 2 and t[0] == "stoker" and t[1] != own and (SRC / t[1]).is_dir():
                deps.setdefault(own, set()).add(t[1])
    return deps


def test_each_package_imports_only_the_packages_below_it() -> None:
    found = package_imports()
    assert set(found) <= set(ALLOWED), (
        f"a new package: add it to ALLOWED ({set(found) - set(ALLOWED)})"
    )
    extra = {p: sorted(d - ALLOWED[p]) for p, d in found.items() if d - ALLOWED[p]}
    assert not extra, f"imports across the layers: {extra}"
