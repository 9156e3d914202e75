"""``catalog`` and ``doctor`` stay readable at 80 columns: no line wider, every entry, source and
check named whole, and any column left out named with where to find it."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text
from typer.testing import CliRunner

from stoker.catalog import load_catalog
from stoker.cli import app
from stoker.cli._tables import Column, Heading, fit

runner = CliRunner()


def _run(*args: str, width: int = 80) -> str:
    out = runner.invoke(app, list(args), env={"COLUMNS": str(width)}, terminal_width=width)
    assert out.exit_code in (0, 1), out.output
    return out.stdout


def test_catalog_at_80_columns_names_every_entry_and_source_whole() -> None:
    text = _run("catalog")
    assert max(len(line) for line in text.splitlines()) <= 80
    words = set(text.split())
    cat = load_catalog(())
    for entry, _ in cat.entries():
        assert entry in words, f"entry {entry} cut or missing"
    for row in cat.figures(""):
        assert str(row["source"]) in words and str(row["field"]) in words
    assert "not shown at 80 columns: date" in text  # and says where the dates are


def test_catalog_wide_keeps_every_column() -> None:
    text = _run("catalog", "--entry", "lustre", width=200)
    assert "date" in text.splitlines()[2] and "not shown" not in text


def test_doctor_at_80_columns_keeps_check_status_and_fix() -> None:
    text = _run("doctor", "--imds-url", "http://127.0.0.1:9")
    assert max(len(line) for line in text.splitlines()) <= 80
    header = next(line for line in text.splitlines() if "check" in line and "status" in line)
    assert "what to do" in header


def test_fit_drops_by_order_then_folds_only_what_cannot_fit() -> None:
    cols = [Column("name"), Column("detail", 2), Column("note", 1)]
    rows = [Heading("group-one"), ["alpha", "a-very-long-detail-word-indeed", "some words"]]
    table, dropped = fit(cols, rows, width=40)
    assert dropped == ["detail"]
    console = Console(width=40, record=True)
    console.print(table)
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 40
    assert "group-one" in " ".join(lines) and "alpha" in " ".join(lines)
    wide, none_dropped = fit(cols, [["a", "b", Text("c")]], width=200)
    assert none_dropped == [] and len(wide.columns) == 3
