"""Every metric stoker exports, in one table, named the Prometheus way: a ``stoker_`` prefix,
base units (``_seconds``, ``_bytes``, ratios 0-1), counters ending in ``_total``.

Labels join the ones NVIDIA's dcgm-exporter puts on the same node's GPUs (``gpu``, ``UUID``,
``modelName``, ``Hostname``), so one PromQL expression sets a rank's data stalls beside its
GPU's ``DCGM_FI_DEV_GPU_UTIL``. A training process adds ``rank`` and ``training_job``; the
label is not ``job`` because Prometheus gives every scraped series the scrape job's ``job`` and
renames an exposed one to ``exported_job``.

The families are built from each source's snapshot at scrape time; nothing here keeps state.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# Outside Prometheus's allocation list (9100-9999, fully taken: dcgm-exporter holds 9400, node
# exporter 9100) and below Linux's ephemeral ports (32768-60999). `stoker watch` serves the
# node here; the ranks of a training process on the next ports, one per local rank.
DEFAULT_PORT = 19400


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # "gauge" or "counter" (the name then ends in _total)
    help: str
    labels: tuple[str, ...] = ()  # labels of its own, beside the source's


GPU_LABELS = ("gpu", "UUID", "modelName", "Hostname")
PROCESS_LABELS = ("Hostname", "gpu", "UUID", "rank", "training_job")

GPU = {
    m.name: m
    for m in (
        Metric("stoker_gpus", "gauge", "GPUs NVML sees on the node (0 without a driver)"),
        Metric("stoker_gpu_utilization_ratio", "gauge", "Share of time a kernel ran (0-1)"),
        Metric("stoker_gpu_memory_used_bytes", "gauge", "GPU memory in use"),
        Metric("stoker_gpu_power_watts", "gauge", "Board power draw"),
        Metric("stoker_gpu_sm_active_ratio", "gauge", "SM activity, 0-1 (GPM; NaN unsupported)"),
        Metric("stoker_gpu_dram_active_ratio", "gauge", "DRAM bandwidth use, 0-1 (GPM)"),
        Metric("stoker_gpu_lost", "gauge", "1: NVML could not read this GPU"),
    )
}

STEP = {
    m.name: m
    for m in (
        Metric("stoker_steps_total", "counter", "Training steps counted by the ledger"),
        Metric("stoker_steps_skipped_total", "counter", "Steps left out at the start"),
        Metric("stoker_step_seconds_total", "counter", "Time in counted steps"),
        Metric(
            "stoker_step_phase_seconds_total",
            "counter",
            "Time per step phase (data, copy, compute, exposed_comm, checkpoint, other)",
            ("phase",),
        ),
        Metric("stoker_step_phase_ratio", "gauge", "Share of step time per phase", ("phase",)),
        Metric("stoker_last_step_seconds", "gauge", "The latest step's time per phase", ("phase",)),
        Metric("stoker_comm_buckets_total", "counter", "All-reduces seen in counted steps"),
        Metric("stoker_comm_bytes_total", "counter", "Bytes all-reduced in counted steps"),
    )
}

LOADER = {
    m.name: m
    for m in (
        Metric("stoker_loader_batches_total", "counter", "Batches handed to the loop", ("tier",)),
        Metric("stoker_loader_samples_total", "counter", "Samples read", ("tier",)),
        Metric("stoker_loader_wait_seconds_total", "counter", "Loop waited for data", ("tier",)),
        Metric("stoker_loader_compute_seconds_total", "counter", "Loop between batches", ("tier",)),
        Metric("stoker_loader_first_batch_seconds", "gauge", "Time to first batch", ("tier",)),
        Metric(
            "stoker_loader_accelerator_utilization_ratio",
            "gauge",
            "compute / (compute + wait), the first batch left out (MLPerf Storage AU)",
            ("tier",),
        ),
        Metric("stoker_loader_read_bytes_total", "counter", "Sample bytes read", ("tier",)),
        Metric(
            "stoker_loader_fetched_bytes_total",
            "counter",
            "Bytes fetched from the remote tier",
            ("tier",),
        ),
        Metric("stoker_loader_cache_hits_total", "counter", "Shards found in the cache", ("tier",)),
        Metric("stoker_loader_cache_misses_total", "counter", "Shards fetched", ("tier",)),
        Metric(
            "stoker_loader_skipped_samples_total", "counter", "Corrupt samples skipped", ("tier",)
        ),
    )
}

CHECKPOINT = {
    m.name: m
    for m in (
        Metric("stoker_checkpoint_saves_total", "counter", "Checkpoints saved"),
        Metric("stoker_checkpoint_bytes_total", "counter", "Bytes saved"),
        Metric("stoker_checkpoint_blocking_seconds_total", "counter", "Time save() held the loop"),
        Metric("stoker_checkpoint_last_blocking_seconds", "gauge", "The latest save's blocking"),
        Metric(
            "stoker_checkpoint_last_durable_seconds",
            "gauge",
            "The latest save: call to committed on the durable tier (NaN until it is)",
        ),
        Metric("stoker_checkpoint_last_step", "gauge", "Step of the latest save"),
    )
}

STAGE = {
    m.name: m
    for m in (
        Metric("stoker_stage_bytes_total", "counter", "Bytes moved by stage"),
        Metric("stoker_stage_files_total", "counter", "Files finished by stage"),
        Metric("stoker_stage_planned_bytes", "gauge", "Bytes the stage set out to move"),
    )
}

ALL = GPU | STEP | LOADER | CHECKPOINT | STAGE


def family(metric: Metric, labels: dict[str, str]) -> Any:
    """An empty prometheus-client family for ``metric``; add samples with ``add``."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    names = [*labels, *metric.labels]
    if metric.kind == "counter":  # the client appends _total itself
        return CounterMetricFamily(metric.name.removesuffix("_total"), metric.help, labels=names)
    return GaugeMetricFamily(metric.name, metric.help, labels=names)


def one(metric: Metric, labels: dict[str, str], value: float | None, **own: str) -> Any:
    fam = family(metric, labels)
    fam.add_metric([*labels.values(), *own.values()], math.nan if value is None else value)
    return fam


def gpu_families(gpus: Any, node: dict[str, str]) -> Iterator[Any]:
    """Per-GPU families from ``Gpus.latest`` (sampled off the scrape path by a poller)."""
    samples, lost, uuids = gpus.latest()
    yield one(GPU["stoker_gpus"], {"Hostname": node["Hostname"]}, len(gpus.handles))
    fams = {n: family(m, {k: "" for k in GPU_LABELS}) for n, m in GPU.items() if n != "stoker_gpus"}
    pct = lambda v: None if v is None else v / 100  # noqa: E731 - NVML reports percent
    for s in samples:
        key = [str(s.index), uuids.get(s.index, ""), s.name, node["Hostname"]]
        fams["stoker_gpu_utilization_ratio"].add_metric(key, s.utilization / 100)
        fams["stoker_gpu_memory_used_bytes"].add_metric(key, s.memory_used)
        fams["stoker_gpu_power_watts"].add_metric(key, _nan(s.power_w))
        fams["stoker_gpu_sm_active_ratio"].add_metric(key, _nan(pct(s.sm_active)))
        fams["stoker_gpu_dram_active_ratio"].add_metric(key, _nan(pct(s.dram_bandwidth)))
        fams["stoker_gpu_lost"].add_metric(key, 0)
    for index in lost:
        fams["stoker_gpu_lost"].add_metric(
            [str(index), uuids.get(index, ""), "", node["Hostname"]], 1
        )
    yield from fams.values()


def step_families(summary: Any, labels: dict[str, str]) -> Iterator[Any]:
    s = summary.to_dict() if hasattr(summary, "to_dict") else dict(summary)
    yield one(STEP["stoker_steps_total"], labels, s["steps"])
    yield one(STEP["stoker_steps_skipped_total"], labels, s["skipped"])
    yield one(STEP["stoker_step_seconds_total"], labels, s["step_total_s"])
    total, share, last = (
        family(STEP[n], labels)
        for n in (
            "stoker_step_phase_seconds_total",
            "stoker_step_phase_ratio",
            "stoker_last_step_seconds",
        )
    )
    for phase, stats in s["phases"].items():
        total.add_metric([*labels.values(), phase], stats["total_s"])
        share.add_metric([*labels.values(), phase], stats["share"])
    for phase, seconds in s["last_step"].items():
        last.add_metric([*labels.values(), phase], seconds)
    yield from (total, share, last)
    yield one(STEP["stoker_comm_buckets_total"], labels, s["comm_buckets"])
    yield one(STEP["stoker_comm_bytes_total"], labels, s["comm_bytes"])


def loader_families(m: Any, labels: dict[str, str]) -> Iterator[Any]:
    d = m.to_dict() if hasattr(m, "to_dict") else dict(m)
    tier = {"tier": str(d.get("tier", ""))}
    for name, key in (
        ("stoker_loader_batches_total", "batches"),
        ("stoker_loader_samples_total", "samples"),
        ("stoker_loader_wait_seconds_total", "wait_s"),
        ("stoker_loader_compute_seconds_total", "compute_s"),
        ("stoker_loader_first_batch_seconds", "first_batch_s"),
        ("stoker_loader_accelerator_utilization_ratio", "utilization"),
        ("stoker_loader_read_bytes_total", "bytes_read"),
        ("stoker_loader_fetched_bytes_total", "bytes_fetched"),
        ("stoker_loader_cache_hits_total", "cache_hits"),
        ("stoker_loader_cache_misses_total", "cache_misses"),
        ("stoker_loader_skipped_samples_total", "skipped"),
    ):
        yield one(LOADER[name], labels, d.get(key), **tier)


def checkpoint_families(ckpt: Any, labels: dict[str, str]) -> Iterator[Any]:
    totals, last = ckpt.totals, ckpt.last_save
    yield one(CHECKPOINT["stoker_checkpoint_saves_total"], labels, totals["saves"])
    yield one(CHECKPOINT["stoker_checkpoint_bytes_total"], labels, totals["bytes"])
    blocking = totals["blocking_s"]
    yield one(CHECKPOINT["stoker_checkpoint_blocking_seconds_total"], labels, blocking)
    yield one(
        CHECKPOINT["stoker_checkpoint_last_blocking_seconds"],
        labels,
        last.blocking_s if last else None,
    )
    yield one(
        CHECKPOINT["stoker_checkpoint_last_durable_seconds"],
        labels,
        last.durable_s if last else None,
    )
    yield one(CHECKPOINT["stoker_checkpoint_last_step"], labels, last.step if last else None)


def stage_families(meter: Any, labels: dict[str, str]) -> Iterator[Any]:
    yield one(STAGE["stoker_stage_bytes_total"], labels, meter.bytes_done)
    yield one(STAGE["stoker_stage_files_total"], labels, meter.files_done)
    yield one(STAGE["stoker_stage_planned_bytes"], labels, meter.bytes_planned)


def _nan(value: float | None) -> float:
    return math.nan if value is None else value
