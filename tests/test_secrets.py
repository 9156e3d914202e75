"""Secrets (a SAS signature, a password in a URL) show nowhere: not in an error, a warning, a
traceback, a progress bar or --json, whichever verb was given them. Run against Azurite, with
the SAS in the URL as the only credential."""

from __future__ import annotations

import traceback
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import pytest
from typer.testing import CliRunner

from stoker.cli import app
from stoker.errors import StoreError, StreamError, StreamWarning
from stoker.stream import ShardWriter, StreamingDataset, StreamingLoader

runner = CliRunner()


def _sas_url(azurite: Any) -> tuple[str, tuple[str, ...]]:
    """A fresh container's URL with a SAS that may do anything, and the forms of its signature
    that must show nowhere (as signed, URL-encoded, and its start, should a line wrap it)."""
    name = azurite.container().container_name
    sas = azurite.sas(name, read=True, write=True, create=True, list=True, add=True, delete=True)
    signature = parse_qs(sas)["sig"][0]
    return f"{azurite.endpoint}/{name}/{{}}?{sas}", (
        signature,
        quote(signature, safe=""),
        signature[:12],
    )


def _shows_none(text: str, forms: tuple[str, ...]) -> None:
    for form in forms:
        assert form not in text


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bars drawn as on a terminal, wide enough for a whole URL."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "400")


def test_a_datasets_sas_shows_in_no_error_traceback_nor_warning(
    azurite: Any, tmp_path: Path
) -> None:
    """StreamingDataset and bench loader built their messages from the URL as given."""
    url, forms = _sas_url(azurite)
    with pytest.raises(StreamError, match="has no index.json") as missing:
        len(StreamingDataset(url.format("nothing"), tmp_path / "cache"))  # read on first use
    _shows_none(repr(missing.value) + "".join(traceback.format_exception(missing.value)), forms)

    with ShardWriter(url.format("ds")) as writer:
        for i in range(3):
            writer.write(b"sample %d" % i)
    ds = StreamingDataset(url.format("ds"), tmp_path / "cache", drop_last=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(StreamingLoader(ds, batch_size=8)) == []
    [warning] = [w for w in caught if w.category is StreamWarning]
    assert "gets no batch" in str(warning.message)
    _shows_none(str(warning.message), forms)

    out = runner.invoke(
        app, ["bench", "loader", url.format("ds"), "--workers", "0", "--cache", str(tmp_path / "c")]
    )
    assert out.exit_code == 2 and "holds 3 samples" in out.stderr, out.output
    _shows_none(out.output, forms)


def test_what_the_cli_prints_of_a_sas_url_shows_no_signature(
    azurite: Any, tmp_path: Path, terminal: None
) -> None:
    """shards write printed OUT as given (bar, summary line, --json "out"); bench drew its bar
    and --generate status with the URL as given (a quick run may draw no frame of them)."""
    url, forms = _sas_url(azurite)
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.bin").write_bytes(b"x" * 100)
    shown = runner.invoke(app, ["shards", "write", str(src), url.format("plain")])
    assert shown.exit_code == 0 and "1 samples in 1 shard" in shown.stdout, shown.output
    as_json = runner.invoke(app, ["shards", "write", str(src), url.format("json"), "--json"])
    assert as_json.exit_code == 0 and '"samples": 1' in as_json.stdout, as_json.output
    generated = runner.invoke(
        app,
        ["bench", "loader", url.format("gen"), "--generate", "2", "--cache", str(tmp_path / "c")],
    )
    assert generated.exit_code == 2 and "holds 2 samples" in generated.stderr
    storage = runner.invoke(app, ["bench", "storage", url.format("x"), "--size", "1MiB"])
    assert storage.exit_code == 2 and "is not a folder" in storage.stderr
    staged = runner.invoke(app, ["stage", str(src), url.format("staged")])
    assert staged.exit_code == 0, staged.output
    assert "/staged " in staged.output and "sv=" not in staged.output  # the bar: no query
    for out in (shown, as_json, generated, storage, staged):
        _shows_none(out.output, forms)


def test_a_url_with_a_password_is_refused_without_showing_it(
    azurite: Any, tmp_path: Path, terminal: None
) -> None:
    """A user:password@ in a path-style URL was kept in the endpoint, so every message naming
    the store showed it (and Azure AD was tried over plain HTTP)."""
    password = "NotForTheLogs-8c1f"
    name = azurite.container().container_name
    url = f"http://user:{password}@127.0.0.1:{azurite.port}/devstoreaccount1/{name}/ds"
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.bin").write_bytes(b"x")
    for argv in (
        ["checkpoint", "ls", str(tmp_path / "fast"), "--durable", url],
        ["shards", "write", str(src), url],
        ["stage", str(src), url],
    ):
        out = runner.invoke(app, argv)
        assert out.exit_code == 2 and "takes no user:password@" in out.stderr, out.output
        assert password not in out.output
    with pytest.raises(StoreError, match="no user:password@") as info:
        StreamingDataset(url, tmp_path / "cache")
    assert password not in "".join(traceback.format_exception(info.value))


def test_a_new_sas_for_the_same_dataset_reuses_its_cache(
    azurite: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default cache folder was named by a hash of the URL as given, signature included:
    each rotated SAS (they expire) downloaded the whole dataset again into a new folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    url, _ = _sas_url(azurite)
    name = url.split("/")[-2]
    # More samples than one read-ahead group (64): the first group is read by range for a
    # fast first batch, and the shards are downloaded into the cache from the second on.
    samples = [b"sample %d" % i for i in range(200)]
    with ShardWriter(url.format("ds"), shard_size="1KiB") as writer:
        for sample in samples:
            writer.write(sample)
    first = StreamingDataset(url.format("ds"))
    assert sorted(first) == sorted(samples)
    rotated = f"{azurite.endpoint}/{name}/ds?{azurite.sas(name, read=True, list=True)}"
    assert rotated != url.format("ds")
    second = StreamingDataset(rotated)
    assert second.local == first.local and first.local is not None
    assert (tmp_path / "xdg" / "stoker" / "stream") in first.local.parents
    assert sorted(second) == sorted(samples)
    assert second.stats()["cache_hits"] >= 1 and second.stats()["bytes_fetched"] == 0
