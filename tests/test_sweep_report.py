"""A careless and hostile user's sweep of ``stoker report`` and the ``--record`` options that feed
it: bad inputs are one line naming the file and the key (exit 2), bad values are left out and
counted, a huge record stays small, outputs are checked before any work and written whole, and
no secret reaches the page."""

from __future__ import annotations

import json
import os
import threading
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

import stoker
from stoker.cli import app
from stoker.errors import ReportError
from stoker.measure.measured import MAX_POINTS, Measured

runner = CliRunner()
READ_ONLY = Path("/proc/sys")  # a read-only file system: not writable even by root


def _record(folder: Path, name: str = "run", values: list | None = None, **extra) -> Path:
    values = [1e6, 2e6, 3e6, 2e6] if values is None else values
    doc = {
        "kind": "stoker.measured/1",
        "source": "stage",
        "name": name,
        "series": {
            "throughput_bps": {"unit": "bytes/s", "t_s": list(range(len(values))), "values": values}
        },
    } | extra
    path = folder / "rec.json"
    path.write_text(json.dumps(doc))
    return path


def _report(*args: str):  # noqa: ANN202
    return runner.invoke(app, ["report", *args])


def _one_line_error(res, *words: str) -> str:  # noqa: ANN001
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def _leftovers(folder: Path) -> list[str]:
    return sorted(
        p.name for p in folder.rglob("*") if ".partial" in p.name or p.name.endswith(".tmp")
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", ["is empty"]),
        (
            '{"kind": "stoker.measured/1", "source": "ledger", "series": [1, 2]}',
            ["series should be an object"],
        ),
        (
            '{"kind": "stoker.measured/1", "source": "ledger", "summary": {"data_share": "x"}}',
            ["summary.data_share", "number or null"],
        ),
        (
            '{"kind": "stoker.measured/1", "source": "stage", "series": {"throughput_bps": '
            '{"unit": "bytes/s", "t_s": ["0"], "values": [1]}}}',
            ["series.throughput_bps.t_s"],
        ),
        # stoker bench allreduce --json: another kind of JSON
        (
            '{"backend": "gloo", "world_size": 2, "rows": [{"op": "all_reduce", "bytes": 8}]}',
            ["not a measured record"],
        ),
    ],
)
def test_a_bad_measured_file_is_one_line_naming_it(tmp_path, text, words):
    bad = tmp_path / "in.json"
    bad.write_text(text)
    _one_line_error(
        _report("--out", str(tmp_path / "r.html"), "--measured", str(bad)), str(bad), *words
    )
    assert not (tmp_path / "r.html").exists()


def test_a_folder_given_as_an_input_is_named_as_a_folder(tmp_path):
    (tmp_path / "runs").mkdir()
    for flag in ("--measured", "--simulation", "--plan"):
        res = _report("--out", str(tmp_path / "r.html"), flag, str(tmp_path / "runs"))
        _one_line_error(res, str(tmp_path / "runs"), "is a folder")


def test_a_plan_spec_that_fails_to_plan_names_its_file(tmp_path):
    spec = tmp_path / "job.toml"
    spec.write_text('[job]\nname = "x"\n')
    res = _report("--out", str(tmp_path / "r.html"), "--plan", str(spec))
    assert res.exit_code == 2 and res.stderr.strip().startswith(f"error: {spec}"), res.output
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda p: p.update(run="x"), "run should be an object"),
        (lambda p: p.update(warnings=-1.0), "warnings should be a list"),
        (lambda p: p["step"].update(compute_s="x"), "step.compute_s"),
        (lambda p: p["step"].update(total_s=[1]), "step.total_s"),
        (lambda p: p["checkpoints"].update(interval_s=-1.0), "checkpoints.interval_s"),
        (lambda p: p["data"].update(options=[1]), "every item of data.options"),
        (lambda p: p["cost"].update(items="x"), "cost.items should be a list"),
        (lambda p: p["cost"].update(idle_gpu_usd=float("nan")), "cost.idle_gpu_usd"),
        (lambda p: p["cost"].update(unknown=[1]), "cost.unknown"),
        (lambda p: p["cost"]["items"][0].update(usd="x"), "cost.items[0].usd"),
        (lambda p: p["data"]["options"][0].update(tier=5), "data.options[0].tier should be"),
        (lambda p: p["data"]["options"][0].update(tier=None), "data.options[0].tier should be"),
        (lambda p: p["data"]["options"][0].update(tier={}), "data.options[0].tier should be"),
        (
            lambda p: p["data"]["options"][0].update(stall_per_step_s={}),
            "data.options[0].stall_per_step_s",
        ),
    ],
)
def test_a_plan_edited_by_hand_is_one_line_naming_the_key(tmp_path, edit, key):
    from report_inputs import SPEC_2048

    plan = stoker.plan_job(SPEC_2048).to_dict()
    edit(plan)
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps(plan))
    _one_line_error(_report("--out", str(tmp_path / "r.html"), "--plan", str(bad)), str(bad), key)


def test_nothing_to_report_is_one_line(tmp_path):
    _one_line_error(_report("--out", str(tmp_path / "r.html")), "nothing to report")


def test_not_finite_and_negative_values_are_left_out_and_counted(tmp_path):
    rec = tmp_path / "rec.json"  # json.dumps writes NaN and Infinity, as a careless writer would
    rec.write_text(
        json.dumps(
            {
                "kind": "stoker.measured/1",
                "source": "stage",
                "name": "run",
                "summary": {
                    "throughput_bps": float("inf"),
                    "seconds_s": -4.0,
                    "files": 3,
                    "bytes": 10**400,
                },  # an integer past a float's range
                "series": {
                    "throughput_bps": {
                        "unit": "bytes/s",
                        "t_s": [0, 1, 2, 3, float("nan")],
                        "values": [1e6, 10**400, -5e6, 3e6, 2e6],
                    }
                },
            }
        )
    )
    m = stoker.report.read_measured(rec)
    assert m.summary == {"throughput_bps": None, "seconds_s": None, "files": 3, "bytes": None}
    assert m.series["throughput_bps"].t_s == [0, 1, 2, 3]
    assert m.series["throughput_bps"].values[0] == 1e6 and m.series["throughput_bps"].values[3]
    assert all(v != v for v in m.series["throughput_bps"].values[1:3])  # NaN: unknown
    assert m.dropped == 6  # 3 summary figures, 2 values, 1 time
    out = tmp_path / "r.html"
    stoker.report(out, measured=[rec])
    html = out.read_text()
    assert "6 values not finite or negative left out" in html


def test_huge_and_one_and_no_points_still_make_a_page(tmp_path):
    for values in ([1e300, 1e300], [2e6], []):
        res = _report(
            "--out", str(tmp_path / "r.html"), "--measured", str(_record(tmp_path, values=values))
        )
        assert res.exit_code == 0, res.output
        assert (tmp_path / "r.html").read_text().endswith("</html>\n")


def test_a_million_points_make_a_small_page(tmp_path):
    n = 1_000_000
    rec = tmp_path / "big.json"
    rec.write_text(
        json.dumps(
            {
                "kind": "stoker.measured/1",
                "source": "ledger",
                "name": "long run",
                "series": {
                    "data_share": {
                        "unit": "ratio",
                        "t_s": [i * 0.5 for i in range(n)],
                        "values": [0.25 if i % 2 else 0.75 for i in range(n)],
                    }
                },
            }
        )
    )
    m = stoker.report.read_measured(rec)
    s = m.series["data_share"]
    assert len(s.t_s) <= MAX_POINTS and s.t_s[-1] == (n - 1) * 0.5
    assert all(abs(v - 0.5) < 0.01 for v in s.values[:-1])  # averaged, not every other point
    result = stoker.report(tmp_path / "r.html", measured=[rec])
    assert result.size_bytes < 5e6


def test_markup_is_escaped_and_secrets_never_reach_the_page(tmp_path):
    sas = "sv=2024-01-01&se=2030-01-01&sp=r&sig=SeCrEtSiGnAtUrE0123456789"
    name = f"<script>alert(1)</script> https://acct.blob.core.windows.net/data?{sas}"
    folder = tmp_path / "AccountKey=TOPSECRETKEY0123456789=="
    folder.mkdir()
    rec = _record(folder, name=name)
    out = tmp_path / "r.html"
    stoker.report(out, measured=[rec], png=tmp_path / "png")
    html = out.read_text()
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "SeCrEtSiGnAtUrE" not in html and "TOPSECRETKEY" not in html
    for png in (tmp_path / "png").iterdir():  # the name drawn into a PNG legend, redacted too
        assert b"SeCrEtSiGnAtUrE" not in png.read_bytes()
    assert stoker.report.read_measured(rec).name.startswith("<script>alert(1)</script> https://")


def test_a_unicode_name_is_on_the_page_and_its_images_warn_nothing(tmp_path):
    name = "训练 🚀 über"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stoker.report(
            tmp_path / "r.html",
            measured=[_record(tmp_path, name=name)],
            png=tmp_path / "png",
            pdf=tmp_path / "r.pdf",
        )
    assert name in (tmp_path / "r.html").read_text(encoding="utf-8")
    assert [str(w.message) for w in caught] == []
    assert (tmp_path / "r.pdf").read_bytes().startswith(b"%PDF")


def test_out_is_checked_before_any_work(tmp_path):
    rec = _record(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "afile").write_text("keep")
    cases = [
        (["--out", str(tmp_path / "folder")], ["--out", "is a folder"]),
        (["--out", str(READ_ONLY / "r.html")], ["--out", "not writable"]),
        (["--out", str(tmp_path / "afile" / "r.html")], ["--out", "is a file, not a folder"]),
        (
            ["--out", str(tmp_path / "r.html"), "--pdf", str(READ_ONLY / "r.pdf")],
            ["--pdf", "not writable"],
        ),
        (
            ["--out", str(tmp_path / "r.html"), "--pdf", str(tmp_path / "folder")],
            ["--pdf", "is a folder"],
        ),
        (
            ["--out", str(tmp_path / "r.html"), "--png", str(tmp_path / "afile")],
            ["--png", "is a file"],
        ),
        (
            ["--out", str(tmp_path / "r.html"), "--png", str(READ_ONLY / "png")],
            ["--png", "not writable"],
        ),
    ]
    for args, words in cases:
        _one_line_error(_report(*args, "--measured", str(rec)), *words)
        assert not (tmp_path / "r.html").exists()  # nothing written when one output cannot be
    assert list((tmp_path / "folder").iterdir()) == [] and _leftovers(tmp_path) == []
    assert (tmp_path / "afile").read_text() == "keep"


def test_an_output_that_is_an_input_is_refused(tmp_path):
    rec = _record(tmp_path)
    kept = rec.read_bytes()
    for flag in ("--out", "--pdf"):
        args = ["--out", str(tmp_path / "r.html")] if flag == "--pdf" else []
        res = _report(*args, flag, str(rec), "--measured", str(rec))
        _one_line_error(res, flag, "is also an input")
    res = _report("--out", str(tmp_path / "." / "rec.json"), "--measured", str(rec))
    _one_line_error(res, "--out", "is also an input")
    assert rec.read_bytes() == kept and not (tmp_path / "r.html").exists()


def test_out_in_a_missing_folder_is_made(tmp_path):
    out = tmp_path / "new" / "deeper" / "r.html"
    res = _report(
        "--out",
        str(out),
        "--measured",
        str(_record(tmp_path)),
        "--png",
        str(tmp_path / "new" / "png"),
    )
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 0 and list((tmp_path / "new" / "png").glob("*.png"))


def test_an_interrupted_write_leaves_the_last_report_whole(tmp_path, monkeypatch):
    rec = _record(tmp_path)
    out = tmp_path / "r.html"
    out.write_text("the last good report")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)  # Ctrl-C while the page is being written
    with pytest.raises(KeyboardInterrupt):
        stoker.report(out, measured=[rec])
    assert out.read_text() == "the last good report" and _leftovers(tmp_path) == []
    monkeypatch.undo()
    stoker.report(out, measured=[rec])  # replaced whole
    assert out.read_text().endswith("</html>\n") and _leftovers(tmp_path) == []


def test_record_is_checked_before_the_run(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.bin").write_bytes(b"x" * 1000)
    res = runner.invoke(
        app, ["stage", str(src), str(tmp_path / "dst"), "--record", str(READ_ONLY / "stage.json")]
    )
    _one_line_error(res, "--record", "not writable")
    assert not (tmp_path / "dst").exists()  # nothing copied for a record that cannot be kept
    res = runner.invoke(
        app,
        [
            "stage",
            str(src),
            str(tmp_path / "dst"),
            "--json",
            "--record",
            str(READ_ONLY / "stage.json"),
        ],
    )
    last = json.loads(res.stdout.strip().splitlines()[-1])  # --json's reader learns why
    assert res.exit_code == 2 and last["fatal"] and "--record" in last["message"]
    res = runner.invoke(
        app,
        ["bench", "storage", str(tmp_path), "--size", "1MiB", "--record", str(tmp_path / "src")],
    )
    _one_line_error(res, "--record", "is a folder")
    with pytest.raises(ReportError, match="--record .*not writable"):
        Measured("ledger", "x").save_json(READ_ONLY / "x.json")


def test_record_in_a_missing_folder_is_made(tmp_path):
    path = Measured("ledger", "x").save_json(tmp_path / "a" / "b" / "rec.json")
    assert stoker.report.read_measured(path).name == "x"


def test_two_runs_recording_to_one_path_leave_one_whole_record(tmp_path):
    path = tmp_path / "rec.json"
    errors: list[BaseException] = []

    def run(i: int) -> None:
        m = Measured("stage", f"run {i}")
        for t in range(3000):
            m.add("throughput_bps", "bytes/s", t, 1e6 + i)
        try:
            for _ in range(15):
                m.save_json(path)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    m = stoker.report.read_measured(path)
    assert m.name.startswith("run ") and len(m.series["throughput_bps"].values) == 3000
    assert _leftovers(tmp_path) == []
