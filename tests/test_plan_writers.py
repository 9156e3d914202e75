"""Checkpoint writers by what they do: a lone torch.save serialises (pickle, one stream, the page
cache) and is held to its own rate, measured or else published; raw-buffer writers (DCP, stoker's
format) are not.
The single-writer bench times both on a real folder and its record feeds `--measured`."""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path

import pytest

from stoker.catalog import load_catalog
from stoker.errors import SpecError, StokerError
from stoker.measure.single_writer import WriterBenchError, bench_single_writer
from stoker.plan import plan_job
from stoker.plan.checkpoints import TORCH_SAVE_UNKNOWN

SPEC = tomllib.loads((Path(__file__).parent.parent / "examples/pretrain-64vm.toml").read_text())
MIB = 2**20


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def test_the_bench_times_a_torch_save_and_a_raw_write_of_the_same_bytes(tmp_path):
    rec = bench_single_writer(tmp_path, 24 * MIB)
    s = rec.summary
    assert (rec.source, rec.name, s["size_bytes"], s["streams"]) == (
        "storage",
        "single_writer",
        24 * MIB,
        1,
    )
    assert s["torch_save_write_bps"] > 0 and s["raw_write_bps"] > 0
    assert s["raw_direct_write_bps"] is None or s["raw_direct_write_bps"] > 0
    assert s["torch_save_vs_raw"] == pytest.approx(s["torch_save_write_bps"] / s["raw_write_bps"])
    assert list(tmp_path.iterdir()) == []  # its test files are gone
    assert rec.to_dict()["kind"] == "stoker.measured/1"


def test_the_direct_writer_writes_the_same_bytes_as_the_page_cache_one(tmp_path):
    from stoker.measure import single_writer as sw

    state = sw._state(3 * MIB + 6)  # a tail that is no whole block
    sw._raw(state, tmp_path / "cached.bin")
    sw._raw_direct(state, tmp_path / "direct.bin")
    cached, direct = (tmp_path / "cached.bin").read_bytes(), (tmp_path / "direct.bin").read_bytes()
    assert len(cached) == 3 * MIB + 6 and direct == cached


def test_the_bench_refuses_a_folder_that_is_not_one(tmp_path):
    with pytest.raises(WriterBenchError, match=r"^bench single-writer: .*nope is not a folder"):
        bench_single_writer(tmp_path / "nope", 4 * MIB)
    assert issubclass(WriterBenchError, StokerError)


def record(tmp_path: Path, bps: float) -> Path:
    doc = {
        "kind": "stoker.measured/1",
        "source": "storage",
        "name": "single_writer",
        "recorded": "2026-12-07T21:00:00Z",
        "summary": {"size_bytes": 2**31, "torch_save_write_bps": bps, "raw_write_bps": 3 * bps},
        "series": {},
    }
    path = tmp_path / "single.json"
    path.write_text(json.dumps(doc))
    return path


def job(writers: str, tier: str = "lustre") -> dict:
    spec = copy.deepcopy(SPEC)
    spec["checkpoints"].update(tier=tier, writers=writers, mode="sync")
    return spec


def test_a_lone_torch_save_is_held_to_its_measured_rate(cat, tmp_path):
    raw = cat.lustre_common.stream_write  # MLPerf's raw-buffer writers: 1.79 GB/s a stream
    published = cat.writers.torch_save_write  # one torch.save (tests/test_plan_published_writer)
    before = plan_job(job("single"), cat).checkpoints
    assert published < raw and before.write_bps == pytest.approx(published)
    assert TORCH_SAVE_UNKNOWN not in before.unknown
    # Without the published figure, the raw-buffer stream is all the plan has, and it says so.
    bare = plan_job(job("single"), cat.model_copy(update={"writers": None})).checkpoints
    assert bare.write_bps == pytest.approx(raw) and TORCH_SAVE_UNKNOWN in bare.unknown
    p = plan_job(job("single"), cat, measured=record(tmp_path, 0.6e9))
    ck = p.checkpoints
    assert ck.write_bps == pytest.approx(0.6e9) and ck.write_limit == "streams"
    assert ck.write_s == pytest.approx(ck.size_bytes / 0.6e9)
    assert ck.stream_write_bps == pytest.approx(0.6e9)
    assert TORCH_SAVE_UNKNOWN not in ck.unknown
    rows = [(c.figure, c.catalog_bps, c.measured_bps) for c in p.calibration]
    assert rows == [("torch_save_write", published, 0.6e9)]  # beside the published figure
    # A faster torch.save than the raw stream is still held to the raw stream.
    fast = plan_job(job("single"), cat, measured=record(tmp_path, 5e9)).checkpoints
    assert fast.write_bps == pytest.approx(raw)


def test_raw_buffer_writers_are_not_slowed_by_a_torch_save_figure(cat, tmp_path):
    plain = plan_job(job("per_vm"), cat).checkpoints
    measured = plan_job(job("per_vm"), cat, measured=record(tmp_path, 0.1e9)).checkpoints
    assert measured.write_bps == pytest.approx(plain.write_bps)
    assert TORCH_SAVE_UNKNOWN not in plain.unknown


def test_a_record_without_the_rate_is_one_line_naming_the_file(tmp_path):
    path = record(tmp_path, 1e9)
    doc = json.loads(path.read_text())
    del doc["summary"]["torch_save_write_bps"]
    path.write_text(json.dumps(doc))
    with pytest.raises(SpecError, match=r"--measured .*single\.json: summary"):
        plan_job(job("single"), measured=path)


def test_the_bench_verb_records_what_the_plan_then_plans_with(cat, tmp_path):
    from typer.testing import CliRunner

    from stoker.cli import app

    folder, rec = tmp_path / "tier", tmp_path / "single.json"
    folder.mkdir()
    argv = ["bench", "single-writer", str(folder), "--size", "8MiB", "--record", str(rec)]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("torch.save ") and "raw buffers" in result.output
    measured = json.loads(rec.read_text())["summary"]["torch_save_write_bps"]
    p = plan_job(job("single", tier="nvme"), cat, measured=rec)
    assert [(c.figure, c.measured_bps) for c in p.calibration] == [("torch_save_write", measured)]
    # No raw stream rate is published for the NVMe, so the torch.save's is the stream's; a test
    # folder's rate is far under the VM's NVMe, so the one stream binds.
    assert p.checkpoints.stream_write_bps == pytest.approx(measured)
    assert p.checkpoints.write_bps == pytest.approx(measured)
    bad = CliRunner().invoke(app, ["bench", "single-writer", str(tmp_path / "nope")])
    assert bad.exit_code == 2 and "is not a folder" in bad.output
