"""``stoker.__all__`` lists exactly the public names ``stoker`` exports."""

import stoker


def test_all_is_complete_and_importable():
    public = {name for name in dir(stoker) if not name.startswith("_")}
    modules = {"catalog", "errors", "plan", "units", "quantities", "cli"}
    assert public - modules == set(stoker.__all__)
    for name in stoker.__all__:
        assert getattr(stoker, name) is not None
