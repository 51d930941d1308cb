"""Looking at folders that may not answer: an attached folder on a network mount that went
away blocks every `stat` of it for minutes. A probe runs in a thread of its own, with a
time limit; while one hangs, the next call answers "not known" at once instead of piling
up threads, and the daemon keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

TIMEOUT_S = 2.0


class FsProbe:
    def __init__(self, name: str, timeout_s: float = TIMEOUT_S) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self._running: threading.Thread | None = None
        self.stuck = False  # the last probe did not answer in time

    async def __call__(self, look: Callable[[], T]) -> T | None:
        """What `look()` returns, or None when it does not answer in time (or an earlier
        look still has not). A look that raises OSError answers None too."""
        if self._running is not None and self._running.is_alive():
            return None
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()

        def run() -> None:
            try:
                result: Any = look()
            except OSError:
                result = None
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(_settle, answer, result)

        # a daemon thread: one stuck in the kernel never keeps the daemon from exiting
        self._running = threading.Thread(target=run, name=f"probe-{self.name}", daemon=True)
        self._running.start()
        try:
            result = await asyncio.wait_for(answer, self.timeout_s)
        except TimeoutError:
            if not self.stuck:
                log.warning("%s: the filesystem does not answer (a dead mount?)", self.name)
            self.stuck = True
            return None
        self.stuck = False
        return result  # type: ignore[no-any-return]


def _settle(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)
