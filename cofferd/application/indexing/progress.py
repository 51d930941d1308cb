"""Progress of long work per knowledge base (indexing, converting, embedding), for `status` and the
daemon's progress bar: a counter the worker bumps as work completes, read by whoever asks.

The rate is a moving one: each completion pulls it toward the rate since the one before,
by a weight that grows with the time between them (work older than about `RATE_WINDOW_S`
counts little), so a slow start or a stall long past does not hold the estimate back. The
time left is computed at each completion and counts down between them: it never grows
while a batch is running, and moves only when a batch ends.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from coffer_kernel.durations import rate, two_figures
from cofferd.domain.models import utc_now

log = logging.getLogger(__name__)

Phase = Literal["indexing", "converting", "embedding"]
UNITS: dict[Phase, str] = {"indexing": "files", "converting": "files", "embedding": "chunks"}
# Work this large is logged when it starts and ends; smaller work (a save, the vectors it
# owes) is not an event worth a line at INFO: it is logged at DEBUG.
LOGGED_FROM = 10
RATE_WINDOW_S = 30.0
# Completions closer together than this are taken as one (thousands of files a second
# would otherwise make the rate of each a division by almost nothing).
RATE_STEP_S = 0.05


@dataclass
class Progress:
    kb: str
    phase: Phase
    total: int
    done: int = 0
    started_at: str = field(default_factory=utc_now)
    started: float = field(default_factory=time.monotonic)
    _rate: float | None = field(default=None, repr=False)  # per second, moving
    _mark: float | None = field(default=None, repr=False)  # when the rate was last moved
    _since_mark: int = field(default=0, repr=False)  # done since then
    _left: float | None = field(default=None, repr=False)  # seconds left, as of `_left_at`
    _left_at: float = field(default=0.0, repr=False)

    @property
    def unit(self) -> str:
        return UNITS[self.phase]

    def advance(self, count: int, now: float | None = None) -> None:
        """`count` more done (at `now`, monotonic: tests give it)."""
        now = time.monotonic() if now is None else now
        self.done += count
        self.total = max(self.total, self.done)
        self._since_mark += count
        mark = self.started if self._mark is None else self._mark
        since = now - mark
        if since >= RATE_STEP_S and self._since_mark > 0:
            recent = self._since_mark / since
            if self._rate is None:
                self._rate = recent
            else:
                self._rate += (1 - math.exp(-since / RATE_WINDOW_S)) * (recent - self._rate)
            self._mark, self._since_mark = now, 0
        if self._rate:
            self._left, self._left_at = (self.total - self.done) / self._rate, now

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def rate_per_s(self) -> float:
        """The moving rate, to two significant figures (0 before any is known)."""
        return two_figures(self._rate or 0.0)

    def eta_s(self, now: float | None = None) -> float | None:
        """Seconds until done: as estimated at the last completion, less the time since
        (never below 0); None before anything is done."""
        if self._left is None:
            return None
        now = time.monotonic() if now is None else now
        return round(max(self._left - (now - self._left_at), 0.0), 1)

    def as_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "unit": self.unit,
            "done": self.done,
            "total": self.total,
            "rate_per_s": self.rate_per_s(),
            "eta_s": self.eta_s(),
            "started_at": self.started_at,
        }


class ProgressBoard:
    """The work running now, by knowledge base and phase."""

    def __init__(self) -> None:
        self._running: dict[tuple[str, Phase], Progress] = {}

    def get(self, kb: str) -> Progress | None:
        """What `kb` is busy with: indexing first (converting and embedding follow it)."""
        running = self._running
        return (
            running.get((kb, "indexing"))
            or running.get((kb, "converting"))
            or running.get((kb, "embedding"))
        )

    def running(self) -> list[Progress]:
        return list(self._running.values())

    def start(self, kb: str, phase: Phase, total: int) -> Progress:
        progress = Progress(kb, phase, total)
        self._running[(kb, phase)] = progress
        log.log(_level(total), "%s: %s %d %s", kb, phase, total, UNITS[phase])
        return progress

    def finish(self, progress: Progress) -> None:
        key = (progress.kb, progress.phase)
        if self._running.get(key) is progress:
            del self._running[key]
        elapsed = progress.elapsed_s()
        log.log(
            _level(progress.total),
            "%s: %s done: %d of %d %s in %.1f s (%s/s)",
            progress.kb,
            progress.phase,
            progress.done,
            progress.total,
            progress.unit,
            elapsed,
            rate(progress.done / elapsed if elapsed > 0 else 0.0),
        )

    @contextmanager
    def track(self, kb: str, phase: Phase, total: int) -> Iterator[Progress]:
        progress = self.start(kb, phase, total)
        try:
            yield progress
        finally:
            self.finish(progress)


def _level(total: int) -> int:
    return logging.INFO if total >= LOGGED_FROM else logging.DEBUG
