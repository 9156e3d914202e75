"""Charts as matplotlib figures, written as inline SVG for the page (and PNG or PDF on request).

matplotlib, not plotly: a chart is static SVG of a few kB with its text as text (no script, so
the page opens offline and draws at once), and the same figure writes PNG or PDF with no browser.
plotly would put ~3.5 MB of JavaScript in every file and needs kaleido and Chrome for an image.
Figures are made with ``matplotlib.figure.Figure`` (no pyplot): no global state, no GUI backend.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

# Colours by meaning, the same in every chart: blue is the plan, orange what was measured.
PLAN, MEASURED, SIMULATED = "#3b6ea5", "#e07b39", "#6a994e"
PHASE_COLOURS = {
    "compute": "#3b6ea5",
    "copy": "#9fb7d4",
    "exposed_comm": "#8e6bb0",
    "data": "#d1495b",
    "checkpoint": "#edae49",
    "other": "#b8b8b8",
}
_STYLE: Any = {  # (matplotlib types its keys as a Literal of every rcParam)
    "svg.fonttype": "none",  # text stays text: small files, crisp in the browser, searchable
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
}


@dataclass
class Chart:
    """One chart: its title, units in its axes, and a reading computed from the data."""

    key: str  # the element id in the page
    title: str
    reading: str
    fig: Any  # matplotlib Figure

    def __post_init__(self) -> None:
        fit(self.fig)

    def svg(self) -> str:
        buf = io.StringIO()
        self.fig.savefig(buf, format="svg")
        text = buf.getvalue()
        text = text[text.index("<svg") :]  # no XML prolog or DOCTYPE inside HTML
        # Scale with the page: keep the viewBox, drop the fixed size.
        head_end = text.index(">")
        head = re.sub(r'\s(width|height)="[^"]*"', "", text[:head_end])
        return f'{head} role="img" aria-label="{_attr(self.title)}"{text[head_end:]}'


def figure(width_in: float = 6.4, height_in: float = 3.0) -> Any:
    """A new figure, and one axes on it (made inside :func:`style`)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), layout=None)
    fig.add_subplot()
    return fig


# Margins from the labels' lengths. Constrained layout measures every text at each draw, about
# 40 % of a report's time; an estimate from the number of characters serves these charts.
_CHAR_PT = 5.4  # average width of a 9 pt DejaVu Sans character
_LINE_PT = 11.0  # one line of 9 pt text


def fit(fig: Any) -> None:
    """Set the figure's margins from its first axes' labels and whether it has a legend on top."""
    w_pt, h_pt = fig.get_size_inches() * 72
    first = fig.axes[0]
    ticks = [t.get_text() for t in first.get_yticklabels()]
    widest = max((len(t) for t in ticks), default=4)
    left = 10 + _CHAR_PT * widest + (_LINE_PT * 1.6 if first.get_ylabel() else 0)
    bottom = 8 + _LINE_PT * (1.4 + 1.3 * bool(first.get_xlabel()))
    top = 10 + (_LINE_PT * 2.0 if fig.legends else 0)
    fig.subplots_adjust(
        left=min(0.6, left / w_pt),
        right=1 - 12 / w_pt,
        bottom=min(0.5, bottom / h_pt),
        top=1 - top / h_pt,
        wspace=0.08,
    )


def style() -> Any:
    """The report's matplotlib settings for a ``with`` block: a caller's own rcParams (in a
    notebook, say) are left as they were."""
    import matplotlib

    return matplotlib.rc_context(_STYLE)


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def pct(fraction: float, digits: int = 0) -> str:
    """0.113 -> '11 %' (the report's way of writing a share)."""
    return f"{fraction * 100:.{digits}f} %"


def money(usd: float) -> str:
    if abs(usd) >= 1e6:
        return f"${usd / 1e6:,.2f}M"
    if abs(usd) >= 1e4:
        return f"${usd / 1e3:,.0f}k"
    return f"${usd:,.0f}"


def duration(seconds: float) -> str:
    from ..units import format_duration

    return format_duration(seconds)
