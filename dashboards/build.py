"""Build dashboards/stoker.json, the Grafana dashboard of a stoker job, with Grafana's own
Foundation SDK (a kept library: the JSON model is typed, not hand-written).

    .venv/bin/python dashboards/build.py            # rewrite dashboards/stoker.json

GPU utilization comes from NVIDIA's dcgm-exporter where it runs (``DCGM_FI_DEV_GPU_UTIL``) and
from ``stoker watch`` where it does not; stoker's metrics carry dcgm-exporter's ``Hostname``
and ``gpu`` labels, so a rank's data stall sits beside its own GPU's utilization.
tests/test_dashboard.py checks that the committed JSON is this script's output and that every
query names metrics and labels a live exporter serves."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard, prometheus, timeseries
from grafana_foundation_sdk.builders.common import StackingConfig
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import StackingMode
from grafana_foundation_sdk.models.dashboard import DataSourceRef

OUT = Path(__file__).with_name("stoker.json")
DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
JOB = 'training_job=~"$job"'
HOST = 'Hostname=~"$host"'
RATE = "[$__rate_interval]"


def _query(expr: str, legend: str) -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).datasource(DS)


def _panel(
    title: str, unit: str, *queries: tuple[str, str], stacked: bool = False, help: str = ""
) -> timeseries.Panel:
    panel = timeseries.Panel().title(title).unit(unit).datasource(DS).min(0).height(8).span(12)
    panel = panel.description(help)
    if stacked:
        panel = panel.stacking(StackingConfig().mode(StackingMode.NORMAL)).fill_opacity(60)
    for expr, legend in queries:
        panel = panel.with_target(_query(expr, legend))
    return panel


def _variable(name: str, query: str) -> dashboard.QueryVariable:
    return (
        dashboard.QueryVariable(name)
        .label(name)
        .datasource(DS)
        .query(query)
        .multi(True)
        .include_all(True)
        .all_value(".*")
    )


def build() -> dashboard.Dashboard:
    return (
        dashboard.Dashboard("stoker: is the GPU fed?")
        .uid("stoker-job")
        .tags(["stoker", "gpu", "training"])
        .refresh("30s")
        .time("now-3h", "now")
        .with_variable(
            dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus")
        )
        .with_variable(_variable("job", "label_values(stoker_steps_total, training_job)"))
        .with_variable(_variable("host", "label_values(stoker_steps_total, Hostname)"))
        .with_row(dashboard.Row("Where each step's time goes"))
        .with_panel(
            _panel(
                "GPU utilization (dcgm-exporter; stoker watch where it does not run)",
                "percentunit",
                (
                    f"avg by (Hostname, gpu) (DCGM_FI_DEV_GPU_UTIL{{{HOST}}}) / 100",
                    "{{Hostname}} GPU {{gpu}}",
                ),
                (
                    f"avg by (Hostname, gpu) (stoker_gpu_utilization_ratio{{{HOST}}})",
                    "{{Hostname}} GPU {{gpu}} (NVML)",
                ),
                help="Share of time a kernel ran on each GPU.",
            )
        )
        .with_panel(
            _panel(
                "Step time by phase (the stall split)",
                "percentunit",
                (f"avg by (phase) (stoker_step_phase_ratio{{{JOB},{HOST}}})", "{{phase}}"),
                stacked=True,
                help="data and copy are the GPU waiting on the data path; exposed_comm on the fabric.",
            )
        )
        .with_panel(
            _panel(
                "Data stall beside the same GPU's utilization",
                "percentunit",
                (
                    f'avg by (Hostname, gpu) (stoker_step_phase_ratio{{phase="data",{JOB},{HOST}}})',
                    "{{Hostname}} GPU {{gpu}} data stall",
                ),
                (
                    f'stoker_step_phase_ratio{{phase="data",{JOB},{HOST}}} * on (Hostname, gpu) '
                    f"group_left (modelName) (DCGM_FI_DEV_GPU_UTIL / 100)",
                    "{{Hostname}} GPU {{gpu}} stall x utilization",
                ),
                help="Joined on dcgm-exporter's Hostname and gpu labels.",
            )
        )
        .with_panel(
            _panel(
                "Loader accelerator utilization (MLPerf Storage AU)",
                "percentunit",
                (
                    f"stoker_loader_accelerator_utilization_ratio{{{JOB},{HOST}}}",
                    "rank {{rank}} ({{tier}})",
                ),
                help="compute / (compute + wait), the first batch left out; MLPerf Storage asks 90 %.",
            )
        )
        .with_row(dashboard.Row("Data path"))
        .with_panel(
            _panel(
                "Loader read rate",
                "Bps",
                (
                    f"sum by (Hostname) (rate(stoker_loader_read_bytes_total{{{JOB},{HOST}}}{RATE}))",
                    "{{Hostname}} read",
                ),
                (
                    f"sum by (Hostname) (rate(stoker_loader_fetched_bytes_total{{{JOB},{HOST}}}{RATE}))",
                    "{{Hostname}} fetched",
                ),
            )
        )
        .with_panel(
            _panel(
                "Shard cache hit ratio",
                "percentunit",
                (
                    f"sum(rate(stoker_loader_cache_hits_total{{{JOB}}}{RATE})) / "
                    f"(sum(rate(stoker_loader_cache_hits_total{{{JOB}}}{RATE})) + "
                    f"sum(rate(stoker_loader_cache_misses_total{{{JOB}}}{RATE})))",
                    "hits",
                ),
            )
        )
        .with_panel(
            _panel(
                "Checkpoint: time save() held the loop",
                "s",
                (
                    f"stoker_checkpoint_last_blocking_seconds{{{JOB},{HOST}}}",
                    "rank {{rank}} last save",
                ),
                (
                    f"rate(stoker_checkpoint_blocking_seconds_total{{{JOB},{HOST}}}{RATE})",
                    "rank {{rank}} share of wall time",
                ),
            )
        )
        .with_panel(
            _panel(
                "Staging throughput",
                "Bps",
                (
                    f"sum by (Hostname) (rate(stoker_stage_bytes_total{{{HOST}}}{RATE}))",
                    "{{Hostname}}",
                ),
            )
        )
    )


def render() -> str:
    return (
        json.dumps(
            json.loads(JSONEncoder(sort_keys=True).encode(build().build())),
            indent=1,
            sort_keys=True,
        )
        + "\n"
    )


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}", file=sys.stderr)
