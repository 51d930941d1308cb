"""How long code takes, measured so that a busy machine does not decide."""

from __future__ import annotations

import gc
import time
from typing import Any


def fastest(run: Any, times: int = 3) -> float:
    """The quickest of a few runs, its garbage collector held: what the code costs, not a
    busy machine's pause or a collection that happened to fall in it."""
    best = float("inf")
    gc.disable()
    try:
        for _ in range(times):
            started = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - started)
    finally:
        gc.enable()
    return best
