"""``provision``: the Python twin of ``stoker provision`` (being written)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Deployment:
    out: Path


def provision(*args: object, **kwargs: object) -> Deployment:
    raise NotImplementedError("stoker provision is being written")
