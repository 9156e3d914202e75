"""``stoker catalog``: list the Azure facts stoker plans with; ``catalog prices --refresh``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._output import command, emit_json, stderr, stdout
from ._tables import Column, Heading, print_fitted
from .plan import CatalogOpt

app = typer.Typer(help="The dated, sourced Azure facts stoker plans with.", no_args_is_help=False)


def _fmt(field: str, value: object) -> str:
    from ..units import format_bytes, format_duration, format_rate

    if isinstance(value, bool) or not isinstance(value, float):
        return str(value)
    if field.endswith(
        (
            "_bw",
            "_rate",
            "_read",
            "_write",
            "nic",
            "ingress",
            "egress",
            "throughput",
            "throughput_per_tib",
            "busbw_measured",
            "busbw_floor",
            "achievable",
            "throughput_per_gib",
        )
    ):
        return format_rate(value)
    if field.endswith(("latency", "mtbf")):
        return format_duration(value)
    if field.startswith("price") or field.endswith(("fraction", "efficiency")):
        return f"{value:g}"
    return format_bytes(value, binary=field not in ("gpu_memory", "memory"))


def _entry_prefix(entry: str, cat: object) -> str:
    """``--entry`` as the catalog keys it: a VM size with or without ``Standard_`` (as ARM and
    the Azure CLI write it), with or without ``vm.``, in any case."""
    from ..catalog import Catalog, vm_size_name

    assert isinstance(cat, Catalog)
    size = entry.removeprefix("vm.")
    bare = vm_size_name(size)
    if entry.startswith("vm.") or bare != size or cat.vm_key(bare):
        key = cat.vm_key(bare)
        return f"vm.{key}" if key else f"vm.{bare}"
    return entry


def _layers(ctx: typer.Context, own: list[Path] | None) -> list[Path]:
    """Catalog files given before the subcommand (``catalog -c F prices``), then after it."""
    return [*(ctx.obj or ()), *(own or ())]


@app.callback(invoke_without_command=True)
@command
def catalog(
    ctx: typer.Context,
    entry: Annotated[
        str,
        typer.Option(
            "--entry", "-e", help="Only entries starting so, e.g. vm.ND96isr_H100_v5 or lustre"
        ),
    ] = "",
    json_out: Annotated[bool, typer.Option("--json", help="Every figure as JSON.")] = False,
    catalog_files: CatalogOpt = None,
) -> None:
    """List every figure with its source and date."""
    if ctx.invoked_subcommand:
        ctx.obj = list(catalog_files or ())  # `catalog -c F prices` lays F under prices too
        return

    from ..catalog import load_catalog
    from ..errors import CatalogError

    cat = load_catalog(catalog_files or ())
    rows = list(cat.figures(_entry_prefix(entry, cat)))
    if not rows:
        close = cat.closest_entries(_entry_prefix(entry, cat))
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        known = ", ".join(where for where, _ in cat.entries())
        raise CatalogError(f"--entry {entry}: no catalog entry starts so; {hint}entries: {known}")
    if json_out:
        emit_json({"catalog": cat.catalog.model_dump(mode="json"), "figures": rows})
        return
    # Each entry a heading over its figures; the date goes first when the width is short
    # (`catalog sources` lists each source's date).
    columns = [
        Column("field", whole=True),
        Column("value"),
        Column("source", whole=True),
        Column("date", 1),
    ]
    cells: list = []
    last = None
    for row in rows:
        if not cells or row["entry"] != last:
            cells.append(Heading(str(row["entry"])))
        last = row["entry"]
        flag = "" if row["verified"] else " (unverified)"
        field = str(row["field"])
        value = _fmt(field, row["value"])
        cells.append([field, value, f"{row['source']}{flag}", str(row["date"])])
    title = f"{cat.catalog.name}, as of {cat.catalog.as_of}"
    hint = "see --json or `catalog sources`"
    print_fitted(stdout, columns, cells, title=title, dropped_hint=hint)
    missing = cat.unpriced_vms()
    if missing:
        stderr.print(
            f"no public price in the catalog for: {', '.join(missing)} "
            "(set cluster.price_per_hour, a catalog override, or refresh)"
        )


@app.command("sources")
@command
def sources(
    ctx: typer.Context,
    catalog_files: CatalogOpt = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="The sources as JSON, keyed by source name.")
    ] = False,
) -> None:
    """List the catalog's sources with their dates."""
    from rich.table import Table

    from ..catalog import load_catalog

    cat = load_catalog(_layers(ctx, catalog_files))
    if json_out:
        emit_json({k: v.model_dump(mode="json") for k, v in cat.sources.items()})
        return
    table = Table("key", "date", "title", "where")
    for key, src in cat.sources.items():
        table.add_row(
            key,
            src.date.isoformat(),
            src.title + ("" if src.verified else " [unverified]"),
            src.where,
        )
    stdout.print(table)


@app.command("prices")
@command
def prices(
    ctx: typer.Context,
    refresh: Annotated[
        bool, typer.Option("--refresh", help="Read the Azure Retail Prices API.")
    ] = False,
    region: Annotated[str, typer.Option(help="Azure region, e.g. eastus.")] = "eastus",
    output: Annotated[
        Path | None,
        typer.Option(help="Override file to write (default: ~/.config/stoker/prices.toml)."),
    ] = None,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="The prices as a JSON list of rows; with --refresh, an object "
            '{"refresh": {"path", "region", "written", "not_found"}, "prices": [rows]}.',
        ),
    ] = False,
    catalog_files: CatalogOpt = None,
) -> None:
    """Show every price and its source; --refresh reads them all from the Retail Prices API."""
    from ..catalog import default_prices_path, load_catalog, refresh_all

    layers = _layers(ctx, catalog_files)
    cat = load_catalog(layers)
    refreshed = None
    if refresh:
        path = output or default_prices_path()
        done = refresh_all(cat, region, path)
        not_found = [name for name in cat.vm if name not in done.vm]
        refreshed = {
            "path": str(path),
            "region": region,
            "written": len(done.vm),
            "not_found": not_found,
            "meters_written": len(done.figures),
            "meters_not_found": done.not_found,
        }
        stderr.print(
            f"wrote {len(done.vm)} prices for {region} to {path}; "
            f"{len(not_found)} sizes not listed there"
        )
        stderr.print(
            f"and {len(done.figures)} other prices (Spot, reserved, storage, network); "
            + (
                f"not listed, left as they were: {', '.join(done.not_found)}"
                if done.not_found
                else "every meter found"
            )
        )
        cat = load_catalog([*layers, *([path] if output else [])])
    rows = cat.vm_prices()
    if json_out:
        emit_json(rows if refreshed is None else {"refresh": refreshed, "prices": rows})
        return
    from rich.table import Table

    table = Table("VM size", "$/hour", "region", "source", "date")
    for r in rows:
        per_hour = r["price_per_hour"]
        price = "no public price" if per_hour is None else f"{per_hour:.2f}"
        flag = " (unverified)" if r["verified"] is False else ""
        table.add_row(
            str(r["vm_size"]),
            price,
            str(r["region"] or "-"),
            str(r["source"] or "-") + flag,
            str(r["date"] or "-"),
        )
    stdout.print(table)
    meters = Table("entry", "price", "value", "source", "date", title="Other prices")
    for r in cat.meter_prices():
        value = r["value"]
        unit = {"hour": " /h", "month": " /month", "10k": " /10k ops"}.get(str(r["unit"]), "")
        shown = "unknown" if value is None else f"{value:.6g}{unit}"
        flag = " (unverified)" if r["verified"] is False else ""
        meters.add_row(
            str(r["entry"]),
            str(r["field"]),
            shown,
            str(r["source"] or "-") + flag,
            str(r["date"] or "-"),
        )
    stdout.print(meters)
