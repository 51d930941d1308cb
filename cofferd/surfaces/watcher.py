"""One watchfiles watcher over the whole knowledge/ folder, so knowledge bases created,
deleted or copied in are covered without restarting it (a restart would leave a gap).

It only turns file events into paths for the indexing service; what is a document is the
DocumentPolicy's to say (it is the watch filter), and what to do is the service's.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import watchfiles

from cofferd.application.indexing import IndexingService
from cofferd.domain.models import utc_now
from cofferd.infrastructure.document_policy import DocumentPolicy

log = logging.getLogger(__name__)

STEP_MS = 30  # quiet time that ends a batch: the main term of save-to-searchable latency
DEBOUNCE_MS = 1000  # longest a burst is grouped before it is handed over
RESTART_DELAY_S = 1.0


@dataclass
class WatcherState:
    running: bool = False
    last_event_at: str | None = None
    events_seen: int = 0
    restarts: int = 0
    last_error: str | None = None


class Watcher:
    def __init__(
        self,
        policy: DocumentPolicy,
        indexing: IndexingService,
        *,
        step_ms: int = STEP_MS,
        debounce_ms: int = DEBOUNCE_MS,
    ) -> None:
        self.policy = policy
        self.indexing = indexing
        self.root = policy.locations.knowledge_root
        self.step_ms = step_ms
        self.debounce_ms = debounce_ms
        self.state = WatcherState()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch_loop(), name="watcher")

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.state.running = False

    def status(self) -> dict[str, Any]:
        s = self.state
        return {
            "healthy": s.running,
            "running": s.running,
            "watching": [kb.name for kb in self.indexing.kbs.list() if kb.enabled],
            "last_event_at": s.last_event_at,
            "events_seen": s.events_seen,
            "restarts": s.restarts,
            "last_error": s.last_error,
        }

    async def _watch_loop(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        while not self._stop.is_set():
            try:
                self.state.running = True
                async for changes in watchfiles.awatch(
                    self.root,
                    watch_filter=self.policy,
                    step=self.step_ms,
                    debounce=self.debounce_ms,
                    stop_event=self._stop,
                    ignore_permission_denied=True,
                ):
                    self._hand_over(changes)
                self.state.last_error = None
            except Exception as exc:
                # The watcher must outlive its backend: log, show it in status, start again
                # and repair whatever was missed with a full reconcile.
                log.error("file watcher failed: %s; restarting", exc, exc_info=exc)
                self.state.last_error = f"{type(exc).__name__}: {exc}"
                self.state.restarts += 1
                self.state.running = False
                await asyncio.sleep(RESTART_DELAY_S)
                self.indexing.request_full()

    def _hand_over(self, changes: set[tuple[watchfiles.Change, str]]) -> None:
        self.state.last_event_at = utc_now()
        self.state.events_seen += len(changes)
        paths: dict[str, set[str]] = {}
        for _, path in changes:
            where = self.policy.locations.split(path)
            if where is None:
                continue
            kb, relpath = where
            if relpath is None:
                self.indexing.kb_changed(kb)
            else:
                paths.setdefault(kb, set()).add(relpath)
        for kb, relpaths in paths.items():
            self.indexing.paths_changed(kb, relpaths)
