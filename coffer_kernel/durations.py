"""Durations and rates as people read them, for the daemon's progress line and cofferctl
alike (standard library only: cofferctl imports it)."""

from __future__ import annotations


def time_left(seconds: float) -> str:
    """`45 s`, `12 min`, `3 h 05 min`."""
    if seconds < 59.5:
        return f"{seconds:.0f} s"
    if seconds < 3570:
        return f"{seconds / 60:.0f} min"
    hours, rest = divmod(round(seconds / 60), 60)
    return f"{hours} h {rest:02d} min"


def two_figures(value: float) -> float:
    """`value` rounded to two significant figures (0.0213 -> 0.021, 1234 -> 1200)."""
    return float(f"{value:.2g}") if value else 0.0


def rate(value: float) -> str:
    """A rate with two significant figures, as people write it: `0.021`, `4.5`, `1,200`."""
    rounded = two_figures(value)
    if rounded >= 10:
        return f"{rounded:,.0f}"
    return f"{rounded:.2g}" if rounded else "0"
