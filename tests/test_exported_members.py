"""``stoker.__all__`` lists exactly the public names ``stoker`` exports, each the very object its
subpackage defines, and nothing public is left out without a decision.

The package loads its exports lazily, and its ``__dir__`` returns ``__all__`` itself: comparing
``dir(stoker)`` with ``__all__`` proves nothing. These tests compare ``__all__`` with what is
written elsewhere instead: the lazy table, the type checker's imports, each subpackage's own
``__all__``, the error classes, and every ``stoker.NAME`` the docs use.
"""

import ast
import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

import stoker
import stoker.errors

ROOT = Path(__file__).resolve().parents[1]
INIT = ROOT / "src" / "stoker" / "__init__.py"

# Public in a subpackage, deliberately not at the top (reached as stoker.SUBPACKAGE.NAME). A new
# public name lands here or in stoker.__all__: the test below fails until one of them says so.
NOT_AT_THE_TOP = {
    "catalog": {
        "BlobTier",
        "HOURS_PER_MONTH",
        "Meter",
        "Refreshed",
        "refresh_all",
        "Fabric",
        "FilesTier",
        "LustreCommon",
        "LustreSku",
        "NetAppLevel",
        "Provisioning",
        "Source",
        "VmPrice",
        "VmSize",
        "catalog_layers",
        "default_prices_path",
        "vm_size_name",
    },
    "checkpoint": {"CheckReport", "Problem", "TierCost"},
    "measure": {
        "ImdsUnreachable",
        "bench_single_writer",
        "bench_storage",
        "doctor",
        "fetch_instance",
        "most_accelerators",
        "run_loader",
        "serve",
    },
    "plan": {
        "PlanJson",
        "Renewal",
        "markdown_compare",
        "optimal_interval",
        "parse_spec",
        "renewal",
    },
    "operate": {
        "Expired",
        "IdleCost",
        "Metrics",
        "NodeReading",
        "Verdict",
        "command_action",
        "decide",
        "idle_cost",
        "evidence",
        "node_health",
        "nvml_gpus",
        "PreflightCheck",
        "parameter_pairs",
        "print_action",
        "step_file",
        "teardown_action",
        "webhook_action",
    },
    "provision": {"idle_weekend_text", "money", "read_ssh_key"},
    "report": {"ReportResult", "read_measured"},
    "stage": {"JsonReporter", "Reporter", "RichReporter", "StageOptions", "terminal_reporter"},
    "stream": {"DatasetIndex", "ShardInfo", "StallMetrics", "serve_metrics"},
}


def _type_checking_imports() -> set[str]:
    tree = ast.parse(INIT.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for sub in ast.walk(node):
                if isinstance(sub, ast.ImportFrom):
                    names.update(alias.asname or alias.name for alias in sub.names)
    return names


def test_all_is_the_lazy_table_and_the_type_checkers_imports() -> None:
    assert stoker.__all__ == sorted(set(stoker.__all__)), "sorted, each name once"
    assert set(stoker.__all__) == set(stoker._WHERE)
    imported = _type_checking_imports()
    assert imported == set(stoker.__all__), (
        f"imported for type checkers only: {sorted(imported - set(stoker.__all__))}; "
        f"exported but not imported for them: {sorted(set(stoker.__all__) - imported)}"
    )


def test_every_export_is_the_object_its_subpackage_defines() -> None:
    for name in stoker.__all__:
        module = importlib.import_module(f"stoker.{stoker._WHERE[name]}")
        value = getattr(stoker, name)
        if name == stoker._WHERE[name]:  # a function named like its subpackage: the test below
            continue
        assert value is getattr(module, name), name
        declared = getattr(module, "__all__", None)
        assert declared is None or name in declared, f"{module.__name__}.__all__ lacks {name}"


def test_a_subpackages_public_names_are_exported_or_listed_as_kept_below() -> None:
    for sub in sorted(set(stoker._WHERE.values())):
        module = importlib.import_module(f"stoker.{sub}")
        declared = getattr(module, "__all__", None)
        if declared is None:
            continue
        left = set(declared) - set(stoker.__all__)
        assert left == NOT_AT_THE_TOP.get(sub, set()), (
            f"stoker.{sub}: export {sorted(left - NOT_AT_THE_TOP.get(sub, set()))} from stoker "
            f"or add them to NOT_AT_THE_TOP; gone: {sorted(NOT_AT_THE_TOP.get(sub, set()) - left)}"
        )


@pytest.mark.parametrize("name", sorted(n for n, sub in stoker._WHERE.items() if n == sub))
def test_a_function_named_like_its_subpackage_stays_callable_once_the_subpackage_is_imported(
    name: str,
) -> None:
    """``import stoker.X`` (or ``from stoker import`` another name of X) binds the subpackage to
    ``stoker.X``, over the lazily exported function of that name: it must then be callable as
    the function, as stoker.stage is."""
    import subprocess
    import sys

    code = f"import stoker.{name}, stoker; assert callable(stoker.{name})"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, f"stoker.{name} is the subpackage, and not callable"


def test_every_error_and_warning_class_is_exported() -> None:
    classes = {
        name
        for name, obj in vars(stoker.errors).items()
        if inspect.isclass(obj)
        and obj.__module__ == "stoker.errors"
        and not name.startswith("_")
        and issubclass(obj, (stoker.errors.StokerError, Warning))
    }
    assert classes, "stoker.errors defines its classes"
    assert classes - set(stoker.__all__) == set()


def test_every_stoker_name_the_docs_use_is_exported() -> None:
    used: set[str] = set()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        # stoker.NAME, not stoker.NAME/1 (a format's name), stoker.MODULE.NAME, nor a file
        # (dashboards/stoker.json)
        used.update(re.findall(r"(?<![/\w])stoker\.([A-Za-z_]\w*)\b(?![/.\w])", doc.read_text()))
    modules = {n for n in used if importlib.util.find_spec(f"stoker.{n}") is not None}
    missing = sorted(used - modules - set(stoker.__all__))
    assert not missing, f"the docs use stoker.{missing}, which stoker does not export"


def test_the_api_twins_of_the_cli_verbs_are_callable() -> None:
    # stoker.stage is the subpackage and, callable, the stage() function too.
    for verb in ("plan_job", "stage", "verify", "cache_pull"):
        assert callable(getattr(stoker, verb)), verb
        twin = getattr(stoker, f"{verb}_async", None)
        assert verb == "plan_job" or inspect.iscoroutinefunction(twin), verb
    importlib.import_module("stoker.stage._engine")  # the subpackage still imports
    assert callable(stoker.stage) and inspect.ismodule(stoker.stage)


def test_star_import_gives_exactly_all() -> None:
    namespace: dict = {}
    exec("from stoker import *", namespace)  # noqa: S102 - the import users write
    assert set(namespace) - {"__builtins__"} == set(stoker.__all__)
