"""The shared model cache of an inference plan, for people: cold starts with and without the
Azure Files share, the share's throughput against what the replicas can take in, its price, and
the catalog figures behind them (``inference.CachePlan``; the JSON is ``inference.cache``)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..units import format_bytes as fb
from ..units import format_rate as fr
from ._format import duration as fd
from ._format import md_cell
from .inference import CachePlan

TITLE = "The shared model cache"


def _rate(bps: float | None) -> str:
    return "no published figure" if bps is None else fr(bps)


def cache_rows(cp: CachePlan) -> list[tuple[str, str, str]]:
    """(what, without the shared cache, with it): every replica starting at once."""
    return [
        ("model downloads from Blob", f"{cp.blob_downloads_without}", f"{cp.blob_downloads_with}"),
        (
            "cold start of every replica",
            fd(cp.cold_start_without_s),
            f"{fd(cp.cold_start_with_s)} (share warm)",
        ),
        (
            "first start",
            fd(cp.cold_start_without_s),
            f"{fd(cp.first_start_with_s)} (warm-up {fd(cp.warmup_s)}, then the replicas)",
        ),
    ]


def cache_summary(cp: CachePlan) -> str:
    """The figures the rows rest on, and which way starts the replicas sooner."""
    covers = "covers" if cp.share_covers_demand else "falls short of"
    price = (
        "no price in the catalog"
        if cp.share_usd_per_hour is None
        else f"${cp.share_usd_per_hour:,.2f} per hour"
    )
    with_s, without_s = cp.cold_start_with_s, cp.cold_start_without_s
    if with_s < without_s:
        faster = f"The warm share starts every replica {fd(without_s - with_s)} sooner"
    elif with_s > without_s:
        faster = f"Blob read directly starts every replica {fd(with_s - without_s)} sooner"
    else:
        faster = "Both start every replica in the same time"
    saved = cp.blob_downloads_without - cp.blob_downloads_with
    return (
        f"{cp.replicas} replicas ({cp.replicas_per_vm} per VM) of a "
        f"{fb(cp.model_bytes, binary=False)} model, all starting at once. The share "
        f"({fb(cp.share_bytes)} premium NFS) gives {fr(cp.share_rate)} (one share at most "
        f"{fr(cp.share_max_rate)}); the replicas can take in {fr(cp.demand_rate)}, so it "
        f"{covers} their demand. Blob egress {_rate(cp.blob_rate)}, one VM's frontend NIC "
        f"{fr(cp.nic_rate)}. The share: {price}. {faster}; the share saves {saved} "
        f"download{'s' if saved != 1 else ''} from Blob."
    )


def cache_markdown(cp: CachePlan) -> list[str]:
    lines = ["", f"## {TITLE}", "", md_cell(cache_summary(cp)), ""]
    lines += ["| | without the shared cache | with it |", "|---|---:|---:|"]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in cache_rows(cp)]
    lines += ["", "Figures from the catalog:", ""] + [f"- {md_cell(s)}" for s in cp.sources]
    return lines


def cache_block(cp: CachePlan) -> Group:
    table = Table(title=TITLE, title_justify="left")
    table.add_column("")
    table.add_column("without the shared cache", justify="right")
    table.add_column("with it", justify="right")
    for row in cache_rows(cp):
        table.add_row(*map(Text, row))  # Text: a '[' in a figure is not markup
    notes = Text(cache_summary(cp))
    notes.append("\n" + "\n".join(f"source: {s}" for s in cp.sources), style="dim")
    return Group(table, notes)
