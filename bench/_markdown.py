"""BENCHMARKS.md holds one ``## name:`` section per benchmark; each script replaces its own."""

from __future__ import annotations

from pathlib import Path


def replace_section(path: Path, section: str) -> None:
    """Swap the section of ``path`` whose heading matches ``section``'s, keeping the others."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    head = section.splitlines()[0].split(":")[0]  # e.g. "## stage"
    parts = text.split("\n## ")
    kept = [parts[0]] + ["## " + p for p in parts[1:] if not ("## " + p).startswith(head + ":")]
    path.write_text("\n".join(p.rstrip("\n") + "\n" for p in kept) + "\n" + section)


def publish(section: str, path: Path | None) -> None:
    """Write ``section`` into the Markdown file at ``path``, or print it when there is none."""
    if path:
        replace_section(path, section)
    else:
        print(section)
