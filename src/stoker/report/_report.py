"""report(): plan, simulation and measured runs -> one self-contained HTML file (and, on
request, the same charts as PNG files or one PDF)."""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._output_files import atomic, write_atomic
from .._redact import redact
from ..errors import ReportError
from ._figure import Chart
from ._inputs import load_measured, load_plan, load_simulation

if TYPE_CHECKING:
    from ..measure.measured import Measured
    from ..plan import PlanJson
    from ..simulate import SimulationJson
    from ._inputs import MeasuredInputs, PlanInput, SimulationInput


@dataclass
class ReportResult:
    path: Path
    size_bytes: int
    elapsed_s: float
    charts: list[str]  # the titles, in page order
    sections: dict[str, list[str]] = field(default_factory=dict)  # section -> chart ids
    pdf: Path | None = None
    png: list[Path] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "size_bytes": self.size_bytes,
            "elapsed_s": self.elapsed_s,
            "charts": self.charts,
            "sections": self.sections,
            "pdf": None if self.pdf is None else str(self.pdf),
            "png": [str(p) for p in self.png],
        }


def report(
    out: str | os.PathLike[str],
    *,
    plan: PlanInput | None = None,
    simulation: SimulationInput | None = None,
    measured: MeasuredInputs | None = None,
    pdf: str | os.PathLike[str] | None = None,
    png: str | os.PathLike[str] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> ReportResult:
    """Write one HTML file to ``out`` from any mix of a plan (job spec path, plan JSON path, Plan
    or dict), a simulation (``stoker.simulation/1`` path or dict) and measured records
    (``stoker.measured/1`` paths, dicts or Measured). ``pdf``: also every chart in one PDF, a
    page each; ``png``: also one PNG per chart into this folder. ``progress(what, done,
    total)`` is called as each step starts."""
    start = time.perf_counter()
    steps = 3 + bool(pdf or png)

    def say(what: str, done: int) -> None:
        if progress is not None:
            progress(what, done, steps)

    from .._output_files import check_out

    out = check_out(out, "--out")  # before minutes of planning and drawing
    pdf = None if pdf is None else check_out(pdf, "--pdf")
    _not_an_input({"--out": out, "--pdf": pdf}, [plan, simulation, *_listed(measured)])
    png = None if png is None else check_out(png, "--png", folder=True)
    say("reading the inputs", 0)
    plan_d = None if plan is None else load_plan(plan)
    sim_d = None if simulation is None else load_simulation(simulation)
    if sim_d is None and plan_d is not None and isinstance(plan_d.get("simulation"), dict):
        sim_d = load_simulation(plan_d["simulation"])  # stoker plan --simulate --json
    records = load_measured(measured)
    if plan_d is None and sim_d is None and not records:
        raise ReportError("nothing to report: give a plan, a simulation or a measured record")
    from .. import __version__
    from ._figure import style
    from ._html import page

    with style(), warnings.catch_warnings():
        # A name in CJK or emoji has no glyph in DejaVu: the page's SVG text shows it (the
        # browser's fonts); a box in a PNG says nothing a warning per glyph would add.
        warnings.filterwarnings("ignore", "Glyph .* missing")
        say("drawing the charts", 1)
        sections = _charts(plan_d, sim_d, records)
        say("writing the page", 2)
        html = redact(page(sections, plan_d, sim_d, records, __version__))  # a SAS in a name
        path = write_atomic(Path(out), html.encode(), "--out")
        every = [c for cs in sections.values() for c in cs]
        if pdf or png:
            say("writing PDF and PNG", 3)
        pdf_path = _pdf(Path(pdf), every) if pdf else None
        pngs = _png(Path(png), every) if png else []
    say("done", steps)
    for c in every:  # release the figures' memory now, not at the next collection
        c.fig.clear()
    return ReportResult(
        path,
        path.stat().st_size,
        time.perf_counter() - start,
        [c.title for c in every],
        {s: [c.key for c in cs] for s, cs in sections.items()},
        pdf_path,
        pngs,
    )


def _listed(measured: MeasuredInputs | None) -> list[object]:
    return list(measured) if isinstance(measured, list | tuple) else [measured]


def _not_an_input(outputs: dict[str, Path | None], inputs: list[object]) -> None:
    """An output that is one of the inputs (``--out rec.json --measured rec.json``) would
    replace what was measured with the page: refused before anything is written."""
    given = [Path(i) for i in inputs if isinstance(i, str | os.PathLike) and Path(i).exists()]
    for flag, out in outputs.items():
        if out is not None and out.exists() and any(out.samefile(i) for i in given):
            raise ReportError(
                f"{flag} {out}: is also an input; writing it would replace it, choose another path"
            )


def _charts(
    plan: PlanJson | None, sim: SimulationJson | None, records: Sequence[Measured]
) -> dict[str, list[Chart]]:
    from . import _measured_charts, _plan_charts, _sim_charts

    ledgers = [m for m in records if m.source == "ledger"]
    out: dict[str, list[Chart]] = {"Plan": [], "Simulation": [], "Measured runs": []}
    if plan is not None:
        out["Plan"] = _plan_charts.charts(plan, ledgers)  # the step split shows both
    elif ledgers:
        split = _plan_charts.step_split(None, ledgers)
        out["Measured runs"] += [split] if split else []
    if sim is not None:
        out["Simulation"] = _sim_charts.charts(sim)
    out["Measured runs"] += _measured_charts.charts(list(records), plan)
    return out


def _pdf(path: Path, charts: list[Chart]) -> Path:
    from matplotlib.backends.backend_pdf import PdfPages

    with atomic(path, "--pdf") as tmp, PdfPages(tmp) as pages:
        for c in charts:
            _titled(c)
            pages.savefig(c.fig)
    return path


def _png(folder: Path, charts: list[Chart]) -> list[Path]:
    out = []
    for c in charts:
        _titled(c)
        p = folder / f"{c.key}.png"
        with atomic(p, "--png") as tmp:
            c.fig.savefig(tmp, format="png", dpi=150, bbox_inches="tight")
        out.append(p)
    return out


def _titled(c: Chart) -> None:
    """A PNG or a PDF page stands alone: the chart's title goes on it, above the plot."""
    if c.fig._suptitle is None:
        c.fig.suptitle(c.title, fontweight="bold")
        height_pt = c.fig.get_size_inches()[1] * 72
        c.fig.subplots_adjust(top=c.fig.subplotpars.top - 16 / height_pt)
