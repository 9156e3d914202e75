"""``stoker bench allreduce``: nccl-tests-style busbw of the collectives, beside the plan.

Run under torchrun, one process per GPU (or per CPU rank with gloo); rank 0 prints:

    torchrun --nproc-per-node 8 --no-python stoker bench allreduce --vm ND96isr_H100_v5

Across VMs (torchrun --nnodes N) its --json output is the bus bandwidth `stoker plan --measured`
takes for the VM's InfiniBand, or, run with NCCL_NET=Socket, for its Ethernet (NCCL over TCP;
NCCL_IB_DISABLE=1 alone leaves NCCL on InfiniBand through Azure's RDMA plugin).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ._bars import steps_bar
from ._output import command, emit_json, stderr, stdout

if TYPE_CHECKING:
    from rich.table import Table

    from ..measure.collectives import SweepResult


@command
def allreduce(
    # nccl-tests' names (-b/-e/-f). Not --max: torchrun's own parser refuses it as an
    # abbreviation of its --max-restarts, even after the script's name.
    min_size: Annotated[
        str, typer.Option("--minbytes", "-b", "--min", help="Smallest message (S).")
    ] = "8B",
    max_size: Annotated[
        str, typer.Option("--maxbytes", "-e", help="Largest message (S).")
    ] = "128MiB",
    factor: Annotated[
        int,
        typer.Option("--stepfactor", "-f", "--factor", help="Each size is the last times this."),
    ] = 4,
    iters: Annotated[int, typer.Option(help="Timed iterations per size.")] = 20,
    warmup: Annotated[int, typer.Option(help="Untimed iterations per size.")] = 5,
    op: Annotated[
        list[str] | None,
        typer.Option(help="all_reduce, all_gather, reduce_scatter (repeatable; default all)."),
    ] = None,
    vm: Annotated[
        str | None, typer.Option(help="VM size: show the plan's prediction and the SKU floor.")
    ] = None,
    across: Annotated[
        str, typer.Option(help="max: slowest rank per iteration; avg: nccl-tests' default.")
    ] = "max",
    json_out: Annotated[bool, typer.Option("--json", help="Print the sweep as JSON.")] = False,
    catalog: Annotated[
        list[Path] | None,
        typer.Option("--catalog", "-c", help="Catalog file(s) laid over the built-in one."),
    ] = None,
) -> None:
    """Time all-reduce, all-gather and reduce-scatter over a range of sizes (under torchrun)."""
    from ..catalog import load_catalog
    from ..errors import StokerError
    from ..measure import collectives as mc
    from ..units import parse_bytes

    names = mc.parse_collectives(op or mc.COLLECTIVES)  # bad options fail before the sweep
    sizes = mc.sweep_sizes(int(parse_bytes(min_size)), int(parse_bytes(max_size)), factor)
    cat = load_catalog(catalog or ()) if vm else None
    if vm and cat and vm not in cat.vm:
        raise StokerError(f"unknown VM size {vm!r}; known: {', '.join(sorted(cat.vm))}")
    started = mc.init_from_env()
    import torch.distributed as dist

    try:
        leader = dist.get_rank() == 0
        with steps_bar("sweep", quiet=not leader or json_out) as progress:
            result = mc.sweep(
                names,
                sizes,
                iters,
                warmup,
                across=across,  # type: ignore[arg-type]
                progress=progress,
            )
        if vm:
            result = mc.with_plan(result, vm, cat)
        if leader:
            if json_out:
                emit_json(result.to_dict())
            else:
                for name in result.methods:
                    stdout.print(_table(result, name))
                for name, why in result.unsupported.items():
                    stdout.print(f"{name}: {why}", highlight=False)
    finally:
        if started:
            dist.destroy_process_group()
    wrong = sum(row.wrong for row in result.rows)
    if wrong:  # nccl-tests' #wrong: the collective gave wrong results, whatever its speed
        if leader:
            stderr.print(
                f"error: {wrong:,} wrong elements (#wrong): this fabric's results are not to be "
                "trusted; run stoker doctor"
            )
        raise typer.Exit(1)


def _table(result: SweepResult, name: str) -> Table:
    from rich.table import Table

    planned = result.vm is not None
    title = (
        f"{name} ({result.methods[name]}), {result.world_size} ranks, "
        f"{result.backend} on {result.device}, {result.across} across ranks"
        + (f", NCCL_NET={result.nccl_net}" if result.nccl_net else "")
    )
    table = Table(title=title, title_justify="left")
    for col in ("size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"):
        table.add_column(col, justify="right")
    if planned:
        for col in (f"plan busbw on {result.vm}", "measured / plan"):
            table.add_column(col, justify="right")
    for row in (r for r in result.rows if r.collective == name):
        cells = [
            f"{row.size:,}",
            f"{row.time_s * 1e6:.1f}",
            f"{row.algbw / 1e9:.3g}",
            f"{row.busbw / 1e9:.3g}",
            str(row.wrong),
        ]
        if planned:
            bus = row.predicted_busbw
            cells += [f"{bus / 1e9:.3g}", f"{row.busbw / bus:.3g}"] if bus else ["-", "-"]
        table.add_row(*cells)
    if planned and name == "all_reduce" and (result.floor_busbw or result.published_busbw):
        floor = f"{result.floor_busbw / 1e9:.0f} GB/s" if result.floor_busbw else "none"
        pub = f"{result.published_busbw / 1e9:.0f} GB/s" if result.published_busbw else "none"
        table.caption = (
            f"{result.vm}, one VM, multi-GB messages: health-check floor {floor}, "
            f"published {pub} busbw (small messages and CPU ranks sit far below)"
        )
        table.caption_justify = "left"
    return table


if __name__ == "__main__":  # torchrun --nproc-per-node N -m stoker.cli.bench_allreduce [options]
    typer.run(allreduce)
