"""A careless, hostile user's sweep of ``stoker simulate``, ``plan --simulate``, ``stoker watch``
and the exporter: every bad input is one line naming the file, option or key (exit 2), nothing
already written is lost, and what is too large to finish is refused at once, not run for hours."""

from __future__ import annotations

import errno
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import stoker
from stoker.cli import app
from stoker.errors import SpecError, StokerError
from stoker.measure.exporter import serve
from stoker.measure.ledger import Ledger
from stoker.simulate._fleet import BLOCK, Fleet

runner = CliRunner()
EXAMPLES = Path(__file__).parent.parent / "examples"
SPEC = """
name = "sweep"
[cluster]
vm_size = "ND96isr_H100_v5"
nodes = 16
[workload]
kind = "pretrain"
params = "8B"
tokens_per_s_per_gpu = 9000
seq_len = 4096
global_batch = 512
dataset_size = "4 TB"
sharding = "fsdp"
[reliability]
gpu_mtbf = "1000 h"
"""
RUN = '[run]\nlength = "5 d"\n'


def spec(tmp_path: Path, extra: str = "", run: str = RUN, name: str = "job.toml") -> str:
    path = tmp_path / name
    path.write_text(SPEC + run + extra)
    return str(path)


def one_error(result) -> str:  # noqa: ANN001
    """The error a refused command prints (one ``error:`` line, with a pydantic field's line
    below it), exit 2, no traceback, nothing on stdout."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.stdout == "", result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    assert len(errors) == 1, lines
    return " ".join(lines[errors[0] :])


# ----------------------------------------------------------------- stoker simulate: the file
def test_an_unusable_spec_file_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("x = \n")
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe\x00")
    for path, words in (
        (tmp_path / "missing.toml", "no such job spec"),
        (tmp_path, "is a folder"),
        (tmp_path / "bad.toml", "not valid TOML"),
        (tmp_path / "bin.toml", "not UTF-8"),
    ):
        line = one_error(runner.invoke(app, ["simulate", str(path)]))
        assert str(path) in line and words in line


@pytest.mark.parametrize(
    ("table", "key", "words"),
    [
        ('failure_shape = "1"', "simulate.failure_shape", "valid number"),
        ("failure_shape = true", "simulate.failure_shape", "valid number"),
        ("straggler_cv = true", "simulate.straggler_cv", "valid number"),
        ("contention = 1", "simulate.contention", "valid boolean"),
        ('restaging = "no"', "simulate.restaging", "valid boolean"),
        ("straggler_cv = nan", "simulate.straggler_cv", "finite"),
        ("gpu_failure_share = inf", "simulate.gpu_failure_share", "finite"),
        ("failure_shape = 0.05", "simulate.failure_shape", "0.1"),
        ("failure_shape = 1e308", "simulate.failure_shape", "10"),
        ('stragglerz = "none"', "simulate.stragglerz", "unknown field"),
    ],
)
def test_a_knob_of_the_wrong_type_is_refused_not_coerced(
    tmp_path: Path, table: str, key: str, words: str
) -> None:
    line = one_error(runner.invoke(app, ["simulate", spec(tmp_path, f"[simulate]\n{table}\n")]))
    assert key in line and words in line and "job.toml" in line


# ----------------------------------------------------------------- stoker simulate: options
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--runs", "0"], "runs: give a whole number"),
        (["--runs", "-1"], "runs: give a whole number"),
        (["--runs", str(10**9)], "100,000"),
        (["--seed", "-1"], "seed: give a whole number, 0 or more"),
        (["--days", "0"], "days:"),
        (["--days", "nan"], "days:"),
        (["--days", "1e12"], "days:"),
        (["--days", "1e-9"], "shorter than one step"),
    ],
)
def test_a_bad_option_is_one_line(tmp_path: Path, args: list[str], words: str) -> None:
    line = one_error(runner.invoke(app, ["simulate", spec(tmp_path), "--runs", "1", *args]))
    assert words in line


def test_a_plan_of_centuries_is_refused_at_once(tmp_path: Path) -> None:
    """A job whose plan runs for 100,000 years (here: a token count no fleet finishes) used to
    be simulated for hours; it is refused, saying how to simulate a part of it."""
    path = spec(tmp_path, run='[run]\ntokens = "2000000T"\n')
    start = time.monotonic()
    line = one_error(runner.invoke(app, ["simulate", path, "--runs", "1"]))
    assert time.monotonic() - start < 30
    assert "more than 3650" in line and "--days" in line
    assert runner.invoke(app, ["simulate", path, "--runs", "1", "--days", "1"]).exit_code == 0


def test_millions_of_failures_are_refused_before_running(tmp_path: Path) -> None:
    path = spec(tmp_path)
    Path(path).write_text(Path(path).read_text().replace('"1000 h"', '"10 h"'))
    start = time.monotonic()
    line = one_error(runner.invoke(app, ["simulate", path, "--runs", "100000"]))
    assert time.monotonic() - start < 30
    assert "failures in all" in line and "--runs" in line


def test_infant_mortality_feeding_on_its_swaps_stops_with_a_line(tmp_path: Path) -> None:
    """Weibull k = 0.2: each swap's new parts fail sooner still, without end; a run's failure
    budget stops it, naming the knob."""
    path = spec(tmp_path, "[simulate]\nfailure_shape = 0.2\n")
    start = time.monotonic()
    line = one_error(runner.invoke(app, ["simulate", path, "--runs", "1000"]))
    assert time.monotonic() - start < 60
    assert "run 1 passed" in line and "failure_shape = 0.2" in line


def test_one_gpu_has_no_stragglers_and_says_gpu(tmp_path: Path) -> None:
    text = (EXAMPLES / "finetune-1vm.toml").read_text()
    text = text.replace("ND96isr_H100_v5", "NC40ads_H100_v5").replace('"8B"', '"1B"')
    one = tmp_path / "one.toml"
    one.write_text(text.replace("global_batch = 64", "global_batch = 8"))
    result = runner.invoke(app, ["simulate", str(one), "--runs", "5", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["gpus"] == 1
    assert doc["lost_hours"]["stragglers"] == {"p5": 0.0, "p50": 0.0, "p95": 0.0}
    table = runner.invoke(app, ["simulate", str(one), "--runs", "1"])
    assert "one.toml, 1 GPU, " in table.stdout and "1 run from" in table.stdout


def test_every_example_simulates_or_says_why_not(tmp_path: Path) -> None:
    for path in sorted(EXAMPLES.glob("*.toml")):
        result = runner.invoke(app, ["simulate", str(path), "--runs", "2", "--json"])
        if 'kind = "pretrain"' in path.read_text() or "fine-tune" in path.read_text():
            assert result.exit_code == 0, (path, result.output)
            assert json.loads(result.stdout)["runs"] == 2
        else:
            assert "only training jobs" in one_error(result), path


# ----------------------------------------------------------------------- --out
def test_out_is_checked_before_simulating(tmp_path: Path) -> None:
    for out, words in (
        (tmp_path / "missing" / "sim.json", "does not exist; create it first"),
        (tmp_path, "is a folder"),
    ):
        line = one_error(runner.invoke(app, ["simulate", spec(tmp_path), "--out", str(out)]))
        assert f"--out {out}" in line and words in line


def test_out_naming_an_input_is_refused_and_the_input_kept(tmp_path: Path) -> None:
    path = spec(tmp_path)
    before = Path(path).read_text()
    catalog = tmp_path / "catalog.toml"
    catalog.write_text("")
    for out in (path, str(tmp_path / "." / "job.toml"), str(catalog)):
        args = ["simulate", path, "-n", "1", "--catalog", str(catalog), "--out", out]
        assert "is an input" in one_error(runner.invoke(app, args))
    assert Path(path).read_text() == before and catalog.read_text() == ""


def test_json_and_out_write_the_same_document(tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    out.write_text("old")
    result = runner.invoke(
        app, ["simulate", spec(tmp_path), "-n", "2", "--json", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text()) == json.loads(result.stdout)
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def test_a_failed_write_keeps_the_last_good_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "sim.json"
    out.write_text('{"kept": true}\n')
    sim = stoker.simulate(spec(tmp_path), runs=1)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(SpecError, match="--out .*sim.json: cannot write it: No space left"):
        sim.save(out)
    assert out.read_text() == '{"kept": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.toml", "sim.json"]


def test_ctrl_c_mid_run_is_one_line_130_and_out_untouched(tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    out.write_text('{"kept": true}\n')
    slowed = (  # each run slowed down, and a line once the first has started
        "import sys, time\n"
        "from stoker.simulate import _simulate\n"
        "once = _simulate.run_once\n"
        "def slow(*a, **k):\n"
        "    print('running', file=sys.stderr, flush=True)\n"
        "    time.sleep(0.05)\n"
        "    return once(*a, **k)\n"
        "_simulate.run_once = slow\n"
        "from stoker.cli import main\n"
        "sys.argv[0] = 'stoker'\n"
        "main()\n"
    )
    args = ["simulate", spec(tmp_path), "--runs", "10000", "--out", str(out)]
    proc = subprocess.Popen(  # (Ctrl-C heard, even where the test runner ignores it)
        [sys.executable, "-c", slowed, *args],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stderr is not None
        assert "running" in proc.stderr.readline()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    said = [line for line in err.splitlines() if line.strip() and line != "running"]
    assert said == [f"interrupted: nothing was written; {out} is as it was"], err
    assert out.read_text() == '{"kept": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.toml", "sim.json"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ------------------------------------------------------------------ the Python twin
@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"runs": True}, "runs:"),
        ({"runs": 2.0}, "runs:"),
        ({"runs": 10**9}, "runs:"),
        ({"seed": -1}, "seed:"),
        ({"seed": 1.5}, "seed:"),
        ({"seed": "x"}, "seed:"),
        ({"days": "3"}, "days:"),
        ({"days": True}, "days:"),
        ({"days": math.nan}, "days:"),
        ({"days": math.inf}, "days:"),
        ({"knobs": ["stragglers"]}, "knobs: give a dict"),
        ({"knobs": {"failure_shape": "2"}}, "simulate.failure_shape"),
        ({"knobs": {"contention": "no"}}, "simulate.contention"),
        ({"out": "/nonexistent-folder/sim.json"}, "does not exist"),
    ],
)
def test_the_python_twin_names_the_key(tmp_path: Path, kwargs: dict, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        stoker.simulate(spec(tmp_path), **{"runs": 1, **kwargs})
    assert words in str(caught.value)


def test_a_spec_of_the_wrong_type_names_spec() -> None:
    for bad in (5, None, b"job.toml"):
        with pytest.raises(SpecError, match="spec: give a TOML path, a dict or a JobSpec"):
            stoker.simulate(bad, runs=1)  # type: ignore[arg-type]


def test_the_fleets_next_failure_is_the_earliest_clock_across_blocks() -> None:
    """The block minima find what a scan of every clock finds, as parts are renewed and VMs
    swapped across block edges."""
    gpus, nodes = 3 * BLOCK + 40, (3 * BLOCK + 40) // 8
    fleet = Fleet(gpus, nodes, 1e5, 3e5, 0.8, np.random.default_rng(4))
    for _ in range(2000):
        when, part = fleet.next_failure()
        assert part == int(np.argmin(fleet.next_s)) and when == fleet.next_s.min()
        if part < gpus:
            fleet.swap(fleet.node_of(part), when)
        else:
            fleet.renew(part, when)


# ------------------------------------------------------------------ plan --simulate
def test_plan_runs_without_simulate_and_bad_runs_are_one_line(tmp_path: Path) -> None:
    path = spec(tmp_path)
    assert "add --simulate" in one_error(runner.invoke(app, ["plan", path, "--runs", "5"]))
    for runs, words in (("0", "runs:"), (str(10**9), "100,000")):
        result = runner.invoke(app, ["plan", path, "--simulate", "--runs", runs])
        assert words in one_error(result)
    result = runner.invoke(app, ["plan", path, "--simulate", "--json", "--markdown"])
    assert "pick one" in one_error(result)
    bad = spec(tmp_path, "[simulate]\ncontention = 1\n", name="bad.toml")
    assert "simulate.contention" in one_error(runner.invoke(app, ["plan", bad, "--simulate"]))


# ------------------------------------------------------------------------ stoker watch
@pytest.mark.parametrize("interval", ["0", "nan", "-1", "inf"])
def test_watch_bad_interval_is_one_line(interval: str) -> None:
    assert "--interval" in one_error(runner.invoke(app, ["watch", "--interval", interval]))


def test_watch_once_json_without_a_gpu_says_why() -> None:
    result = runner.invoke(app, ["watch", "--once", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["gpus"] == [] and "GPU" in (doc["problem"] or "")


# ---------------------------------------------------------------------- the exporter
class NoMetricsLoader:
    """A plain DataLoader's shape: iterable, no .metrics."""

    def __iter__(self):  # noqa: ANN204
        return iter([])


@pytest.mark.parametrize(
    ("sources", "words"),
    [
        ({"loader": torch.utils.data.DataLoader([1, 2])}, "serve(loader=...): the DataLoader"),
        ({"loader": NoMetricsLoader()}, "has no .metrics; give a StreamingLoader"),
        ({"ledger": object()}, "serve(ledger=...)"),
        ({"checkpointer": object()}, "serve(checkpointer=...)"),
        ({"stage": object()}, "serve(stage=...)"),
        ({"gpus": object()}, "serve(gpus=...)"),
        ({"checkpointr": object()}, "serve(checkpointr=...): not a source"),
    ],
)
def test_a_bad_source_is_refused_when_served(sources: dict, words: str) -> None:
    with pytest.raises(StokerError) as caught:
        serve(0, addr="127.0.0.1", **sources).shutdown()
    assert words in str(caught.value)


@pytest.mark.parametrize("port", [-1, 70000, True, "19400"])
def test_a_bad_port_names_it(port: object) -> None:
    with pytest.raises(StokerError, match="port: give a port from 0 to 65535"):
        serve(port, addr="127.0.0.1")  # type: ignore[arg-type]


def test_two_serves_on_one_port() -> None:
    first = serve(0, addr="127.0.0.1")
    try:
        with pytest.raises(StokerError, match=f"cannot serve on port {first.server_port}"):
            serve(first.server_port, addr="127.0.0.1")
        assert _get(first.server_port) == ""  # the first still answers (no sources)
    finally:
        first.shutdown()


class FailingLoader:
    @property
    def metrics(self) -> dict:
        raise RuntimeError("the loader's worker died")


def test_a_source_that_fails_at_a_scrape_leaves_the_others(tmp_path: Path) -> None:
    ledger = Ledger("cpu", skip_first=0)
    server = serve(0, addr="127.0.0.1", ledger=ledger, loader=FailingLoader())
    try:
        text = _get(server.server_port)
    finally:
        server.shutdown()
    assert "stoker_steps_total{" in text and "stoker_loader_" not in text


def test_a_scrape_while_a_save_is_in_flight_and_after_close(tmp_path: Path) -> None:
    ckpt = stoker.Checkpointer(tmp_path / "fast", str(tmp_path / "durable"))
    server = serve(0, addr="127.0.0.1", checkpointer=ckpt)
    try:
        ckpt.save(1, {"w": torch.zeros(4_000_000)})
        during = _samples(_get(server.server_port))
        assert during["stoker_checkpoint_saves_total"] == 1.0
        assert during["stoker_checkpoint_bytes_total"] > 16e6
        ckpt.wait()
        ckpt.close()
        after = _samples(_get(server.server_port))
        assert after["stoker_checkpoint_last_step"] == 1.0
        assert after["stoker_checkpoint_last_durable_seconds"] >= 0
    finally:
        server.shutdown()


def _get(port: int) -> str:
    url = f"http://127.0.0.1:{port}/metrics"
    return urllib.request.urlopen(url, timeout=10).read().decode()


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.split("{")[0], line.rsplit(" ", 1)[1]
            out[name] = float(value)
    return out


def test_watch_port_in_use_is_one_line() -> None:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        line = one_error(runner.invoke(app, ["watch", "--port", str(port)]))
    assert f"cannot serve on port {port} (Address already in use)" in line


def test_watch_on_a_privileged_port_without_root_is_one_line() -> None:
    """Port 80 as an ordinary user (nobody, where the tests run as root): exit 2, one line."""
    code = "import sys\nfrom stoker.cli import main\nsys.argv[0] = 'stoker'\nmain()\n"
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    command = [*(as_nobody if os.geteuid() == 0 else []), sys.executable, "-c", code]
    done = subprocess.run(
        [*command, "watch", "--port", "80"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: cannot serve on port 80 (Permission denied; ports below 1024 need root): pick "
        "another port (--port; 0 picks a free one)"
    ], done.stderr
