"""Measure where the GPU waits: storage, loader and collective benchmarks, the step ledger, the
node doctor and the live exporter.

Names load on first use (PEP 562): one name does not import what the others need (torch,
prometheus-client)."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "ImdsUnreachable": "_imds",
    "fetch_instance": "_imds",
    "Ledger": "ledger",
    "doctor": "doctor",
    "bench_storage": "storage",
    "run_loader": "loader",
    "most_accelerators": "loader",
    "serve": "exporter",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'stoker.measure' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value
