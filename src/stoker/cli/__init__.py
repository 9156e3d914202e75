"""The ``stoker`` command: one small module per verb, no logic the library lacks."""

from __future__ import annotations

import typer

from . import _help
from . import bench as _bench
from . import cache as _cache
from . import catalog as _catalog
from . import checkpoint as _checkpoint
from . import doctor as _doctor
from . import guard as _guard
from . import plan as _plan
from . import provision as _provision
from . import report as _report
from . import shards as _shards
from . import simulate as _simulate
from . import stage as _stage
from . import teardown as _teardown
from . import watch as _watch

app = typer.Typer(
    name="stoker",
    help="Keep AI accelerators fed: plan, stage, stream, checkpoint and measure on Azure.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # Plain help, as git and rclone print it: it reads at 80 columns and never cuts a word.
    rich_markup_mode=None,
)
_help.install()


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"stoker {version('stoker')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Keep AI accelerators fed: plan, stage, stream, checkpoint and measure on Azure."""

app.command("plan")(_plan.plan)
app.command("simulate")(_simulate.simulate)
app.command("provision")(_provision.provision)
app.command("teardown")(_teardown.teardown)
app.command("guard")(_guard.guard)
app.command("report")(_report.report)
app.add_typer(_catalog.app, name="catalog")
app.command("stage")(_stage.stage)
app.command("verify")(_stage.verify)
app.add_typer(_cache.app, name="cache")
app.add_typer(_checkpoint.app, name="checkpoint")
app.add_typer(_shards.app, name="shards")
app.add_typer(_bench.app, name="bench")
app.command("watch")(_watch.watch)
app.command("doctor")(_doctor.doctor)


def main() -> None:
    app()
