"""A hostile user's sweep across provision, teardown and guard: files that never end or block
the open, names holding terminal controls or ARM syntax, URLs that are not what they claim, two
runs at once, Ctrl-C mid-write, and the Python twins given the wrong types."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import no_hang
from arm_server import AMLFS, VMSS, ArmServer
from stoker.cli import app
from stoker.errors import ProvisionError, StokerError, TeardownError
from stoker.operate import GuardPolicy, step_file, teardown, webhook_action
from stoker.operate._arm import ArmClients
from stoker.operate._steps import read_template
from stoker.provision import provision
from stoker.provision._out_lock import out_locked
from stoker.provision.validate import check
from test_teardown import DID, FS_TAGS, TAGS, TOKEN, FakeCredential

runner = CliRunner()
EXAMPLES = Path(__file__).parent.parent / "examples"
SPEC = EXAMPLES / "pretrain-64vm.toml"
RAW = ("\x1b", "\r", "\x07")  # ESC, CR, BEL: never on the terminal raw
SIX = ("main.json", "main.parameters.json", "cloud-init.yaml", "ccws.parameters.json",
       "README.md", "stoker-deployment.json")  # fmt: skip


@pytest.fixture(autouse=True)
def _no_hang(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A read that blocks (a FIFO's open) fails the test in 60 s instead of hanging the run."""

    monkeypatch.setattr(ArmClients, "_credential", lambda self: FakeCredential())
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)
    with no_hang.alarm(60):
        yield


def _one_line(result: object, *needles: str) -> str:
    assert result.exit_code == 2, (result.output, result.exception)  # type: ignore[attr-defined]
    line = result.stderr.strip()  # type: ignore[attr-defined]
    assert "\n" not in line and line.startswith("error:"), line
    assert "Traceback" not in result.output  # type: ignore[attr-defined]
    for needle in needles:
        assert needle in line, line
    return line


@pytest.fixture
def deploy(tmp_path: Path) -> Path:
    out = tmp_path / "deploy"
    made = runner.invoke(app, ["provision", str(SPEC), "--out", str(out)])
    assert made.exit_code == 0, made.output
    return out


def _whole(out: Path) -> dict[str, object]:
    """The folder's record, after checking each file is the one it records (no mix)."""
    import hashlib

    record = json.loads((out / "stoker-deployment.json").read_text())
    for name, sha in record["sha256"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == sha, name
    return record


# ------------------------------------------------------------ inputs that have no end


@pytest.mark.parametrize("kind", ["zero", "fifo", "folder"])
def test_ssh_key_that_never_ends_is_one_line(tmp_path: Path, kind: str) -> None:
    key = "/dev/zero" if kind == "zero" else str(tmp_path / "key.pub")
    if kind == "fifo":
        os.mkfifo(key)
    elif kind == "folder":
        os.mkdir(key)
    out = tmp_path / "deploy"
    result = runner.invoke(app, ["provision", str(SPEC), "--out", str(out), "--ssh-key", key])
    _one_line(result, f"--ssh-key {key}", "folder" if kind == "folder" else "not a regular file")
    assert not out.exists()  # refused before anything was written


@pytest.mark.parametrize("name", ["stoker-deployment.json", "main.json", "main.parameters.json"])
def test_a_fifo_planted_in_out_is_refused_not_read(deploy: Path, name: str) -> None:
    (deploy / name).unlink()
    os.mkfifo(deploy / name)
    result = runner.invoke(app, ["provision", str(SPEC), "--out", str(deploy)])
    _one_line(result, f"{name} is not a regular file")
    assert stat_is_fifo(deploy / name)  # left as it was


def stat_is_fifo(path: Path) -> bool:
    import stat

    return stat.S_ISFIFO(os.lstat(path).st_mode)


def test_check_of_a_folder_with_a_fifo_is_one_error(deploy: Path) -> None:
    (deploy / "ccws.parameters.json").unlink()
    os.mkfifo(deploy / "ccws.parameters.json")
    with pytest.raises(ProvisionError, match="not a stoker deployment folder .*not a regular"):
        check(deploy, checkov=False)


@pytest.mark.parametrize("name", ["main.json", "main.parameters.json", "stoker-deployment.json"])
def test_teardown_of_a_folder_with_a_fifo_exits_2(deploy: Path, name: str) -> None:
    (deploy / name).unlink()
    os.mkfifo(deploy / name)
    result = runner.invoke(app, ["teardown", "--dry-run", str(deploy)])
    _one_line(result, name, "not a regular file")


def test_teardown_of_a_huge_template_is_refused(deploy: Path) -> None:
    with open(deploy / "main.json", "wb") as f:
        f.truncate(2 * 10**9)  # sparse: no room taken, 2 GB to read
    result = runner.invoke(app, ["teardown", "--dry-run", str(deploy)])
    _one_line(result, "main.json", "larger than")


@pytest.mark.parametrize("kind", ["fifo", "zero", "folder"])
def test_guard_step_file_without_end_is_missing_data(tmp_path: Path, kind: str) -> None:
    path = "/dev/zero" if kind == "zero" else str(tmp_path / "step")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        os.mkdir(path)
    reading = step_file(path)(5.0)
    assert reading.step is None and reading.at == 5.0
    assert ("is a folder" if kind == "folder" else "not a regular file") in reading.missing


# ------------------------------------------------------------ ARM syntax and control characters


def test_a_plan_named_like_an_arm_expression_stays_a_name(tmp_path: Path) -> None:
    """Provision escapes the name as ARM's ``[[``; teardown reads it back with one ``[`` less,
    as ARM does, never evaluated (adminUsername would be substituted) nor shown as ``[[``."""
    hostile = "[parameters('adminUsername')]"
    text = SPEC.read_text().replace('name = "pretrain-70b-64vm"', f'name = "{hostile}"', 1)
    spec = tmp_path / "hostile.toml"
    spec.write_text(text)
    out = tmp_path / "deploy"
    made = runner.invoke(app, ["provision", str(spec), "--out", str(out)])
    assert made.exit_code == 0, made.output
    assert '"stoker-plan": "[[parameters' in (out / "main.json").read_text()
    plans = {r.tags.get("stoker-plan") for r in read_template(out) if "stoker-plan" in r.tags}
    assert plans == {hostile}
    dry = runner.invoke(app, ["teardown", "--dry-run", str(out), "--json"])
    assert dry.exit_code == 0, dry.output
    assert "[[" not in dry.stdout and "azureuser" not in dry.stdout


def test_resolver_takes_double_bracket_literally_only_when_it_closes(tmp_path: Path) -> None:
    (tmp_path / "main.json").write_text(json.dumps({
        "parameters": {"x": {"defaultValue": "evaluated"}},
        "resources": [
            {"type": VMSS, "name": "[[parameters('x')]", "tags": {"a": "[[parameters('x')]"}},
            {"type": VMSS, "name": "[parameters('x')]", "tags": {"a": "[[not closed"}},
        ],
    }))  # fmt: skip
    first, second = read_template(tmp_path)
    assert (first.name, first.tags["a"]) == ("[parameters('x')]", "[parameters('x')]")
    assert (second.name, second.tags["a"]) == ("evaluated", "[[not closed")


HOSTILE = "gpus\x1b[2J\r\x07"


def test_hostile_names_from_arm_never_reach_the_terminal_raw(tmp_path: Path) -> None:
    with ArmServer() as arm:
        arm.add_vmss("rg-train", HOSTILE, TAGS)
        arm.add_amlfs("rg-train", "lustre\x1b]0;pwned\x07", FS_TAGS)
        arm.add_other("rg-train", "Microsoft.Network/virtualNetworks", "vnet\x1b[31m", TAGS)
        arm.add_group("rg-old\x1b[2J", {"teardown-after": "2020-01-01T00:00:00Z",
                                          "stoker-plan": "p\x1b[31m\r\x07"})  # fmt: skip
        where = ["--subscription", arm.subscription, "--arm-endpoint", arm.url, "--poll", "0.01"]
        for args in (["rg-train", "--dry-run"], ["--expired"]):
            result = runner.invoke(app, ["teardown", *args, *where])
            assert result.exit_code == 0, result.output
            assert not any(c in result.output for c in RAW), result.output
            assert "\\x1b" in result.output
        assert not arm.mutating()


# ------------------------------------------------------------ URLs


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://management.example.com", "plain http"),
        ("ftp://management.example.com", "give https://HOST"),
        ("https://", "give https://HOST"),
        ("https://management.example.com/..", "no path"),
        ("https://management.example.com/a/../b", "no path"),
        ("https://management.example.com/?api-version=1", "no path, query"),
        ("https://management.example.com/#frag", "fragment"),
        ("https://user:hunter2secret@management.example.com", "user or password"),
        ("https://management.example.com:notaport", "not a URL"),
    ],
)
def test_arm_endpoint_must_be_a_base_url(url: str, why: str) -> None:
    for args in (["rg-train", "--dry-run", "--subscription", "s"], ["--expired"]):
        result = runner.invoke(app, ["teardown", *args, "--arm-endpoint", url])
        _one_line(result, "--arm-endpoint", why)
        assert "hunter2secret" not in result.output


def test_arm_endpoint_loopback_http_is_allowed() -> None:
    with ArmServer() as arm:
        arm.add_vmss("rg-train", "gpus", TAGS)
        result = runner.invoke(app, ["teardown", "rg-train", "--subscription", arm.subscription,
                                     "--arm-endpoint", arm.url + "/"])  # fmt: skip
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://hooks.example.com/x", "plain http"),
        ("file:///etc/passwd", "give an https"),
        ("https:///nohost", "give an https"),
        ("http://user:hunter2secret@hooks.example.com/x?token=tok3nsecret", "plain http"),
    ],
)
def test_webhook_must_be_https_or_loopback(url: str, why: str) -> None:
    result = runner.invoke(app, ["guard", "--no-gpus", "--step-file", "/nonexistent",
                                 "--action", "webhook", "--webhook", url])  # fmt: skip
    _one_line(result, "--webhook", why)
    assert "hunter2secret" not in result.output and "tok3nsecret" not in result.output
    with pytest.raises(StokerError):
        webhook_action(url)


def test_webhook_to_loopback_or_https_is_taken() -> None:
    webhook_action("http://127.0.0.1:9/hook")
    webhook_action("https://user:pw@hooks.example.com/x?token=t")


# ------------------------------------------------------------ two at once, Ctrl-C


def test_a_held_out_folder_refuses_a_second_provision(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    with out_locked(out):
        with pytest.raises(ProvisionError, match="another stoker provision is writing"):
            provision(SPEC, out)
        assert list(out.iterdir()) == []  # the second wrote nothing
    assert provision(SPEC, out).files  # once free, it goes


def test_two_provisions_into_one_folder_leave_one_whole_deployment(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    specs = []
    for name in ("first-plan", "second-plan"):
        spec = tmp_path / f"{name}.toml"
        spec.write_text(SPEC.read_text().replace("pretrain-70b-64vm", name, 1))
        specs.append(spec)
    cmd = [str(Path(sys.executable).parent / "stoker"), "provision"]
    for round_ in range(3):  # (later rounds: the other plan is refused by the record)
        procs = [subprocess.Popen([*cmd, str(s), "--out", str(out)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for s in specs]  # fmt: skip
        done = [(p.wait(timeout=50), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
        codes = {rc for rc, _ in done}
        assert codes <= {0, 2} and (round_ > 0 or 0 in codes), done
        for rc, err in done:
            assert rc == 0 or err.startswith("error: --out"), err
        record = _whole(out)
        assert record["plan"] in ("first-plan", "second-plan")
        assert sorted(p.name for p in out.iterdir()) == sorted(SIX)


def test_ctrl_c_while_writing_leaves_the_new_folder_whole(
    deploy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT after the first of the six files: the other five still land, then it stops."""
    from stoker.provision import _out

    real, calls = _out.write_whole, []

    def interrupted(path: Path, data: bytes) -> None:
        real(path, data)
        calls.append(path.name)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(_out, "write_whole", interrupted)
    # Ctrl-C as a terminal delivers it: to Python's own handler (an earlier test in the same
    # worker may have left another in place; the full suite failed here twice that way).
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            provision(SPEC, deploy, teardown_after="2031-01-01T00:00:00Z")
    finally:
        signal.signal(signal.SIGINT, before)
    assert len(calls) == 6
    assert _whole(deploy)["teardown_after"] == "2031-01-01T00:00:00Z"


def test_two_teardowns_at_once_both_end_cleanly() -> None:
    with ArmServer() as arm:
        arm.add_vmss("rg-train", "gpus", TAGS)
        arm.add_amlfs("rg-train", "lustre", FS_TAGS)
        results: list[object] = []

        def one() -> None:
            try:
                results.append(teardown("rg-train", subscription=arm.subscription, dry_run=False,
                                        credential=FakeCredential(), base_url=arm.url,
                                        polling_interval_s=0.01))  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - what the user would see
                results.append(exc)

        threads = [threading.Thread(target=one) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == 2
        for r in results:
            assert not isinstance(r, Exception) or isinstance(r, TeardownError), repr(r)
        assert any(not isinstance(r, Exception) for r in results), results
        assert not arm.exists(arm.rid("rg-train", AMLFS, "lustre"))
        assert not arm.changed_not_owned(DID)
    assert all(TOKEN not in str(r) for r in results)


# ------------------------------------------------------------ the twins' types


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: teardown(deployment=123), "deployment=123"),
        (lambda: teardown("rg", dry_run="no"), "dry_run='no'"),
        (lambda: teardown("rg", subscription=7), "subscription=7"),
        (lambda: GuardPolicy(idle_for_s="x"), "idle_for_s='x'"),
        (lambda: GuardPolicy(util_below="5"), "util_below='5'"),
        (lambda: GuardPolicy(watch_gpus="yes"), "watch_gpus='yes'"),
        (lambda: provision(SPEC, 5), "out=5"),
        (lambda: provision(SPEC, "x", force="no"), "force='no'"),
        (lambda: provision(SPEC, "x", name=["x"]), "name: Input should be a valid string"),
        (lambda: provision(42, "x"), "spec=42"),
    ],
)
def test_twins_name_the_argument_of_the_wrong_type(call: object, names: str) -> None:
    with pytest.raises(StokerError) as info:
        call()  # type: ignore[operator]
    assert names in str(info.value) and "\n" not in str(info.value)
    assert not Path("x").exists()


@pytest.mark.parametrize("sub", ["../x", "x/../y", "s?api-version=1", "x;rm -rf /", "\x1b[31m"])
def test_a_subscription_that_is_not_a_guid_is_one_line_before_any_call(sub: str) -> None:
    """It goes into every ARM request's path: a '/' or '..' there would address another one."""
    with ArmServer() as arm:
        for verb in (["teardown", "rg-train"], ["preflight", "examples/pretrain-64vm.toml"]):
            args = [*verb, "--subscription", sub, "--resource-group", "rg-train"]
            result = runner.invoke(app, [*args, "--arm-endpoint", arm.url])
            line = _one_line(result, "not a subscription id")
            assert "\x1b" not in line
        assert arm.state.log == []  # nothing reached the server
