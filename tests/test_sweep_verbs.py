"""A hostile user's sweep across the verbs (plan, simulate, report, catalog, stage, ...): files
that never end or block the open, names holding terminal controls, URLs that climb out of their
container, and the counts a run's events and its summary must agree on."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import no_hang
from stoker._redact import printable, shown
from stoker._user_files import MAX_TOML_BYTES, load_user_json, load_user_toml, read_user_bytes
from stoker.catalog import load_catalog
from stoker.errors import CatalogError, ReportError, SpecError, StokerError, StoreError
from stoker.plan.calibrate import read_measured
from stoker.plan.spec import load_spec
from stoker.report._inputs import load_measured, load_plan, load_simulation
from stoker.simulate._knobs import read_spec_file
from stoker.store._url import parse_url

runner = CliRunner()
EXAMPLES = Path(__file__).parent.parent / "examples"
SPEC = EXAMPLES / "pretrain-64vm.toml"


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    """A read that blocks (a FIFO's open) fails the test in 20 s instead of hanging the run:
    SIGALRM interrupts the blocked system call in the main thread."""

    with no_hang.alarm(20):
        yield


# ------------------------------------------------------------ inputs that have no end


@pytest.fixture
def endless(tmp_path: Path) -> Iterator[Callable[[str], tuple[str, str]]]:
    """``make(kind)`` -> (a path of that kind, the words its refusal must hold)."""
    held: list[int] = []

    def make(kind: str, suffix: str = ".toml") -> tuple[str, str]:
        if kind in ("zero", "urandom"):
            return f"/dev/{kind}", "not a regular file"
        if kind == "folder":
            (tmp_path / f"dir{suffix}").mkdir()
            return str(tmp_path / f"dir{suffix}"), "is a folder"
        if kind == "sparse":  # 2 GB that take no room, and would take 2 GB of memory to read
            path = tmp_path / f"sparse{suffix}"
            with open(path, "wb") as f:
                f.truncate(2 * 10**9)
            return str(path), "larger than"
        path = tmp_path / f"{kind}{suffix}"
        os.mkfifo(path)
        if kind == "fifo-writer":  # a writer that never closes: a read would never see EOF
            fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
            os.write(fd, b"a = 1\n" * 1000)
            held.append(fd)
        return str(path), "not a regular file"

    yield make
    for fd in held:
        os.close(fd)


KINDS = ["zero", "urandom", "fifo", "fifo-writer", "folder", "sparse"]
READERS: dict[str, tuple[Callable[[str], object], type[StokerError]]] = {
    "job spec": (load_spec, SpecError),
    "simulate spec": (read_spec_file, SpecError),
    "catalog": (lambda p: load_catalog([p], defaults=False), CatalogError),
    "--measured": (read_measured, SpecError),
    "report plan": (load_plan, ReportError),
    "report simulation": (load_simulation, ReportError),
    "report measured": (load_measured, ReportError),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reader", list(READERS))
def test_every_user_file_reader_refuses_inputs_without_an_end(endless, reader, kind):
    json_in = reader.startswith("report") or reader == "--measured"
    path, words = endless(kind, ".json" if json_in else ".toml")
    fn, error = READERS[reader]
    with pytest.raises(error) as info:
        fn(path)
    message = str(info.value)
    assert path in message and words in message and "\n" not in message, message


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        (["plan", "{p}"], "fifo"),
        (["plan", str(SPEC), "--measured", "{p}"], "fifo-writer"),
        (["plan", str(SPEC), "-c", "{p}"], "zero"),
        (["simulate", "{p}", "--runs", "1"], "fifo"),
        (["report", "--out", "{out}", "--simulation", "{p}"], "fifo"),
        (["report", "--out", "{out}", "--measured", "{p}"], "urandom"),
        (["catalog", "-c", "{p}"], "sparse"),
    ],
)
def test_the_cli_refuses_them_in_one_line_exit_2(endless, tmp_path, args, kind):
    from stoker.cli import app

    path, words = endless(
        kind, ".json" if "--simulation" in args or "--measured" in args else ".toml"
    )
    out = tmp_path / "r.html"
    res = runner.invoke(app, [a.format(p=path, out=out) for a in args])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    assert path in lines[0] and words in lines[0], lines[0]
    assert not out.exists()


def test_a_fifo_swapped_in_after_the_stat_neither_blocks_nor_is_read(tmp_path, monkeypatch):
    """The stat says regular file; by the open a FIFO with no writer is there: O_NONBLOCK opens
    it at once and the opened descriptor's fstat refuses it."""
    path = tmp_path / "spec.toml"
    os.mkfifo(path)
    real_stat = os.stat

    def stat_says_regular(p, *a, **kw):  # noqa: ANN001, ANN002, ANN003
        st = real_stat(p, *a, **kw)
        if str(p) == str(path):
            return os.stat_result((stat.S_IFREG | 0o644, *tuple(st)[1:]))
        return st

    monkeypatch.setattr(os, "stat", stat_says_regular)
    with pytest.raises(SpecError, match="not a regular file"):
        load_user_toml(path, "job spec", SpecError)


def test_a_file_that_grows_past_the_cap_while_read_is_refused(tmp_path, monkeypatch):
    """/proc's files say size 0; whatever the stat claimed, no more than the cap is read."""
    path = tmp_path / "big.toml"
    path.write_bytes(b"#" * 100)
    real_fstat = os.fstat
    monkeypatch.setattr(
        os,
        "fstat",
        lambda fd: os.stat_result((*tuple(real_fstat(fd))[:6], 0, *tuple(real_fstat(fd))[7:])),
    )
    with pytest.raises(SpecError, match="larger than"):
        read_user_bytes(path, "job spec", SpecError, max_bytes=50)
    assert read_user_bytes("/proc/self/status", "status", max_bytes=MAX_TOML_BYTES)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "is empty"),
        ("[" * 100_000, "not JSON"),
        ("1" * 5_000, "not JSON"),
        ('{"a": 1', "not JSON"),
    ],
)
def test_json_that_parses_badly_is_one_line(tmp_path, text, words):
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(ReportError, match=words):
        load_user_json(path, "simulation", ReportError)


def test_toml_nested_past_the_stack_or_with_huge_ints_is_one_line(tmp_path):
    for text in ("a = " + "[" * 100_000, "a = " + "1" * 5_000):
        path = tmp_path / "x.toml"
        path.write_text(text)
        with pytest.raises(SpecError, match="not valid TOML"):
            load_spec(path)


def test_a_file_below_a_file_is_no_such_file(tmp_path):
    (tmp_path / "a").write_text("")
    with pytest.raises(SpecError, match="no such job spec file.*see examples/"):
        load_spec(tmp_path / "a" / "job.toml")


# ------------------------------------------------------------ '.' and '..' in every URL form

URL_FORMS = [
    "az://data/{p}",
    "abfs://data/{p}",
    "abfss://data@acct.dfs.core.windows.net/{p}",
    "wasbs://data@acct.blob.core.windows.net/{p}",
    "https://acct.blob.core.windows.net/data/{p}",
    "https://acct.blob.core.windows.net/data/{p}?sv=2022&sig=abc",
    "http://127.0.0.1:10000/devstoreaccount1/data/{p}",
    "http://azurite/devstoreaccount1/data/{p}",
    "s3://bucket/{p}",
    "gs://bucket/{p}",
]
DOT_FORMS = [
    "..",
    ".",
    "../other",
    "x/../../other",
    "x/./y",
    "%2e%2e/other",
    "%2E%2E",
    "%2e.",
    ".%2E/y",
    "..%2fother",
    "x%2f..%2f..",
    "x\\..\\y",
    "x%5cy",
]


@pytest.mark.parametrize("dots", DOT_FORMS)
@pytest.mark.parametrize("form", URL_FORMS)
def test_no_url_form_lets_a_dot_segment_leave_its_prefix(monkeypatch, form, dots):
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "acct")
    with pytest.raises(StoreError) as info:
        parse_url(form.format(p=dots))
    message = str(info.value)
    assert "'..'" in message or "'.'" in message or "backslash" in message, message
    assert "sig=abc" not in message


@pytest.mark.parametrize("form", URL_FORMS)
def test_names_with_dots_that_are_no_segment_still_parse(monkeypatch, form):
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "acct")
    loc = parse_url(form.format(p=".hidden/a..b/.../v1.2"))
    assert loc.prefix == ".hidden/a..b/.../v1.2/"


@pytest.mark.parametrize(
    "url",
    [
        "https://acct.blob.core.windows.net/../data/x",
        "https://acct.blob.core.windows.net/%2e%2e/data/x",
        "http://127.0.0.1:10000/../data/x",
        "http://127.0.0.1:10000/devstoreaccount1/%2E%2E/x",
        "az://../x",
        "az://%2e%2e/x",
    ],
)
def test_a_dot_segment_for_the_container_or_account_is_refused(monkeypatch, url):
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "acct")
    with pytest.raises(StoreError):
        parse_url(url)


def test_a_local_path_and_a_file_url_resolve_dots_alike(tmp_path):
    written = f"{tmp_path}/a/../b"
    assert parse_url(f"file://{written}").path == parse_url(written).path == tmp_path / "b"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("az:/data/x", "needs '://'"),
        ("az:data", "needs '://'"),
        ("az:///x", "names no container"),
        ("az://", "names no container"),
        ("https://x", "path-style"),
        ("https://", "no host"),
        ("htps://acct.blob.core.windows.net/data", "did you mean https"),
    ],
)
def test_url_typos_are_one_line(monkeypatch, url, words):
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "acct")
    with pytest.raises(StoreError, match=words):
        parse_url(url)


# ------------------------------------------------------------ control characters never raw

ESC_NAME = "a\x1b[31mred\rx\x07"


def test_printable_escapes_controls_and_keeps_a_messages_own_lines():
    text = "name \x1b[2J\r\x07\x00\x9b\u202e end\nnext\tline"
    assert printable(text) == "name \\x1b[2J\\x0d\\x07\\x00\\x9b\\u202e end\nnext\tline"
    assert printable("a\nb\tc", lines=False) == "a\\x0ab\\x09c"
    assert printable(printable(text)) == printable(text)  # (escaping twice changes nothing)
    assert shown("az://c/\x1bk?sig=secret") == "az://c/\\x1bk"


def test_an_error_naming_a_file_with_controls_shows_them_escaped(tmp_path):
    from stoker.cli import app

    missing = tmp_path / f"{ESC_NAME}.toml"
    res = runner.invoke(app, ["plan", str(missing)])
    assert res.exit_code == 2
    for raw in ("\x1b", "\r", "\x07"):
        assert raw not in res.output
    assert "a\\x1b[31mred\\x0dx\\x07.toml" in res.stderr
    with pytest.raises(SpecError) as info:  # the library's own message, not only the CLI's
        load_spec(missing)
    assert "\x1b" not in str(info.value) and "\\x1b" in str(info.value)


@pytest.mark.parametrize("form", [[], ["--markdown"]])
def test_a_spec_name_with_controls_is_escaped_in_the_plan_table_and_markdown(tmp_path, form):
    from stoker.cli import app

    text = (EXAMPLES / "finetune-1vm.toml").read_text()
    body = "\n".join(line for line in text.splitlines() if not line.startswith("name"))
    spec = tmp_path / "job.toml"
    spec.write_text('name = "evil\\u001b[2J\\u009b"\n' + body)
    res = runner.invoke(app, ["plan", str(spec), *form])
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.output and "\x9b" not in res.output
    assert "evil\\x1b[2J" in res.stdout


def _esc_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A source with a file named with ESC and CR, and a destination where that file's place
    is a folder (its copy fails) and a file of the same kind of name that --delete removes."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / ESC_NAME).write_text("hi")
    (src / "plain").write_text("x")
    (dst / ESC_NAME / "sub").mkdir(parents=True)
    (dst / "gone\x1b[2J").write_text("old")
    return src, dst


def test_stage_lines_never_hold_a_names_controls(tmp_path):
    from stoker.cli import app

    src, dst = _esc_tree(tmp_path)
    res = runner.invoke(app, ["stage", str(src), str(dst), "--delete", "--yes"])
    assert res.exit_code == 1, res.output  # one file failed: the rest copied
    assert "\x1b" not in res.output and "\r" not in res.output and "\x07" not in res.output
    assert "deleting gone\\x1b[2J" in res.stderr
    assert "a\\x1b[31mred\\x0dx\\x07" in res.stderr


def test_the_bar_on_a_terminal_escapes_names_and_keeps_its_own_colours(tmp_path, capsys):
    from stoker.stage import RichReporter

    os.environ["FORCE_COLOR"] = "1"  # (rich reads it at each Console made)
    try:
        bar = RichReporter(f"{tmp_path}/{ESC_NAME} -> az://c/x")
        bar.start()
        bar.note(f"cannot write {ESC_NAME}")
        bar.deleting("gone\x1b[2J")
        bar.finish({})
    finally:
        del os.environ["FORCE_COLOR"]
    err = capsys.readouterr().err
    assert "\x1b[" in err  # rich's own styling is there ...
    assert "\x1b[31mred" not in err and "\x1b[2J" not in err and "\x07" not in err  # ... no name's
    assert "a\\x1b[31mred" in err and "gone\\x1b[2J" in err


def test_the_cli_consoles_escape_table_cells_but_not_their_own_styles():
    from io import StringIO

    from rich.table import Table

    from stoker.cli._output import _PrintableConsole

    out = StringIO()
    console = _PrintableConsole(file=out, force_terminal=True, color_system="standard", width=80)
    table = Table("name")
    table.add_row(f"[bold]{ESC_NAME}[/]")
    console.print(table)
    text = out.getvalue()
    assert "\x1b[1m" in text and "\x1b[31m" not in text and "\\x1b[31mred" in text


# ------------------------------------------------------------ events and summary agree


def test_stage_json_events_sum_to_the_summary(tmp_path):
    """Skips (unchanged files), a failure (a folder where a file goes), a refused name (not
    UTF-8) and a deletion: the events say what the summary says."""
    from stoker.cli import app

    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    for i in range(1, 7):
        (src / f"f{i}").write_bytes(os.urandom(1000 * i))
    with open(os.path.join(os.fsencode(src), b"caf\xe9"), "wb") as f:
        f.write(b"latin-1 name")
    first = runner.invoke(app, ["stage", str(src), str(dst)])
    assert first.exit_code == 1 and "not UTF-8" in first.stderr  # the rest was copied
    for name in ("f3", "f4"):  # changed since: copied again
        (src / name).write_bytes(os.urandom(1500))
    (dst / "f5").unlink()
    (dst / "f5" / "in-the-way").mkdir(parents=True)
    (dst / "extra").write_text("not in the source")
    res = runner.invoke(app, ["stage", str(src), str(dst), "--json", "--delete", "--yes"])
    assert res.exit_code == 1, res.output
    events = [json.loads(line) for line in res.stdout.splitlines()]
    kinds = [e["event"] for e in events]
    summary = events[-1]
    assert kinds[0] == "start" and kinds[-1] == "summary" and kinds.count("listed") == 1
    listed = next(e for e in events if e["event"] == "listed")
    last = [e for e in events if e["event"] == "progress"][-1]
    errors = [e["message"] for e in events if e["event"] == "error"]
    deletes = [e["key"] for e in events if e["event"] == "delete"]

    assert (summary["files_copied"], summary["files_skipped"], len(summary["failed"])) == (2, 3, 1)
    assert len(summary["refused"]) == 1
    assert summary["files_total"] == (
        summary["files_copied"] + summary["files_skipped"] + len(summary["failed"])
    )
    assert summary["bytes_total"] == sum(
        p.stat().st_size for p in src.iterdir() if p.name.isascii()
    )
    assert listed["files"] == summary["files_copied"] + len(summary["failed"])
    assert (last["files"], last["bytes"]) == (summary["files_copied"], summary["bytes_copied"])
    assert (last["total_files"], last["total_bytes"]) == (listed["files"], listed["bytes"])
    assert sorted(errors) == sorted(summary["failed"] + summary["refused"])
    # With a failure the listing is no complete evidence: --delete deletes nothing, and says so
    assert deletes == summary["deleted"] == [] and (dst / "extra").exists()

    os.remove(os.path.join(os.fsencode(src), b"caf\xe9"))
    (dst / "f5" / "in-the-way").rmdir()
    (dst / "f5").rmdir()
    res = runner.invoke(app, ["stage", str(src), str(dst), "--json", "--delete", "--yes"])
    assert res.exit_code == 0, res.output
    events = [json.loads(line) for line in res.stdout.splitlines()]
    summary, last = events[-1], [e for e in events if e["event"] == "progress"][-1]
    deletes = [e["key"] for e in events if e["event"] == "delete"]
    assert deletes == summary["deleted"] == ["extra"] and summary["files_deleted"] == 1
    assert (
        (last["files"], last["bytes"])
        == (1, 5000)
        == (
            summary["files_copied"],
            summary["bytes_copied"],
        )
    )
    assert not any(e["event"] == "error" for e in events)


# ------------------------------------------------------------ outputs that are no file

FINETUNE = str(EXAMPLES / "finetune-1vm.toml")


@pytest.mark.parametrize(
    "args",
    [
        ["report", "--plan", FINETUNE, "--out", "{p}"],
        ["report", "--plan", FINETUNE, "--out", "{d}/r.html", "--pdf", "{p}"],
        ["simulate", FINETUNE, "--runs", "1", "--out", "{p}"],
        ["stage", "{d}/src", "{d}/dst", "--record", "{p}"],
        ["bench", "storage", "{d}", "--size", "1MiB", "--record", "{p}"],
    ],
)
def test_an_output_that_is_a_fifo_or_device_is_refused_not_replaced(tmp_path, args):
    """Written aside and renamed over, a FIFO (or, run as root, /dev/null itself) would be
    replaced by a regular file: refused before any work, and left as it was."""
    from stoker.cli import app

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_text("x")
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    res = runner.invoke(app, [a.format(p=fifo, d=tmp_path) for a in args])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(fifo) in lines[0] and "not a regular file" in lines[0]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert not (tmp_path / "dst").exists() and not (tmp_path / "r.html").exists()


def test_a_price_refresh_into_a_fifo_is_refused_before_asking_the_api(tmp_path):
    from stoker.catalog import refresh_prices
    from stoker.errors import PriceError

    fifo = tmp_path / "prices.toml"
    os.mkfifo(fifo)
    with pytest.raises(PriceError, match="not a regular file"):
        refresh_prices(["ND96isr_H100_v5"], "eastus", fifo)  # (the API is port 9: no answer)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


# ------------------------------------------------------------ wrong types in an override


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("price_per_hour = true", "price_per_hour: true is a boolean"),
        ('gpus = "8"', "gpus: '8' is text"),
        ("ib_links = false", "ib_links: false is a boolean"),
        ('nvls_efficiency = "0.8"', "nvls_efficiency: '0.8' is text"),
    ],
)
def test_a_catalog_override_of_the_wrong_type_is_refused_not_coerced(tmp_path, line, words):
    path = tmp_path / "over.toml"
    path.write_text(f"[vm.ND96isr_H100_v5]\n{line}\n")
    with pytest.raises(CatalogError, match=words):
        load_catalog([path], defaults=False)


def test_quantities_and_true_booleans_in_an_override_still_read(tmp_path):
    path = tmp_path / "over.toml"
    path.write_text(
        '[vm.ND96isr_H100_v5]\nib_rate = "400 Gb/s"\nprice_per_hour = 98.5\n'
        "gpudirect_rdma = true\ngpus = 8\n"
    )
    vm = load_catalog([path], defaults=False).vm["ND96isr_H100_v5"]
    assert (vm.ib_rate, vm.price_per_hour, vm.gpudirect_rdma, vm.gpus) == (50e9, 98.5, True, 8)
