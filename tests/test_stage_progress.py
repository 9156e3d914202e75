"""What the commands show while a copy runs: a bar on a terminal, plain lines elsewhere."""

from __future__ import annotations

import pytest

from stoker.stage._progress import LineReporter, RichReporter, terminal_reporter


def test_without_a_terminal_notes_and_deletions_are_plain_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("FORCE_COLOR", "FORCE_TERMINAL", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    reporter = terminal_reporter("az://data/x -> /mnt/x")
    assert isinstance(reporter, LineReporter)
    reporter.start()
    reporter.grow(2, 10)
    reporter.advance(10)
    reporter.note("part-0/[odd].bin: permission denied")
    reporter.deleting("part-0/stray.txt")
    reporter.finish({"files": 2})
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "! part-0/[odd].bin: permission denied\ndeleting part-0/stray.txt\n"


def test_where_rich_sees_a_terminal_the_bar_is_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich's own switch, as tests/test_cli_stage.py uses
    reporter = terminal_reporter("az://data/x -> /mnt/x")
    assert isinstance(reporter, RichReporter) and not reporter.progress.disable
