"""The environment a store is configured from (account, key, SAS, identity, endpoints), taken
where a dataset is made and carried to its DataLoader workers. A worker of a fork server gets
the server's environment, from when the server started: a variable set since (a notebook's
``os.environ[...] = ...``, a test's) would be missing there, and the worker could not name the
account the dataset was made for."""

from __future__ import annotations

import os

PREFIXES = ("AZURE_", "STOKER_", "AWS_", "GOOGLE_")


def store_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(PREFIXES)}


def adopt(env: dict[str, str]) -> None:
    """Set what ``env`` has and this process lacks; what this process has set wins."""
    for key, value in env.items():
        os.environ.setdefault(key, value)
