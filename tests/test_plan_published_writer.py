"""The plan against a published single-writer torch.save time (issue 54: within 25 %).

DeepSpeedExamples, deepnvme/model_checkpoint/README.md (2025-06-21, commit b99d653b):
https://github.com/deepspeedai/DeepSpeedExamples/blob/master/deepnvme/model_checkpoint/README.md
One process saves HF Phi-3.5-mini (``microsoft/Phi-3.5-mini-instruct``, fp32 as
``from_pretrained`` loads it, no optimizer state) from GPU memory with a vanilla ``torch.save()``
to eight PCIe Gen4 NVMe in RAID-0: "test_save -- 14.23 GB, 20.72 secs, 0.69 GB/s". Its script
(torch_save_model.py) divides the file's bytes by 1024**3, so the GB are GiB. FastPersist wrote
the same checkpoint to the same disks in 0.80 s (17.75 GB/s): the 20.72 s is the serialising
writer's, not the disks'. The README does not name the VM; the spec
(tests/data/deepnvme-torch-save-phi35.toml) takes ND96isr_H100_v5, the catalog's size with eight
Gen4-class NVMe (assumed).

The catalog's one torch.save stream ([writers] torch_save_write) is that README's rate; what is
held here is the plan's path from a job spec to a write time: the checkpoint size it derives
from the parameters, the lone writer it takes for ``writers = "single"``, the limit it picks
among the NVMe, the NICs and the stream. Tolerance: 25 % (issue 54). Corroborated, not tested:
Fast-LLM issue #26 (github.com/ServiceNow/Fast-LLM/issues/26, 2024-10-25) measures torch.save on
H100 NVMe at under a third of the disk's "more than 2 GiB/s".
"""

import tomllib
from pathlib import Path

import pytest

from stoker.catalog import load_catalog
from stoker.plan import plan_job
from stoker.plan.checkpoints import TORCH_SAVE_UNKNOWN

TOLERANCE = 0.25
SOURCE = "DeepSpeedExamples deepnvme/model_checkpoint/README.md, 2025-06-21"
SPEC_PATH = Path(__file__).parent / "data" / "deepnvme-torch-save-phi35.toml"
PUBLISHED_GIB, PUBLISHED_S = 14.23, 20.72  # "test_save -- 14.23 GB, 20.72 secs"
FASTPERSIST_S = 0.80  # "test_ds_aio_fast_save -- 14.23 GB, 0.80 secs" on the same disks


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def spec(**checkpoints) -> dict:
    doc = tomllib.loads(SPEC_PATH.read_text())
    doc["checkpoints"].update(checkpoints)
    return doc


def test_a_lone_torch_save_of_phi35_mini_takes_the_published_time(cat):
    ck = plan_job(spec(), cat).checkpoints
    # The size is the plan's own: 3.82B parameters x 4 bytes, against the file's 14.23 GiB.
    assert ck.size_bytes / 2**30 == pytest.approx(PUBLISHED_GIB, rel=0.01), SOURCE
    assert (ck.writer_streams, ck.writer_vms, ck.tier) == (1, 1, "nvme")
    assert ck.write_s == pytest.approx(PUBLISHED_S, rel=TOLERANCE), SOURCE
    # One serialising stream sets it, not the VM's NVMe, and nothing is left unknown.
    assert ck.write_limit == "streams" and ck.unknown == []
    assert ck.write_bps < cat.vm["ND96isr_H100_v5"].nvme_write / 20


def test_the_published_rate_is_what_brings_the_plan_within_tolerance(cat):
    # Before the serialising writer had a figure, only the raw-buffer limits applied: the plan
    # took the 14 GiB at the NVMe's rate, some fifty times faster than published.
    bare = cat.model_copy(update={"writers": None})
    ck = plan_job(spec(), bare).checkpoints
    assert ck.write_s < PUBLISHED_S * (1 - TOLERANCE), SOURCE
    assert TORCH_SAVE_UNKNOWN in ck.unknown  # and it said the figure was missing


def test_raw_buffer_writers_on_the_same_disks_are_not_held_to_it(cat):
    # FastPersist (one process, raw buffers) took 0.80 s on the same disks. The plan's one
    # raw-buffer writer is not held to the torch.save stream; no source publishes its NVMe
    # stream, so its time is a lower bound, which must not exceed what FastPersist achieved.
    single = plan_job(spec(), cat).checkpoints
    raw = plan_job(spec(writers="per_vm"), cat).checkpoints
    assert raw.writer_streams == 1 and raw.write_s < single.write_s / 10
    assert raw.unknown == ["one writer's rate to ND H100 v5 local NVMe"]
    assert raw.write_s <= FASTPERSIST_S, SOURCE


def test_the_figure_cites_its_source_with_its_date(cat):
    rows = list(cat.figures("writers"))
    assert [(r["field"], r["source"], r["date"]) for r in rows] == [
        ("torch_save_write", "deepnvme-torch-save", "2025-06-21")
    ]
    where = cat.sources["deepnvme-torch-save"].where
    assert "DeepSpeedExamples" in where and "model_checkpoint/README.md" in where
    assert rows[0]["value"] == pytest.approx(0.69 * 2**30)


def test_a_measured_torch_save_wins_over_the_published_one(cat, tmp_path):
    rec = tmp_path / "single.json"
    rec.write_text(
        '{"kind": "stoker.measured/1", "source": "storage", "name": "single_writer",'
        ' "recorded": "2026-12-07T21:00:00Z", "series": {},'
        ' "summary": {"size_bytes": 1073741824, "torch_save_write_bps": 1.5e9}}'
    )
    p = plan_job(spec(), cat, measured=rec)
    assert p.checkpoints.write_bps == pytest.approx(1.5e9)
    assert p.checkpoints.write_s == pytest.approx(p.checkpoints.size_bytes / 1.5e9)


def test_an_override_file_may_give_its_own_torch_save_rate(tmp_path):
    override = tmp_path / "mine.toml"
    override.write_text('[writers]\ntorch_save_write = "0.5 GB/s"\n')
    mine = load_catalog([override], defaults=False)
    assert mine.writers is not None and mine.writers.source_of("torch_save_write") == (
        "user:mine.toml"
    )
    ck = plan_job(spec(), mine).checkpoints
    assert ck.write_bps == pytest.approx(0.5e9)
