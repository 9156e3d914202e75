"""``stoker.measured/1``: one measured run as JSON, written by the verbs that measure and read by
``stoker report`` (the format is documented in docs/report.md).

    {"kind": "stoker.measured/1", "source": "ledger", "name": "train_stream",
     "recorded": "2026-12-02T14:00:00Z",
     "summary": {"steps": 120, "step_mean_s": 0.021, "data_share": 0.04, ...},
     "series": {"data_share": {"unit": "ratio", "t_s": [0.5, 1.0], "values": [0.03, 0.05]}}}

``source`` says what measured it: ``ledger`` (a training loop's step split), ``loader``
(``stoker bench loader``), ``storage`` (``stoker bench storage``), ``stage`` (``stoker stage``)
or ``checkpoint`` (a Checkpointer's saves). ``summary`` holds numbers (or null) in base units,
the unit in the name as in the plan's JSON; each series is a unit, times in seconds from the
start of the run, and as many values as times. A reader tolerates keys it does not know.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ReportError

KIND = "stoker.measured/1"
SOURCES = ("ledger", "loader", "storage", "stage", "checkpoint")
UNITS = ("ratio", "s", "bytes/s", "bytes", "count")
MAX_POINTS = 4096  # a series longer than this keeps every other point (a long run stays small)


@dataclass
class Series:
    unit: str
    t_s: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def add(self, t_s: float, value: float) -> None:
        self.t_s.append(float(t_s))
        self.values.append(float(value))
        if len(self.t_s) > MAX_POINTS:  # halve, keeping the newest point
            self.t_s, self.values = self.t_s[-1::-2][::-1], self.values[-1::-2][::-1]


@dataclass
class Measured:
    """One measured run: what measured it, its figures, and its series over time."""

    source: str
    name: str
    summary: dict[str, Any] = field(default_factory=dict)
    series: dict[str, Series] = field(default_factory=dict)
    recorded: str = field(
        default_factory=lambda: dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    path: str = ""  # the file it was read from, for the report's captions

    def add(self, series: str, unit: str, t_s: float, value: float) -> None:
        """Append one point to ``series`` (made with ``unit`` on first use)."""
        self.series.setdefault(series, Series(unit)).add(t_s, value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": KIND,
            "source": self.source,
            "name": self.name,
            "recorded": self.recorded,
            "summary": {k: _finite(v) for k, v in self.summary.items()},
            "series": {
                k: {"unit": s.unit, "t_s": s.t_s, "values": [_finite(v) for v in s.values]}
                for k, s in self.series.items()
            },
        }

    def save_json(self, path: str | os.PathLike[str]) -> Path:
        """Write the record to ``path`` (aside, then renamed: a reader never sees half)."""
        out = Path(path)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_name(out.name + ".tmp")
            tmp.write_text(json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n")
            tmp.replace(out)
        except OSError as exc:
            raise ReportError(f"{out}: cannot write the measured record ({exc.strerror})") from exc
        return out


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def read_measured(path: str | os.PathLike[str]) -> Measured:
    """Read and check one ``stoker.measured/1`` file; a bad one is one ReportError line."""
    p = Path(path)
    m = parse_measured(_read_json(p, "measured record"), str(p))
    m.path = str(p)
    return m


def parse_measured(doc: Any, where: str = "the measured record") -> Measured:
    """Check one ``stoker.measured/1`` document (a dict); ``where`` names it in errors."""
    p = where
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise ReportError(f"{p}: not a measured record (kind should be {KIND!r}); write one with "
                          "--record or save_json()")
    source = doc.get("source")
    if source not in SOURCES:
        raise ReportError(f"{p}: source {source!r} is not one of {', '.join(SOURCES)}")
    summary = doc.get("summary") or {}
    if not isinstance(summary, dict):
        raise ReportError(f"{p}: summary should be an object of numbers")
    series: dict[str, Series] = {}
    for key, s in (doc.get("series") or {}).items():
        if not isinstance(s, dict):
            raise ReportError(f"{p}: series.{key} should be an object with unit, t_s, values")
        t, v = s.get("t_s"), s.get("values")
        if not isinstance(t, list) or not isinstance(v, list) or len(t) != len(v):
            raise ReportError(f"{p}: series.{key}: t_s and values should be lists of one length")
        if not all(isinstance(x, int | float) for x in t):
            raise ReportError(f"{p}: series.{key}.t_s: every time should be a number (seconds)")
        if not all(x is None or isinstance(x, int | float) for x in v):
            raise ReportError(f"{p}: series.{key}.values: every value should be a number or null")
        series[key] = Series(str(s.get("unit", "")), [float(x) for x in t],
                             [math.nan if x is None else float(x) for x in v])
    return Measured(str(source), str(doc.get("name") or source), summary, series,
                    str(doc.get("recorded", "")))


def _read_json(p: Path, what: str) -> Any:
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        raise ReportError(f"{p}: no such {what} file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{p}: cannot read the {what} ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise ReportError(f"{p}: not JSON ({exc.msg}, line {exc.lineno}); give the {what} as "
                          "stoker wrote it") from exc
