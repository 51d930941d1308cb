"""cofferd in the foreground on a terminal: one line showing long work (the start-up
reconcile, embedding catch-up) with counts, a rate and the time left. It reads the progress
board a few times a second, so the work itself pays nothing for it; log lines clear it
first."""

from __future__ import annotations

import asyncio
import logging
import shutil
from typing import TextIO

from coffer_kernel.durations import rate, time_left
from cofferd.application.indexing.progress import Progress, ProgressBoard

REDRAW_S = 0.25
SHOW_AFTER_S = 0.5  # work shorter than this never flashes a bar
BAR_CELLS = 20
CLEAR = "\r\x1b[K"


def render(running: list[Progress], width: int) -> str:
    parts = []
    for p in running:
        filled = BAR_CELLS * p.done // p.total if p.total else BAR_CELLS
        bar = "#" * filled + "." * (BAR_CELLS - filled)
        eta = p.eta_s()
        left = f", {time_left(eta)} left" if eta is not None and p.done < p.total else ""
        parts.append(
            f"{p.kb} {p.phase} [{bar}] {p.done:,}/{p.total:,} {p.unit}, "
            f"{rate(p.rate_per_s())}/s{left}"
        )
    line = "cofferd: " + " | ".join(parts)
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"


class ProgressBar:
    def __init__(self, board: ProgressBoard, stream: TextIO) -> None:
        self.board = board
        self.stream = stream
        self.shown = False

    def clear(self) -> None:
        if self.shown:
            self.stream.write(CLEAR)
            self.stream.flush()
            self.shown = False

    def draw(self) -> None:
        running = [p for p in self.board.running() if p.elapsed_s() >= SHOW_AFTER_S]
        if not running:
            self.clear()
            return
        width = shutil.get_terminal_size().columns - 1
        self.stream.write(CLEAR + render(running, width))
        self.stream.flush()
        self.shown = True

    async def run(self) -> None:
        try:
            while True:
                self.draw()
                await asyncio.sleep(REDRAW_S)
        finally:
            self.clear()


class BarAwareHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes log lines on a line of their own, below no half-drawn bar."""

    bar: ProgressBar | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.bar is not None:
            self.bar.clear()
        super().emit(record)


def show_progress(board: ProgressBoard, stream: TextIO) -> ProgressBar:
    """A bar on `stream`, which the log handlers writing to it clear before each line."""
    bar = ProgressBar(board, stream)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, BarAwareHandler):
            handler.bar = bar
    return bar
