"""A thread asking a daemon for /health while a test makes it work: how long the slowest
answer took is how long the daemon stalled."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from cofferctl.client import Client


class Prober:
    """Asks for /health every 10 ms in a thread; the slowest answer is what counts."""

    def __init__(self, socket: Path) -> None:
        self.client = Client(socket, actor="prober", timeout=120)
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.client.get("/api/v1/health")
            self.latencies.append(time.monotonic() - started)
            self._stop.wait(0.01)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(130)
