"""stoker report: one self-contained HTML file (inline SVG charts, no script, opens offline)
from any mix of a plan, a simulation and measured runs; PNG or PDF of the same charts.

    inputs (_inputs.py: plan, simulation; stoker.measure.measured: the stoker.measured/1 records)
    -> charts (_plan_charts.py, _sim_charts.py, _measured_charts.py; matplotlib via _figure.py)
    -> the page (_html.py) -> report() (_report.py)

``stoker.report(out, plan=..., simulation=..., measured=[...])`` is both this package and the
function, as ``stoker.stage`` is. docs/report.md describes the charts and the record format.
"""

from .._callable_package import make_callable
from ..measure.measured import Measured, read_measured
from ._report import ReportResult, report

__all__ = ["Measured", "ReportResult", "read_measured", "report"]

make_callable(__name__, report)
