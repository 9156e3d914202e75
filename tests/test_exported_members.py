"""``stoker.__all__`` lists exactly the public names ``stoker`` exports."""

import inspect

import stoker


def test_all_is_complete_and_importable():
    public = {
        name
        for name in dir(stoker)
        if not name.startswith("_") and not inspect.ismodule(getattr(stoker, name))
    }
    assert public == set(stoker.__all__)


def test_the_api_twins_of_the_cli_verbs_are_functions():
    # `stoker.stage(...)` is the function, even though stoker/stage/ is also a package.
    for verb in ("plan_job", "stage", "verify", "cache_pull"):
        assert inspect.isfunction(getattr(stoker, verb)), verb
