"""``stoker shards write SRC OUT``: turn files, JSON lines, arrays or Parquet into shards."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from ._options import size
from ._output import command, emit_json, stderr, stdout

app = typer.Typer(help="Write datasets in stoker's shard format.", no_args_is_help=True)
Kind = Enum("Kind", {k: k for k in ("files", "jsonl", "npy", "parquet")}, type=str)  # _sources
Compression = Enum("Compression", {"none": "none", "zstd": "zstd"}, type=str)
KINDS = tuple(k.value for k in Kind)  # stream._sources.KINDS, without importing torch here


@app.command("write")
@command
def write(
    src: Annotated[str, typer.Argument(help="A folder (or one file) of inputs.")],
    out: Annotated[str, typer.Argument(help="Where the shards go: a folder or az://…")],
    kind: Annotated[
        Kind,
        typer.Option(
            "--from",
            help="files (a sample per file), jsonl (per line), npy (per row) or parquet (per row).",
        ),
    ] = Kind.files,
    keys: Annotated[
        bool, typer.Option(help="files: store {key, data} instead of the bytes alone.")
    ] = False,
    shard_size: Annotated[
        int,
        typer.Option(parser=size, metavar="SIZE", help="Target shard size, before compression."),
    ] = "64MiB",  # type: ignore[assignment]
    compression: Annotated[Compression, typer.Option(help="Per sample.")] = Compression.none,
    resume: Annotated[
        bool, typer.Option(help="Continue an interrupted write (or add inputs beyond it).")
    ] = False,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            help="Processes on this node. Under torchrun each rank converts its share too.",
        ),
    ] = 1,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the index summary as JSON.")
    ] = False,
) -> None:
    """Write SRC as a shard dataset at OUT: index.json is written once, at the end."""
    from .._redact import shown as shown_on_screen
    from ..stream import write_shards

    shown = shown_on_screen(out)  # a SAS in OUT must not reach the terminal or a log
    from .._dist_env import torchrun_env
    from ..errors import StreamError

    job = torchrun_env(error=StreamError)  # under torchrun, every rank converts its share
    options = dict(
        kind=kind.value,
        keys=keys,
        shard_size=shard_size,
        compression=compression.value,
        workers=workers,
        rank=job.rank,
        world_size=job.world_size,
    )
    if json_out:
        index = write_shards(src, out, resume=resume, **options)  # type: ignore[arg-type]
    else:
        from rich.progress import Progress, SpinnerColumn, TimeElapsedColumn

        columns = [SpinnerColumn(), "{task.description}", "{task.completed} samples"]
        # No bar where stderr is no terminal: a transient one leaves a blank line behind.
        quiet = not stderr.is_terminal
        with Progress(
            *columns, TimeElapsedColumn(), console=stderr, transient=True, disable=quiet
        ) as bar:
            task = bar.add_task(f"shards {shown}")
            index = write_shards(
                src,
                out,
                resume=resume,
                progress=lambda n: bar.update(task, advance=n),
                **options,  # type: ignore[arg-type]
            )
    summary = {
        "out": shown,
        "samples": index.samples,
        "shards": len(index.shards),
        "bytes": index.bytes,
    }
    if json_out:
        emit_json(summary | {"codec": index.codec, "compression": index.compression})
    else:
        from ..units import format_bytes

        size = format_bytes(index.bytes)
        shards = f"{len(index.shards)} shard" + ("" if len(index.shards) == 1 else "s")
        stdout.print(f"{index.samples:,} samples in {shards} ({size}) at {shown}", soft_wrap=True)
