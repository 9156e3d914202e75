"""``stoker bench storage|loader|single-writer``: measure a tier and the loader the way fio and
MLPerf do, and one checkpoint writer (a torch.save) as it really writes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .._redact import shown
from ._bars import steps_bar
from ._output import command, emit_json, stderr, stdout
from .bench_allreduce import allreduce as _allreduce

app = typer.Typer(help="Measure storage, the loader and the collectives.", no_args_is_help=True)
app.command("allreduce")(_allreduce)


@app.command("storage")
@command
def storage(
    target: Annotated[str, typer.Argument(help="A folder on the tier to measure.")],
    size: Annotated[str, typer.Option(help="Test file size.")] = "1GiB",
    block: Annotated[
        list[str] | None,
        typer.Option(
            help="Request sizes (repeatable; default 1MiB and 4KiB). Blocks of 64 KiB and more "
            "run the sequential tests, smaller ones the random tests."
        ),
    ] = None,
    jobs: Annotated[
        list[int] | None, typer.Option(min=1, help="Parallel jobs (repeatable; default 1 and 4).")
    ] = None,
    direct: Annotated[bool, typer.Option(help="O_DIRECT where the file system allows.")] = True,
    json_out: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
    record: Annotated[
        Path | None, typer.Option(help="Also save the results for stoker report (JSON).")
    ] = None,
) -> None:
    """Sequential and random read/write throughput and IOPS, cold and warm (fio's method)."""
    from ..measure.storage import TESTS, bench_storage, skipped
    from ..units import format_bytes, parse_bytes

    blocks = tuple(int(parse_bytes(b)) for b in (block or ["1MiB", "4KiB"]))
    if record is not None:
        from .._output_files import check_out

        check_out(record, "--record")  # before the tests, not after them
    with steps_bar(shown(target), quiet=json_out) as show:  # a SAS URL given by mistake
        results = bench_storage(
            target,
            size=int(parse_bytes(size)),
            blocks=blocks,
            jobs=tuple(jobs or [1, 4]),
            direct=direct,
            progress=show,
        )
    if record is not None:
        from ..measure.records import storage_record

        storage_record(results, shown(target)).save_json(record)
    for test in skipped(TESTS, blocks):
        kind = "64 KiB or more" if test.startswith("seq") else "under 64 KiB"
        stderr.print(f"[yellow]{test} not run: no --block of {kind}[/]", highlight=False)
    if json_out:
        emit_json([r.to_dict() for r in results])
        return
    from rich.table import Table

    table = Table("test", "block", "jobs", "O_DIRECT", "cache", "MB/s", "IOPS")
    for r in results:
        row = [r.test, format_bytes(r.block), str(r.jobs), "yes" if r.direct else "no", r.cache]
        table.add_row(*row, f"{r.mb_per_s:,.0f}", f"{r.iops:,.0f}")
    stdout.print(table)


@app.command("loader")
@command
def loader(
    data: Annotated[str, typer.Argument(help="Shards to read: a folder or a stoker URL.")],
    workload: Annotated[str, typer.Option(help="unet3d, resnet50 or cosmoflow.")] = "resnet50",
    accelerator: Annotated[str, typer.Option(help="a100 or h100 compute times.")] = "h100",
    accelerators: Annotated[int, typer.Option(min=1, help="Emulated accelerators.")] = 1,
    steps: Annotated[
        int | None,
        typer.Option(min=2, help="Stop after this many steps (the first is not measured)."),
    ] = None,
    workers: Annotated[int, typer.Option(min=0, help="DataLoader workers.")] = 2,
    cache: Annotated[str | None, typer.Option(help="Node cache folder for remote data.")] = None,
    generate: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="First write this many samples of the workload's shape (into a new folder).",
        ),
    ] = None,
    search: Annotated[
        bool, typer.Option(help="Find the most accelerators kept above the threshold.")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
    record: Annotated[
        Path | None,
        typer.Option(help="Also save the run (AU, MB/s over time) for stoker report (JSON)."),
    ] = None,
) -> None:
    """Accelerator utilization (compute / total, first step excluded) as MLPerf Storage."""
    from ..measure import loader as lb

    if record is not None:
        from .._output_files import check_out

        check_out(record, "--record")  # before the run, not after it
    if generate:
        with stderr.status(f"writing {generate} {workload} samples to {shown(data)}"):
            lb.generate(workload, data, generate)
    options = dict(accelerator=accelerator, steps=steps, workers=workers, cache=cache)
    with steps_bar(f"{workload} on {accelerator}", quiet=json_out) as show:
        options["progress"] = show
        capped = None
        if search:
            best, runs, capped = lb.most_accelerators(data, workload, **options)  # type: ignore[arg-type]
        else:
            runs = [lb.run_loader(data, workload, accelerators=accelerators, **options)]  # type: ignore[arg-type]
            best = None
    if record is not None:  # the last run: with --search, the most accelerators tried
        runs[-1].save_json(record)
    if json_out:
        emit_json(
            {"runs": [r.to_dict() for r in runs], "most_accelerators": best, "capped": capped}
        )
    else:
        for r in runs:
            au = "n/a" if r.utilization is None else f"{r.utilization:.1%}"
            verdict = "[green]pass[/]" if r.passed else "[red]fail[/]"
            stdout.print(
                f"{r.workload} x{r.accelerators} ({r.accelerator}, batch {r.batch}, compute "
                f"{r.compute_s * 1e3:.1f} ms): AU {au} (>= {r.threshold:.0%}: {verdict}), "
                f"{r.samples_per_s:,.0f} samples/s, {r.mb_per_s:,.0f} MB/s, first batch "
                f"{r.first_batch_s or 0:.2f} s, {r.steps} steps ({r.measured_steps} measured)"
            )
        if best is not None:
            at_least = "at least " if capped else ""
            stdout.print(f"most accelerators kept at the threshold by one reader: {at_least}{best}")
    for note in dict.fromkeys(n for r in runs for n in r.notes):  # once, not per run
        stderr.print(f"[yellow]note: {note}[/]", highlight=False)
    if capped:
        stderr.print(f"[yellow]note: {capped}[/]", highlight=False)
    if not all(r.passed for r in runs) and not search:
        raise typer.Exit(1)


@app.command("single-writer")
@command
def single_writer(
    target: Annotated[str, typer.Argument(help="A folder on the tier the checkpoints go to.")],
    size: Annotated[str, typer.Option(help="Bytes of state to save (bf16 tensors).")] = "2GiB",
    json_out: Annotated[bool, typer.Option("--json", help="Print the record as JSON.")] = False,
    record: Annotated[
        Path | None,
        typer.Option(help="Save the record (for stoker report and `stoker plan --measured`)."),
    ] = None,
) -> None:
    """One torch.save (serialising) and one raw-buffer write of the same state, each fsync'd:
    the rate a checkpoint written by one process gets on this tier."""
    from ..measure.single_writer import bench_single_writer
    from ..units import format_rate, parse_bytes

    if record is not None:
        from .._output_files import check_out

        check_out(record, "--record")  # before the writes, not after them
    result = bench_single_writer(target, int(parse_bytes(size)))
    if record is not None:
        result.save_json(record)
    if json_out:
        emit_json(result.to_dict())
        return
    s = result.summary
    stdout.print(
        f"torch.save {format_rate(s['torch_save_write_bps'])}, raw buffers "
        f"{format_rate(s['raw_write_bps'])} (one stream each, {s['torch_save_vs_raw']:.0%}): "
        f"`stoker plan --measured RECORD` plans a lone torch.save at the first",
        highlight=False,
    )
