"""Measure where the GPU waits: storage, loader and collective benchmarks, the step ledger, the
node doctor and the live exporter."""
