"""The plan's reports: names shown as written, plurals, and figures in readable units."""

import io

import pytest
from rich.console import Console

from stoker.catalog import load_catalog
from stoker.plan import plan_job
from stoker.plan._format import duration
from stoker.plan.render import markdown, markdown_compare, rich_compare, rich_report


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def job(cat, name="job", vm="ND96isr_H100_v5", nodes=1, gpus=None, **workload):
    cluster = {"vm_size": vm, "nodes": nodes} | ({"gpus": gpus} if gpus else {})
    w = {"step_time": "1 s", "params": "1B", "sample_size": "1 MB", "dataset_size": "1 TB"}
    return plan_job({"name": name, "cluster": cluster, "workload": w | workload}, cat)


def text(renderable) -> str:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(renderable)
    return out.getvalue()


def test_markup_and_pipes_in_a_name_are_shown_as_written(cat):
    p = job(cat, name="[bold]a|b[/bold]")
    assert "[bold]a|b[/bold]" in text(rich_report(p))
    assert "[bold]a|b" in text(rich_compare([p, p]))
    head = markdown_compare([p, p]).splitlines()[0]
    assert head.count(" | ") == 2 and "a\\|b" in head


def test_one_gpu_is_singular(cat):
    p = job(cat, gpus=1)
    assert "= 1 GPU," in text(rich_report(p))
    assert "1 GPUs" not in markdown(p)


def test_figures_read_in_units(cat):
    p = job(cat, nodes=32, dataset_size="100 PB")
    md = markdown(p)
    assert "e+" not in md and " B of " not in md  # was 'needs 3.12e+15 B', '1e+05 TB'
    assert "100 PB" in md
    nvme = next(o for o in p.data.options if o.tier == "nvme")
    assert "does not fit: needs 2.78 PiB of 22.4 TiB usable" in nvme.notes[0]
    assert duration(6.81e-9) == "< 1 us"  # a checkpoint's share of a step, once '0.00681 us'
    assert duration(0) == "0 s" and duration(2e-6) == "2 us"


def test_dp_1_has_no_busbw_of_zero(cat):
    p = job(cat, gpus=1)
    ic = next(r for r in p.recommendations if r.need == "GPU-to-GPU interconnect")
    assert "0 B/s" not in ic.reason and "no gradient exchange" in ic.reason


def test_gb200_nvlink_domain_spans_vms(cat):
    p = job(cat, vm="ND128isr_NDR_GB200_v6", nodes=18)
    ic = next(r for r in p.recommendations if r.need == "GPU-to-GPU interconnect")
    assert "inside the VM" not in ic.choice and "18 VMs' NVLink domain" in ic.choice
