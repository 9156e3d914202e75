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
from typing import Any, Literal, TypedDict, cast, get_args

from ..errors import ReportError

KIND = "stoker.measured/1"
Source = Literal["ledger", "loader", "storage", "stage", "checkpoint"]  # what measured a run
Unit = Literal["ratio", "s", "bytes/s", "bytes", "count"]  # a series' unit
SOURCES: tuple[Source, ...] = get_args(Source)
UNITS: tuple[Unit, ...] = get_args(Unit)
MAX_POINTS = 4096  # a series longer than this keeps every other point (a long run stays small)


class SeriesJson(TypedDict):
    """One series of a ``stoker.measured/1`` record, as JSON."""

    unit: str  # one of UNITS when stoker wrote it (a reader keeps what it finds)
    t_s: list[float]
    values: list[float | None]  # (a value that was not finite: null)


class MeasuredJson(TypedDict):
    """A ``stoker.measured/1`` record as ``Measured.to_dict()`` writes it (a reader tolerates
    keys it does not know, and parse_measured checks each it reads)."""

    kind: str
    source: Source
    name: str
    recorded: str
    summary: dict[str, Any]  # numbers or null, in base units, the unit in the name
    series: dict[str, SeriesJson]


@dataclass
class Series:
    unit: str  # one of UNITS when stoker wrote it (a reader keeps what it finds)
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

    source: Source
    name: str
    summary: dict[str, Any] = field(default_factory=dict)
    series: dict[str, Series] = field(default_factory=dict)
    recorded: str = field(
        default_factory=lambda: dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    path: str = ""  # the file it was read from, for the report's captions
    dropped: int = 0  # values read that were not finite or were negative, left out

    def add(self, series: str, unit: Unit, t_s: float, value: float) -> None:
        """Append one point to ``series`` (made with ``unit`` on first use)."""
        self.series.setdefault(series, Series(unit)).add(t_s, value)

    def to_dict(self) -> MeasuredJson:
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
        """Write the record to ``path`` (aside, then renamed: a reader never sees half, and two
        runs recording to one path leave one whole record)."""
        from .._output_files import check_out, write_atomic

        out = check_out(path, "--record")
        text = json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"
        return write_atomic(out, text.encode(), "--record")


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def read_measured(path: str | os.PathLike[str]) -> Measured:
    """Read and check one ``stoker.measured/1`` file; a bad one is one ReportError line."""
    from .._redact import shown
    from .._user_files import load_user_json

    p = Path(path)
    m = parse_measured(load_user_json(p, "measured record", ReportError), str(p))
    m.path = shown(str(p))
    return m


def parse_measured(doc: Any, where: str = "the measured record") -> Measured:
    """Check one ``stoker.measured/1`` document (a dict); ``where`` names it in errors. Values
    that are not finite or are negative (every unit is a size, a time or a share) are left out
    and counted (``Measured.dropped``); a series longer than MAX_POINTS is averaged down to it;
    secrets in the name (a SAS URL) are redacted."""
    from .._redact import shown

    p = where
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise ReportError(
            f"{p}: not a measured record (kind should be {KIND!r}); write one with "
            "--record or save_json()"
        )
    source = doc.get("source")
    if source not in SOURCES:
        raise ReportError(f"{p}: source {source!r} is not one of {', '.join(SOURCES)}")
    summary, dropped = _summary(doc.get("summary") or {}, p)
    raw = doc.get("series") or {}
    if not isinstance(raw, dict):
        raise ReportError(f"{p}: series should be an object of name -> {{unit, t_s, values}}")
    series: dict[str, Series] = {}
    for key, s in raw.items():
        if not isinstance(s, dict):
            raise ReportError(f"{p}: series.{key} should be an object with unit, t_s, values")
        t, v = s.get("t_s"), s.get("values")
        if not isinstance(t, list) or not isinstance(v, list) or len(t) != len(v):
            raise ReportError(f"{p}: series.{key}: t_s and values should be lists of one length")
        if not set(map(type, t)) <= {int, float}:  # map(type): a million points in 30 ms
            raise ReportError(f"{p}: series.{key}.t_s: every time should be a number (seconds)")
        if not set(map(type, v)) <= {int, float, type(None)}:
            raise ReportError(f"{p}: series.{key}.values: every value should be a number or null")
        series[key], bad = _series(str(s.get("unit", "")), t, v)
        dropped += bad
    m = Measured(
        cast("Source", source),  # (one of SOURCES: checked above)
        shown(str(doc.get("name") or source)),
        summary,
        series,
        str(doc.get("recorded", ""))[:40],
    )
    m.dropped = dropped
    return m


def _summary(summary: Any, p: str) -> tuple[dict[str, Any], int]:
    """The summary with every figure a finite, non-negative number or None (a figure is a key
    with a unit in its name, or a count); other keys kept only as short strings or numbers."""
    if not isinstance(summary, dict):
        raise ReportError(f"{p}: summary should be an object of numbers")
    out: dict[str, Any] = {}
    dropped = 0
    for k, v in summary.items():
        figure = k.endswith(_FIGURE_SUFFIXES) or k in ("steps", "saves", "bytes")
        if figure and not (v is None or isinstance(v, int | float)):
            raise ReportError(f"{p}: summary.{k} should be a number or null, not {v!r:.40}")
        if isinstance(v, int | float) and not isinstance(v, bool):
            finite = abs(v) < 1e308 if isinstance(v, int) else math.isfinite(v)  # 10**400
            if not finite or (figure and v < 0):
                v, dropped = None, dropped + 1
            out[k] = v
        elif v is None or isinstance(v, str):
            out[k] = v if v is None else v[:200]
    return out, dropped


def _floats(xs: list[Any]) -> Any:
    """A float array of ``xs``; an integer past a float's range (JSON allows 1e400 written
    out) is infinite, so it is left out as the other values that are not finite."""
    import numpy as np

    try:
        return np.asarray(xs, dtype=float)
    except OverflowError:
        big = [math.inf if isinstance(x, int) and abs(x) > 1e308 else x for x in xs]
        return np.asarray(big, dtype=float)


_FIGURE_SUFFIXES = ("_s", "_share", "_bps", "_iops", "_bytes")


def _series(unit: str, t: list[float], v: list[float | None]) -> tuple[Series, int]:
    """A checked series: points with a time that is not finite are left out, and values not
    finite or negative become unknown (NaN); then averaged down to MAX_POINTS."""
    import numpy as np

    ts, vs = _floats(t), _floats(v)  # None -> NaN
    keep = np.isfinite(ts)
    with np.errstate(invalid="ignore"):
        bad = np.isinf(vs) | (vs < 0)  # NaN stays as it is: unknown, as null
    dropped = int(np.count_nonzero(bad[keep]) + np.count_nonzero(~keep))
    vs = np.where(bad, np.nan, vs)[keep]
    ts = ts[keep]
    if len(ts) > MAX_POINTS:
        k = -(-len(ts) // MAX_POINTS)  # points per bucket
        n = -(-len(ts) // k) * k
        ts = np.concatenate([ts, np.full(n - len(ts), ts[-1])]).reshape(-1, k)[:, -1]
        pad = np.concatenate([vs, np.full(n - len(vs), np.nan)]).reshape(-1, k)
        count = np.isfinite(pad).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            vs = np.where(count > 0, np.nansum(pad, axis=1) / np.maximum(count, 1), np.nan)
    return Series(unit, ts.tolist(), vs.tolist()), dropped
