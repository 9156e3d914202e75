"""How the plan's reports write a few figures that units.py's general formatters write oddly."""

from __future__ import annotations

from ..units import format_duration


def duration(seconds: float) -> str:
    """Like format_duration, but a sliver under a microsecond reads as such, not '0.00681 us'."""
    return "< 1 us" if 0 < seconds < 1e-6 else format_duration(seconds)


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def gpus(count: int) -> str:
    return f"{count:,} GPU" + ("" if count == 1 else "s")


def md_cell(text: str) -> str:
    """A Markdown table cell: a '|' in the text would end the cell."""
    return text.replace("|", "\\|")


def usd(value: float | None) -> str:
    """Whole dollars, or "unknown" where a price is missing (never $0)."""
    return "unknown" if value is None else f"${value:,.0f}"
