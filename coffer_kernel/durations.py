"""Durations as people read them, for the daemon's progress line and cofferctl alike
(standard library only: cofferctl imports it)."""

from __future__ import annotations


def time_left(seconds: float) -> str:
    """`45 s`, `12 min`, `3 h 05 min`."""
    if seconds < 59.5:
        return f"{seconds:.0f} s"
    if seconds < 3570:
        return f"{seconds / 60:.0f} min"
    hours, rest = divmod(round(seconds / 60), 60)
    return f"{hours} h {rest:02d} min"
