"""Render BENCHMARKS.md from the JSON files in bench/results/.

Each benchmark NAME has its results in ``bench/results/NAME.json`` (written by ``_results.save``)
and a renderer ``bench/_render_NAME.py`` with ``render(doc: dict) -> str`` returning its
``## NAME: ...`` section. A renderer formats; it never measures and never holds a number.

    python bench/render.py --write BENCHMARKS.md          # every results file
    python bench/render.py --write BENCHMARKS.md stage    # only these
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _markdown import publish  # noqa: E402
from _results import RESULTS, load  # noqa: E402


def render(name: str, folder: Path = RESULTS) -> str:
    """The Markdown section of benchmark ``name``, from its results file."""
    doc = load(name, folder)
    section = importlib.import_module(f"_render_{name.replace('-', '_')}").render(doc)
    path = (folder / f"{name}.json").resolve()
    root = RESULTS.parents[1]
    source = path.relative_to(root) if path.is_relative_to(root) else path
    footer = f"\n_Rendered from `{source}` (measured {doc['measured']}); reproduce: `{doc['command']}`._\n"
    return section.rstrip("\n") + "\n" + footer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", help="benchmarks to render (default: every results file)"
    )
    parser.add_argument("--write", type=Path, help="Markdown file whose sections to replace")
    args = parser.parse_args(argv)
    names = args.names or sorted(p.stem for p in RESULTS.glob("*.json"))
    for name in names:
        publish(render(name), args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
