"""``stoker VERB`` builds only that verb's command; help and a mistyped verb get every verb.

Each case runs ``main`` in a fresh interpreter, as the installed command does, and reads back
which of stoker's CLI modules it imported."""

from __future__ import annotations

import json
import subprocess
import sys

from stoker.cli import VERBS

RUN = """
import json, sys
from stoker.cli import main
sys.argv = ["stoker", *json.loads(sys.argv[1])]
try:
    main()
finally:
    loaded = sorted(m for m in sys.modules if m.startswith("stoker.cli."))
    print("LOADED", json.dumps(loaded), file=sys.stderr)
"""


def run(*argv: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps(argv)], capture_output=True, text=True, timeout=120
    )
    line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED "))
    return done, {m.removeprefix("stoker.cli.") for m in json.loads(line.removeprefix("LOADED "))}


def verb_modules(loaded: set[str]) -> set[str]:
    return loaded & {module for module, _, _ in VERBS.values()}


def test_a_verb_builds_only_its_own_module() -> None:
    done, loaded = run("verify", "--help")
    assert done.returncode == 0, done.stderr
    assert "Usage: stoker verify [OPTIONS] SRC DST" in " ".join(done.stdout.split())
    assert verb_modules(loaded) == {"stage"}


def test_a_group_verb_keeps_its_sub_verbs() -> None:
    done, loaded = run("cache", "--help")
    assert done.returncode == 0, done.stderr
    assert "pull  Make the model available" in done.stdout
    assert "cache" in verb_modules(loaded)  # (with stage's, which it shares)
    assert not verb_modules(loaded) & {"plan", "provision", "bench", "simulate", "catalog"}


def test_top_level_help_lists_every_verb() -> None:
    done, loaded = run("--help")
    assert done.returncode == 0, done.stderr
    commands = done.stdout.split("Commands:")[1].splitlines()
    listed = [line.split()[0] for line in commands if line.startswith("  ") and line[2] != " "]
    assert sorted(listed) == sorted(VERBS)
    assert verb_modules(loaded) == {module for module, _, _ in VERBS.values()}


def test_top_level_help_before_a_verb_still_lists_every_verb() -> None:
    done, loaded = run("--help", "stage")
    assert done.returncode == 0, done.stderr
    assert "provision" in done.stdout and "checkpoint" in done.stdout
    assert verb_modules(loaded) == {module for module, _, _ in VERBS.values()}


def test_a_mistyped_verb_is_refused_with_the_whole_list() -> None:
    done, _ = run("stgae", "a", "b")
    assert done.returncode == 2
    assert "No such command 'stgae'" in done.stderr
