"""Measure where the GPU waits: storage, loader and collective benchmarks, the step ledger, the
node doctor and the live exporter.

Names load on first use (PEP 562): one name does not import what the others need (torch,
prometheus-client)."""

from __future__ import annotations

from .._lazy import lazy_names

_WHERE = {
    "ImdsUnreachable": "_imds",
    "fetch_instance": "_imds",
    "Ledger": "ledger",
    "doctor": "doctor",
    "bench_storage": "storage",
    "bench_single_writer": "single_writer",
    "run_loader": "loader",
    "most_accelerators": "loader",
    "serve": "exporter",
}

__all__ = sorted(_WHERE)


__getattr__ = lazy_names(__name__, _WHERE)
