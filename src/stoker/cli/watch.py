"""``stoker watch``: serve this node's GPU figures to Prometheus and show them live."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from ..measure.metrics import DEFAULT_PORT
from ._output import command, emit_json, stderr, stdout


@command
def watch(
    port: Annotated[
        int,
        typer.Option(
            min=0,
            max=65535,
            help="Prometheus port (/metrics); 0 picks a free one. Ranks of a "
            "training process that serve their own figures take the next ports.",
        ),
    ] = DEFAULT_PORT,
    job: Annotated[str, typer.Option(help="training_job label on every metric.")] = "",
    interval: Annotated[
        float, typer.Option(help="Seconds between refreshes (at least 0.1).")
    ] = 2.0,
    once: Annotated[bool, typer.Option(help="Print one sample and exit (no server).")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="With --once: print JSON.")] = False,
) -> None:
    """GPU utilization, SM activity, memory and power per GPU (NVML), live and on /metrics."""
    from rich.live import Live
    from rich.table import Table

    from ..errors import StokerError
    from ..measure.exporter import serve
    from ..measure.gpus import GpuPoller, Gpus

    if not 0.1 <= interval <= 86400:  # also refuses nan; 0 would spin a core
        raise StokerError(f"--interval {interval}: give seconds from 0.1 to 86400")
    if json_out and not once:
        raise StokerError("--json prints one sample: add --once (the live view is a table)")
    gpus = Gpus()
    if gpus.problem:
        stderr.print(f"[yellow]{gpus.problem}[/]")
    if once:
        samples = [s.to_dict() for s in gpus.sample()]
        if json_out:
            emit_json({"gpus": samples, "lost": gpus.lost, "problem": gpus.problem})
        else:
            stdout.print(_table(gpus.sample(), gpus.lost, Table))
        return
    poller = GpuPoller(gpus, interval_s=interval)  # one sampler for the scrape and the table
    server = serve(port, job=job, gpus=poller)
    stderr.print(f"serving http://0.0.0.0:{server.server_port}/metrics; Ctrl-C stops")
    try:
        with Live(_table(*poller.latest()[:2], Table), console=stdout) as live:
            while True:
                time.sleep(interval)
                live.update(_table(*poller.latest()[:2], Table))
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()


def _table(samples: list, lost: dict[int, str], table_cls: type) -> object:
    from rich.markup import escape

    table = table_cls("gpu", "name", "util %", "SM active %", "DRAM bw %", "memory", "power W")
    for s in samples:
        dash = lambda v: "-" if v is None else f"{v:.0f}"  # noqa: E731
        memory = f"{s.memory_used / 2**30:.1f} / {s.memory_total / 2**30:.0f} GiB"
        row = [str(s.index), s.name, f"{s.utilization:.0f}", dash(s.sm_active)]
        table.add_row(*row, dash(s.dram_bandwidth), memory, dash(s.power_w))
    for index, why in lost.items():
        table.add_row(str(index), f"[red]lost: {escape(why)}[/]", *["-"] * 5)
    return table
