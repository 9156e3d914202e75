"""``stoker cache pull URL PATH``: one pod downloads a model, the others wait and share it."""

from __future__ import annotations

from typing import Annotated

import typer

from ._interrupt import interruptible
from ._output import command, emit_json, stdout

app = typer.Typer(help="A shared model cache for inference cold starts.", no_args_is_help=True)


@app.command("pull")
@command
def pull(
    src: Annotated[str, typer.Argument(help="The model, e.g. az://models/llama-70b")],
    root: Annotated[str, typer.Argument(help="Shared cache root (Azure Files / NetApp mount).")],
    name: Annotated[
        str | None, typer.Option(help="Cache name (default: last URL segment).")
    ] = None,
    stale_after: Annotated[
        float,
        typer.Option(min=1, help="Seconds before a silent puller's lock is taken over."),
    ] = 60.0,
    timeout: Annotated[
        float | None,
        typer.Option(min=0, help="Give up waiting after this many seconds (default: wait on)."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Make the model available under ROOT/NAME/versions/<version>; print its path."""
    from .._malloc import keep_freed_memory
    from ..stage import cache_pull, terminal_reporter

    keep_freed_memory()  # (this process exists to move data: see _malloc)
    with interruptible(kept="the partial download is kept and the next pull resumes it"):
        result = cache_pull(
            src,
            root,
            name=name,
            stale_after_s=stale_after,
            timeout_s=timeout,
            reporter=None if json_out else terminal_reporter(f"pull {src}"),
        )
    if json_out:
        emit_json(result.to_dict())
    else:
        how = "downloaded" if result.pulled else "already cached"
        # One line whatever the width: scripts take the path from it.
        stdout.print(
            f"{result.path} ({how}, version {result.version})", highlight=False, soft_wrap=True
        )
