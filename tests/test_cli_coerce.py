"""Plain command-line values are read without pydantic (cli/_coerce, reached through the
command class typer is given, cli/_command), as typer reads them: the same values, the same
refusals (exit 2, naming the option), and typer's own way for the rest."""

from __future__ import annotations

import datetime as dt
import enum
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from typer.testing import CliRunner

from stoker.cli._command import StokerCommand


class Colour(enum.Enum):
    red = "red"
    blue = "blue"


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.command(cls=StokerCommand)
    def show(
        name: str,
        count: Annotated[int, typer.Option(min=1, max=9)] = 1,
        ratio: float = 0.5,
        where: Path = Path("."),
        tags: Annotated[list[str] | None, typer.Option("--tag")] = None,
        sizes: Annotated[list[int] | None, typer.Option("--size")] = None,
        loud: Annotated[bool, typer.Option("--loud", envvar="SHOW_LOUD")] = False,
        scaled: Annotated[int, typer.Option(parser=lambda text: int(text) * 1000)] = 0,
        colour: Colour = Colour.red,
        when: dt.datetime | None = None,
    ) -> None:
        print(repr((name, count, ratio, where, tags, sizes, loud, scaled, colour, when)))

    return app


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(_app(), list(args), env=env)
    return result.exit_code, result.output


def test_plain_values_read_as_typer_reads_them_and_the_rest_still_by_typer() -> None:
    code, out = _run(
        "n",
        "--count", "3",
        "--ratio", "2.5",
        "--where", "a/b",
        "--tag", "x", "--tag", "y",
        "--size", "4", "--size", "5",
        "--scaled", "2",
        "--colour", "blue",
        "--when", "2026-12-04T10:00:00",
    )  # fmt: skip
    assert code == 0, out
    assert out.strip() == repr(
        ("n", 3, 2.5, Path("a/b"), ["x", "y"], [4, 5], False, 2000, Colour.blue,
         dt.datetime(2026, 12, 4, 10, 0))
    )  # fmt: skip
    code, out = _run("n", env={"SHOW_LOUD": "yes"})  # a flag from the environment is text
    assert code == 0 and ", True, " in out, out


def test_bad_plain_values_are_refused_naming_the_option_with_exit_2() -> None:
    for args, said in [
        (["--count", "x"], "Invalid value for '--count': 'x' is not a valid integer"),
        (["--count", "0"], "Invalid value for '--count': 0 is not in the range x>=1 and x<=9"),
        (["--count", "10"], "not in the range x>=1 and x<=9"),
        (["--ratio", "half"], "Invalid value for '--ratio': 'half' is not a valid number"),
        (["--size", "4", "--size", "four"], "'four' is not a valid integer"),
        (["--scaled", "2k"], "Invalid value for '--scaled'"),
        (["--colour", "green"], "Invalid value for '--colour'"),  # typer's own
    ]:
        code, out = _run("n", *args)
        assert code == 2 and said in " ".join(out.split()), (args, out)
    code, out = _run("n", env={"SHOW_LOUD": "maybe"})
    assert code == 2 and "'maybe' is not a valid boolean" in out, out


def test_a_copy_from_the_command_loads_no_pydantic(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("a")
    script = (
        "import sys\n"
        "from stoker.cli import main\n"
        "sys.argv = ['stoker', 'stage', sys.argv[1], sys.argv[2]]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print('pydantic' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "src"), str(tmp_path / "dst")],
        env=os.environ,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout + out.stderr
    assert (tmp_path / "dst" / "a.txt").read_text() == "a"
