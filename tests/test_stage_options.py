"""StageOptions: the options of stage, verify and cache_pull, typed once and checked once.

``stage(src, dst, options=StageOptions(...))`` copies exactly as the keywords do; a bad value is
one StageError line naming the option, raised before anything is opened or written.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
from pathlib import Path

import pytest

import stoker
from stoker.errors import StageError
from stoker.stage import StageOptions, cache_pull, stage, verify


def _tree(root: Path) -> Path:
    for key, data in {
        "a.bin": b"a" * 3000,
        "keep/b.json": b"{}",
        "keep/c.json": b"[1]",
        "skip/d.json": b"{}",
        "e.txt": b"e",
    }.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".stoker" not in p.parts
    }


def _same(summary: stoker.stage.StageSummary) -> dict[str, object]:
    """A summary, less what differs between two equal runs (where, and how fast)."""
    keep = dataclasses.asdict(summary)
    for k in ("src", "dst", "seconds", "mb_per_s", "manifest", "estimated_s"):
        keep.pop(k)
    return keep


def test_options_and_keywords_copy_the_same(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    kw = {"include": ("*.json", "*.bin"), "exclude": ("skip/*",), "block_size": "64 KiB"}
    by_keywords = stage(str(src), str(tmp_path / "kw"), **kw)  # type: ignore[arg-type]
    by_options = stage(str(src), str(tmp_path / "opts"), options=StageOptions(**kw))  # type: ignore[arg-type]
    assert _same(by_keywords) == _same(by_options)
    assert by_options.files_copied == 3  # a.bin, keep/b.json, keep/c.json
    assert _files(tmp_path / "kw") == _files(tmp_path / "opts")
    assert set(_files(tmp_path / "opts")) == {"a.bin", "keep/b.json", "keep/c.json"}


def test_a_keyword_beside_options_replaces_that_field(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    base = StageOptions(include=("*.txt",))
    dry = stage(str(src), str(tmp_path / "dst"), options=base, dry_run=True)
    assert dry.dry_run and dry.files_copied == 1 and not (tmp_path / "dst").exists()
    real = stage(str(src), str(tmp_path / "dst"), options=base)
    assert not real.dry_run and _files(tmp_path / "dst") == {"e.txt": b"e"}


def test_verify_takes_the_options_the_copy_was_staged_with(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    opts = StageOptions(include=("keep/*",))
    stage(str(src), str(tmp_path / "dst"), options=opts)
    assert verify(str(src), str(tmp_path / "dst"), options=opts).ok
    whole = verify(str(src), str(tmp_path / "dst"))  # every key: the others are missing
    assert {k for k, _ in whole.mismatches} == {"a.bin", "skip/d.json", "e.txt"}


@pytest.mark.parametrize(
    ("field", "value", "line"),
    [
        ("concurrency", 0, "--concurrency 0: use 1 or more (default 32)"),
        ("block_size", 1024, "--block-size 1,024 bytes: use 64 KiB to 4000 MiB (default 8 MiB)"),
        ("block_size", "5 GiB", "--block-size 5,368,709,120 bytes: use 64 KiB to 4000 MiB"),
        ("tier", "lukewarm", "--tier lukewarm: use one of hot, cool, cold, archive"),
        ("bwlimit", "fast", "--bwlimit fast: "),
        ("content_type", "csv", "--content-type 'csv': write a media type"),
        ("rank", 3, "--rank 3 is outside --world-size 2"),
    ],
)
def test_a_bad_option_is_one_line_naming_it(
    field: str, value: object, line: str, tmp_path: Path
) -> None:
    kw: dict[str, object] = {field: value}
    if field == "rank":
        kw["world_size"] = 2
    with pytest.raises(StageError) as built:
        StageOptions(**kw)  # type: ignore[arg-type]
    message = str(built.value)
    assert message.startswith(line) and "\n" not in message
    with pytest.raises(StageError) as staged:  # the keyword form: the same line, nothing made
        stage(str(tmp_path / "src"), str(tmp_path / "dst"), **kw)  # type: ignore[arg-type]
    assert str(staged.value) == message
    assert not (tmp_path / "dst").exists()


def test_options_are_normalised_once() -> None:
    opts = StageOptions(block_size="1 MiB", tier="Cool", include=["*.json"])  # type: ignore[arg-type]
    assert opts.block_size == opts.block_bytes == 1 << 20
    assert opts.include == ("*.json",)
    assert opts.flags.tier == "Cool"  # the service's spelling
    assert opts.selection.include == ("*.json",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.concurrency = 4  # type: ignore[misc]


def test_every_field_is_a_keyword_of_stage_and_documented() -> None:
    fields = [f.name for f in dataclasses.fields(StageOptions) if f.init]
    params = inspect.signature(stoker.stage).parameters
    assert set(fields) <= set(params) and "options" in params
    assert set(fields) <= set(inspect.signature(stoker.stage_async).parameters)
    body = ast.parse(textwrap.dedent(inspect.getsource(StageOptions))).body[0].body  # type: ignore[attr-defined]
    documented = {
        a.target.id
        for a, doc in itertools.pairwise(body)
        if isinstance(a, ast.AnnAssign)
        and isinstance(doc, ast.Expr)
        and isinstance(doc.value, ast.Constant)
        and isinstance(doc.value.value, str)
    }
    assert set(fields) <= documented, set(fields) - documented


def test_cache_pull_takes_the_whole_model_even_under_torchrun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One node of four (torchrun's env): stage() alone would copy this node's share only.
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    src = _tree(tmp_path / "model")
    result = cache_pull(str(src), tmp_path / "cache", options=StageOptions(concurrency=2))
    assert _files(Path(result.path)) == _files(src)


def test_cache_pull_refuses_options_that_would_publish_part_of_a_model(tmp_path: Path) -> None:
    src = _tree(tmp_path / "model")
    with pytest.raises(StageError, match=r"^cache_pull: options\.include does not apply"):
        cache_pull(str(src), tmp_path / "cache", options=StageOptions(include=("*.json",)))
    assert not (tmp_path / "cache").exists()
