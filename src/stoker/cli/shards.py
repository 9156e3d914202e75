"""``stoker shards write SRC OUT``: turn files, JSON lines, arrays or Parquet into shards."""

from __future__ import annotations

from typing import Annotated

import typer

from ._output import command, emit_json, stderr, stdout

app = typer.Typer(help="Write datasets in stoker's shard format.", no_args_is_help=True)


@app.command("write")
@command
def write(
    src: Annotated[str, typer.Argument(help="A folder (or one file) of inputs.")],
    out: Annotated[str, typer.Argument(help="Where the shards go: a folder or az://…")],
    kind: Annotated[str, typer.Option("--from", help="files, jsonl, npy or parquet.")] = "files",
    keys: Annotated[
        bool, typer.Option(help="files: store {key, data} instead of the bytes alone.")
    ] = False,
    shard_size: Annotated[str, typer.Option(help="Target shard size.")] = "64MiB",
    compression: Annotated[str | None, typer.Option(help="zstd, or none.")] = None,
    resume: Annotated[bool, typer.Option(help="Continue an interrupted write.")] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the index summary as JSON.")
    ] = False,
) -> None:
    """Write SRC as a shard dataset at OUT (index.json lists only complete shards)."""
    from ..stream import write_shards

    options = dict(kind=kind, keys=keys, shard_size=shard_size, compression=compression)
    if json_out:
        index = write_shards(src, out, resume=resume, **options)  # type: ignore[arg-type]
    else:
        from rich.progress import Progress, SpinnerColumn, TimeElapsedColumn

        columns = [SpinnerColumn(), "{task.description}", "{task.completed} samples"]
        with Progress(*columns, TimeElapsedColumn(), console=stderr, transient=True) as bar:
            task = bar.add_task(f"shards {out}")
            index = write_shards(
                src,
                out,
                resume=resume,
                progress=lambda n: bar.update(task, advance=n),
                **options,  # type: ignore[arg-type]
            )
    summary = {
        "out": out,
        "samples": index.samples,
        "shards": len(index.shards),
        "bytes": index.bytes,
    }
    if json_out:
        emit_json(summary | {"codec": index.codec, "compression": index.compression})
    else:
        from ..units import format_bytes

        size = format_bytes(index.bytes)
        stdout.print(f"{index.samples} samples in {len(index.shards)} shards ({size}) at {out}")
