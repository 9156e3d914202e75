"""A disk filling up, as the writers meet it: pwrite writes less than it was given."""

from __future__ import annotations

import os
from typing import Any


class ShortWrites:
    """The ``os`` module, except that write and pwrite write at most 1000 bytes a call, as a
    filling disk may."""

    def __getattr__(self, attr: str) -> Any:
        if attr == "pwrite":
            return lambda fd, data, offset: os.pwrite(fd, memoryview(data)[:1000], offset)
        if attr == "write":
            return lambda fd, data: os.write(fd, memoryview(data)[:1000])
        return getattr(os, attr)
