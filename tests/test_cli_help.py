"""Every verb's help reads at 80 columns: conventional metavars, no Python type names, no word
cut in two, no command summary cut short; ``stoker --version`` answers."""

from __future__ import annotations

import re
from importlib.metadata import version

import pytest
import typer
from typer.testing import CliRunner

from stoker.cli import app

runner = CliRunner()


def _paths(cmd, path=()):  # every command and subcommand, as argv prefixes
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        if not sub.hidden:
            yield from _paths(sub, (*path, name))


ROOT = typer.main.get_command(app)
PATHS = list(_paths(ROOT))


def _help(path: tuple[str, ...]) -> str:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


def test_every_verb_is_covered() -> None:
    names = {" ".join(p) for p, _ in PATHS}
    assert {"plan", "stage", "checkpoint ls", "cache pull", "bench storage"} <= names


@pytest.mark.parametrize(
    "path,cmd", PATHS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else ""
)
def test_help_reads_at_80_columns(path: tuple[str, ...], cmd) -> None:
    text = _help(path)
    long = [line for line in text.splitlines() if len(line) > 80]
    assert not long, f"lines over 80 columns: {long}"
    assert not re.search(r"<(bool|str|int|float|path|list\[.*?\]|datetime)>", text), text
    assert not re.search(r"\{\w+\}", text.splitlines()[0]), "usage names arguments in braces"
    words = set(text.split())
    for param in cmd.params:
        for word in (param.help or "").split():
            assert word in words, f"{' '.join(path)} {param.name}: {word!r} was cut or lost"
    for name, sub in getattr(cmd, "commands", {}).items():
        summary = sub.get_short_help_str(limit=10_000)
        assert not summary.endswith("..."), f"{name}'s summary is cut short: {summary}"
        for word in summary.split():
            assert word in words, f"{' '.join(path)}: command {name}'s {word!r} was cut or lost"


def test_flags_show_no_type_and_values_show_conventional_names() -> None:
    text = _help(("stage",))
    assert re.search(r"^  --dry-run\s+Say what", text, re.M), text
    assert "--state-dir PATH" in text and "--concurrency INTEGER" in text
    text = _help(("shards", "write"))  # a choice shows the values one types, not Python's
    assert "--from files|jsonl|npy|parquet " in text and "--compression none|zstd " in text


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"stoker {version('stoker')}"
