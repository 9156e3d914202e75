"""The Grafana dashboard works against the exporter: the committed JSON is what Grafana's
Foundation SDK builds, and every query on it names metrics (with their labels) that a live
stoker exporter serves, or that dcgm-exporter serves by default."""

from __future__ import annotations

import json
import re
import socket
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch
from prometheus_client.parser import text_string_to_metric_families

import stoker
from fake_nvml import FakeNvml
from stoker.measure import metrics
from stoker.measure._stage_meter import StageMeter
from stoker.measure.exporter import serve
from stoker.measure.gpus import Gpus
from stoker.measure.ledger import Ledger
from stoker.stream import ShardWriter, StreamingDataset, StreamingLoader

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "dashboards" / "stoker.json"
# dcgm-exporter's default counters the dashboard may use, and the labels it puts on them
# (docs.nvidia.com/datacenter/dcgm/latest/reference/dcgm-exporter-metrics.html, 2026).
DCGM = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE"}
DCGM_LABELS = {"gpu", "UUID", "device", "modelName", "Hostname", "pci_bus_id"}
NAME = re.compile(r"\b(stoker_[a-z_]+|DCGM_FI_[A-Z_]+)\b")


def test_the_committed_json_is_the_sdks_output() -> None:
    sys.path.insert(0, str(DASHBOARD.parent))
    import build  # dashboards/build.py

    assert build.render() == DASHBOARD.read_text(), "run: python dashboards/build.py"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, set[str]]]:
    """Scrape a live exporter serving 8 GPUs, a ledger, a loader, a checkpointer and a stage:
    metric name -> label name -> values seen."""
    tmp = tmp_path_factory.mktemp("served")
    with ShardWriter(tmp / "ds", codec="pickle") as writer:
        for i in range(64):
            writer.write({"id": i})
    loader = StreamingLoader(StreamingDataset(tmp / "ds"), 8, collate_fn=list)
    ledger = Ledger("cpu", skip_first=0)
    for _ in ledger.wrap(loader):
        with ledger.compute():
            time.sleep(0.001)
    ledger.summary()
    ckpt = stoker.Checkpointer(tmp / "fast")
    ckpt.save(1, {"w": torch.zeros(4)})
    ckpt.wait()
    (tmp / "src").mkdir()
    (tmp / "src" / "a.bin").write_bytes(b"x" * 1000)
    meter = StageMeter()
    stoker.stage(str(tmp / "src"), str(tmp / "dst"), reporter=meter)
    server = serve(
        0,
        addr="127.0.0.1",
        job="pretrain",
        gpus=Gpus(FakeNvml(8)),
        ledger=ledger,
        loader=loader,
        checkpointer=ckpt,
        stage=meter,
    )
    try:
        request = urllib.request.Request(f"http://127.0.0.1:{server.server_port}/metrics")
        text = urllib.request.urlopen(request).read().decode()
    finally:
        server.shutdown()
        ckpt.close()
    seen: dict[str, dict[str, set[str]]] = {}
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            labels = seen.setdefault(sample.name, {})
            for key, value in sample.labels.items():
                labels.setdefault(key, set()).add(value)
    return seen


def _labels_of(name: str, served: dict) -> set[str]:
    return DCGM_LABELS if name in DCGM else set(served[name])


def _queries() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    variables = [v["query"] for v in board["templating"]["list"] if v.get("type") == "query"]
    return exprs + [q if isinstance(q, str) else q["query"] for q in variables]


def test_every_query_names_metrics_and_labels_that_exist(served: dict) -> None:
    assert len(_queries()) >= 10
    for expr in _queries():
        names = set(NAME.findall(expr))
        assert names, expr
        for name in names:
            assert name in served or name in DCGM, f"{name} is not served: {expr}"
        for name, matchers in re.findall(r"\b([A-Za-z_]+)\{([^}]*)\}", expr):
            for label in re.findall(r"(\w+)\s*=~?", matchers):
                assert label in _labels_of(name, served), f"{name} has no {label}: {expr}"
        grouping = re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", expr)
        for label in (x.strip() for g in grouping for x in g.split(",")):
            for name in names:
                assert label in _labels_of(name, served), f"{name} has no {label}: {expr}"
        for group in re.findall(r"group_left\s*\(([^)]*)\)", expr):
            assert all(x.strip() in DCGM_LABELS for x in group.split(",")), expr
        if expr.startswith("label_values("):
            name, label = re.match(r"label_values\((\w+),\s*(\w+)\)", expr).groups()
            assert label in served[name], expr


def test_what_the_dashboard_shows_is_there(served: dict) -> None:
    """GPU utilization beside the stall split, loader AU, cache hits, checkpoint blocking and
    staging throughput, each with the values the sources produced."""
    text = " ".join(_queries())
    for needed in (
        "DCGM_FI_DEV_GPU_UTIL",
        "stoker_step_phase_ratio",
        "stoker_loader_accelerator_utilization_ratio",
        "stoker_loader_cache_hits_total",
        "stoker_checkpoint_last_blocking_seconds",
        "stoker_stage_bytes_total",
    ):
        assert needed in text
    assert served["stoker_gpu_utilization_ratio"]["gpu"] == {str(i) for i in range(8)}
    assert served["stoker_steps_total"]["training_job"] == {"pretrain"}
    assert served["stoker_step_phase_ratio"]["Hostname"] == {socket.gethostname()}


def test_names_follow_prometheus_conventions(served: dict) -> None:
    for name, metric in metrics.ALL.items():
        assert name.startswith("stoker_") and not name.endswith(("_s", "_percent", "_ms"))
        assert (metric.kind == "counter") == name.endswith("_total"), name
        assert name in served, f"{name} is declared but not served"


def test_the_exporter_speaks_openmetrics_when_asked() -> None:
    server = serve(0, addr="127.0.0.1", gpus=Gpus(FakeNvml(2)))
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        request = urllib.request.Request(url, headers={"Accept": "application/openmetrics-text"})
        with urllib.request.urlopen(request) as response:
            kind, body = response.headers["Content-Type"], response.read().decode()
    finally:
        server.shutdown()
    assert kind.startswith("application/openmetrics-text") and body.rstrip().endswith("# EOF")


def test_every_metric_is_documented() -> None:
    doc = (ROOT / "docs" / "metrics.md").read_text()
    missing = [name for name in metrics.ALL if f"`{name}`" not in doc]
    assert not missing, f"docs/metrics.md lacks {missing}"
