"""``stoker.__all__`` lists exactly the public names ``stoker`` exports."""

import importlib
import inspect

import stoker


def test_all_is_complete_and_importable():
    public = {name for name in dir(stoker) if not name.startswith("_")}
    assert public - {"annotations", "importlib"} >= set(stoker.__all__)
    for name in stoker.__all__:
        assert getattr(stoker, name) is not None, name


def test_the_api_twins_of_the_cli_verbs_are_callable():
    # stoker.stage is the subpackage and, callable, the stage() function too.
    for verb in ("plan_job", "stage", "verify", "cache_pull"):
        assert callable(getattr(stoker, verb)), verb
    importlib.import_module("stoker.stage._engine")  # the subpackage still imports

    assert callable(stoker.stage) and inspect.ismodule(stoker.stage)
