"""The 64-VM, 70B pretraining job the simulator tests run (tests/test_simulate.py and
tests/test_plan_renewal.py): one shape, its failure rate chosen by each test."""

from __future__ import annotations


def seventy_b_job(name: str, gpu_mtbf: str) -> dict:
    """A fresh dict each call, so a test may change it without touching another's."""
    return {
        "name": name,
        "cluster": {"vm_size": "ND96isr_H100_v5", "nodes": 64},
        "workload": {
            "kind": "pretrain",
            "params": "70B",
            "tokens_per_s_per_gpu": 1100,
            "seq_len": 8192,
            "global_batch": 1024,
            "dataset_size": "60 TB",
            "tp": 8,
            "sharding": "fsdp",
            "overlap": 0.8,
        },
        "reliability": {"gpu_mtbf": gpu_mtbf, "restart_time": "10 min"},
        "run": {"length": "20 d"},
    }
