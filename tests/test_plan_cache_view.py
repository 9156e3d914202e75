"""`stoker plan` of an inference spec shows the shared model cache (examples/inference-cache.toml):
cold starts with and without the Azure Files share for the replicas, the share's throughput
against their demand, its price and the catalog sources, in the terminal, in Markdown and in the
plan's JSON (``inference.cache``)."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stoker.catalog import load_catalog
from stoker.cli import app
from stoker.plan import load_spec, markdown, plan_job
from stoker.plan.inference import CachePlan, cache_plan
from stoker.plan.plan_json import CacheJson
from stoker.units import format_duration, format_rate

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "inference-cache.toml"
runner = CliRunner()


@pytest.fixture(scope="module")
def plan():
    return plan_job(EXAMPLE)


def test_the_plans_json_carries_the_cache_plan_field_by_field(plan) -> None:
    cat, spec = load_catalog(), load_spec(EXAMPLE)
    direct = cache_plan(plan.inference, spec, cat, cat.vm[spec.cluster.vm_size])
    doc = json.loads(json.dumps(plan.to_dict()))["inference"]["cache"]
    names = {f.name for f in dataclasses.fields(CachePlan)}
    assert set(doc) == names == set(typing.get_type_hints(CacheJson))
    assert doc == json.loads(json.dumps(dataclasses.asdict(direct)))
    # The same cold starts as the plan's comparison: Blob direct, and the warm Files share.
    assert doc["cold_start_without_s"] == plan.inference.cold_start_s["blob"]
    assert doc["cold_start_with_s"] == plan.inference.cold_start_s["files"]
    assert (doc["replicas"], doc["blob_downloads_without"], doc["blob_downloads_with"]) == (
        16,
        16,
        1,
    )


def test_markdown_shows_cold_starts_throughput_against_demand_and_sources(plan) -> None:
    cp = plan.inference.cache
    text = markdown(plan)
    assert "## The shared model cache" in text
    rows = [line for line in text.splitlines() if line.startswith("| cold start of every")]
    fd = format_duration
    assert rows == [
        f"| cold start of every replica | {fd(cp.cold_start_without_s)} | "
        f"{fd(cp.cold_start_with_s)} (share warm) |"
    ]
    first = fd(cp.warmup_s + cp.cold_start_with_s)
    assert f"| first start | {fd(cp.cold_start_without_s)} | {first} (warm-up" in text
    # 16 NICs of 10 GB/s want 160 GB/s; the share gives 7.47 GB/s: it says so.
    assert cp.share_rate < cp.demand_rate
    assert (
        f"gives {format_rate(cp.share_rate)} (one share at most {format_rate(cp.share_max_rate)})"
        in text
    )
    assert f"take in {format_rate(cp.demand_rate)}, so it falls short of their demand" in text
    # Blob (15 GB/s over 16 replicas) beats the share sized for 300 s: said, with the gap.
    gap = fd(cp.cold_start_with_s - cp.cold_start_without_s)
    assert f"Blob read directly starts every replica {gap} sooner" in text
    assert "the share saves 15 downloads from Blob" in text
    assert "The share: no price in the catalog." in text  # premium v1 has no price on file
    for source in cp.sources:
        assert f"- {source}" in text


def test_a_share_that_starts_the_fleet_sooner_and_has_a_price_is_said_so(plan) -> None:
    cp = dataclasses.replace(
        plan.inference.cache, cold_start_with_s=30.0, share_usd_per_hour=1.5, demand_rate=1e9
    )
    plan.inference.cache = cp
    try:
        text = markdown(plan)
    finally:
        plan.inference.cache = None
    gap = format_duration(cp.cold_start_without_s - 30.0)
    assert f"The warm share starts every replica {gap} sooner" in text
    assert "so it covers their demand" in text and "The share: $1.50 per hour." in text
    assert "## The shared model cache" not in markdown(plan)  # no cache, no section


def test_stoker_plan_prints_the_section_and_its_json() -> None:
    shown = runner.invoke(app, ["plan", str(EXAMPLE)], env={"COLUMNS": "120"})
    assert shown.exit_code == 0, shown.output
    assert "The shared model cache" in shown.stdout
    assert "16 replicas (1 per VM) of a 140 GB model" in shown.stdout
    assert "without the shared cache" in shown.stdout
    data = runner.invoke(app, ["plan", str(EXAMPLE), "--json"])
    assert data.exit_code == 0
    assert json.loads(data.stdout)["inference"]["cache"]["blob_downloads_with"] == 1
