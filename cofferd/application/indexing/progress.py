"""Progress of long work per knowledge base (indexing, converting, embedding), for `status` and the
daemon's progress bar: a counter the worker bumps once per batch, read by whoever asks."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from cofferd.domain.models import utc_now

log = logging.getLogger(__name__)

Phase = Literal["indexing", "converting", "embedding"]
UNITS: dict[Phase, str] = {"indexing": "files", "converting": "files", "embedding": "documents"}
# Work this large is logged when it starts and ends; smaller work (a save, the vectors it
# owes) is not an event worth a line at INFO: it is logged at DEBUG.
LOGGED_FROM = 10


@dataclass
class Progress:
    kb: str
    phase: Phase
    total: int
    done: int = 0
    started_at: str = field(default_factory=utc_now)
    started: float = field(default_factory=time.monotonic)

    def advance(self, count: int) -> None:
        self.done += count
        self.total = max(self.total, self.done)

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def rate_per_s(self) -> float:
        elapsed = self.elapsed_s()
        return round(self.done / elapsed, 1) if elapsed > 0 else 0.0

    def eta_s(self) -> float | None:
        """Seconds until done at the rate so far; None before anything is done."""
        elapsed = self.elapsed_s()
        if self.done <= 0 or elapsed <= 0:
            return None
        return round((self.total - self.done) * elapsed / self.done, 1)

    def as_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
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
        log.log(
            _level(progress.total),
            "%s: %s done: %d of %d %s in %.1f s (%.1f/s)",
            progress.kb,
            progress.phase,
            progress.done,
            progress.total,
            UNITS[progress.phase],
            progress.elapsed_s(),
            progress.rate_per_s(),
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
