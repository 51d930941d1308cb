"""One watchfiles watcher over the whole knowledge/ folder, so knowledge bases created,
deleted or copied in are covered without restarting it (a restart would leave a gap).

Events are hints, never trusted: each batch becomes a set of paths per KB, and the
Reindexer stats every one of them (a folder that appeared is scanned whole, a vanished
path is removed). Bursts coalesce: while one batch is indexed, later events pile up in
`pending` and become the next batch. A periodic full reconcile repairs anything missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import watchfiles

from cofferd.domain.errors import CofferError
from cofferd.domain.models import utc_now
from cofferd.infrastructure.docs_tree import is_noise
from cofferd.infrastructure.paths import normalize_relpath
from cofferd.surfaces.core import Coffer

log = logging.getLogger(__name__)

STEP_MS = 30  # quiet time that ends a batch: the main term of save-to-searchable latency
DEBOUNCE_MS = 1000  # longest a burst is grouped before it is handed over
RESTART_DELAY_S = 1.0
RECONCILE_INTERVAL_S = 600.0


@dataclass
class WatcherState:
    running: bool = False
    watching: list[str] = field(default_factory=list)
    last_event_at: str | None = None
    events_seen: int = 0
    restarts: int = 0
    last_error: str | None = None
    busy: bool = False
    last_full_reconcile_at: str | None = None
    last_full_reconcile_s: float | None = None


class Watcher:
    def __init__(
        self,
        coffer: Coffer,
        *,
        reconcile_interval_s: float = RECONCILE_INTERVAL_S,
        step_ms: int = STEP_MS,
        debounce_ms: int = DEBOUNCE_MS,
    ) -> None:
        self.coffer = coffer
        self.reconcile_interval_s = reconcile_interval_s
        self.step_ms = step_ms
        self.debounce_ms = debounce_ms
        self.state = WatcherState()
        self.pending: dict[str, set[str]] = {}
        self._full_requested: set[str] = set()
        self._wake = asyncio.Event()
        self.root = coffer.locations.knowledge_root
        self._stop_watch = asyncio.Event()
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._work_task: asyncio.Task[None] | None = None

    # -- public -----------------------------------------------------------------------

    def start(self, *, full_reconcile: bool = True) -> None:
        self.refresh()
        if full_reconcile:
            self.request_full()
        self._work_task = asyncio.create_task(self._work_loop(), name="watcher-work")
        self._tasks = [
            asyncio.create_task(self._watch_loop(), name="watcher-watch"),
            asyncio.create_task(self._periodic_loop(), name="watcher-periodic"),
        ]

    async def stop(self, grace_s: float = 3.0) -> None:
        """Stop watching; let the batch in flight finish (bounded by `grace_s`)."""
        self._stopping = True
        self._stop_watch.set()
        self.pending.clear()
        self._full_requested.clear()
        self._wake.set()
        for task in self._tasks:
            task.cancel()
        if self._work_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._work_task), grace_s)
            except TimeoutError:
                log.warning("stopping in the middle of a reconcile; it resumes at next start")
                self._work_task.cancel()
        await asyncio.gather(
            *self._tasks, *([self._work_task] if self._work_task else []), return_exceptions=True
        )
        self.state.running = False

    def refresh(self) -> None:
        """Note which KBs are enabled (after one is created, deleted, enabled, disabled)."""
        self.state.watching = sorted(kb.name for kb in self.coffer.kbs.list() if kb.enabled)

    def forget(self, kb: str) -> None:
        """Drop queued work of a KB that is about to be deleted."""
        self.pending.pop(kb, None)
        self._full_requested.discard(kb)

    def request_full(self, kb: str | None = None) -> None:
        self._full_requested.update([kb] if kb else self.state.watching)
        self._wake.set()

    @property
    def queue_depth(self) -> int:
        return sum(len(p) for p in self.pending.values()) + len(self._full_requested)

    def status(self) -> dict[str, Any]:
        s = self.state
        return {
            "healthy": s.running,
            "running": s.running,
            "watching": s.watching,
            "last_event_at": s.last_event_at,
            "events_seen": s.events_seen,
            "restarts": s.restarts,
            "last_error": s.last_error,
            "queue_depth": self.queue_depth,
            "busy": s.busy,
            "last_full_reconcile_at": s.last_full_reconcile_at,
            "last_full_reconcile_s": s.last_full_reconcile_s,
            "reconcile_interval_s": self.reconcile_interval_s,
        }

    # -- loops ------------------------------------------------------------------------

    def _filter(self, change: watchfiles.Change, path: str) -> bool:
        parts = Path(path).relative_to(self.root).parts if path.startswith(str(self.root)) else ()
        if len(parts) >= 2 and parts[1] != "docs" and parts[1] != "kb.yaml":
            return False  # raw/ originals and anything else Coffer keeps beside docs/
        return not any(is_noise(part) for part in parts)

    async def _watch_loop(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        while not self._stopping:
            self._stop_watch.clear()
            try:
                self.state.running = True
                async for changes in watchfiles.awatch(
                    self.root,
                    watch_filter=self._filter,
                    step=self.step_ms,
                    debounce=self.debounce_ms,
                    stop_event=self._stop_watch,
                    ignore_permission_denied=True,
                ):
                    self._enqueue(changes)
                self.state.last_error = None
            except Exception as exc:
                # The watcher must outlive its backend: log, show it in status, start again
                # and repair whatever was missed with a full reconcile.
                log.error("file watcher failed: %s; restarting", exc, exc_info=exc)
                self.state.last_error = f"{type(exc).__name__}: {exc}"
                self.state.restarts += 1
                self.state.running = False
                await asyncio.sleep(RESTART_DELAY_S)
                self.request_full()

    def _enqueue(self, changes: set[tuple[watchfiles.Change, str]]) -> None:
        self.state.last_event_at = utc_now()
        self.state.events_seen += len(changes)
        for _, raw in changes:
            path = Path(raw)
            if not path.is_relative_to(self.root):
                continue
            parts = path.relative_to(self.root).parts
            if not parts:
                continue
            kb = parts[0]
            if len(parts) <= 2:  # a KB folder, its docs/ or kb.yaml appeared or changed
                self._full_requested.add(kb)
            else:
                rel = normalize_relpath("/".join(parts[2:]))
                self.pending.setdefault(kb, set()).add(rel)
        self._wake.set()

    async def _work_loop(self) -> None:
        while not self._stopping:
            await self._wake.wait()
            self._wake.clear()
            while (self.pending or self._full_requested) and not self._stopping:
                self.state.busy = True
                try:
                    if self._full_requested:
                        await self._full_reconcile(self._full_requested.pop())
                    else:
                        kb, paths = self.pending.popitem()
                        await self._guarded(kb, paths)
                finally:
                    self.state.busy = False

    async def _full_reconcile(self, kb: str) -> None:
        started = time.perf_counter()
        self.pending.pop(kb, None)  # a full pass covers them
        await self._guarded(kb, None)
        self.state.last_full_reconcile_at = utc_now()
        self.state.last_full_reconcile_s = round(time.perf_counter() - started, 3)

    async def _guarded(self, kb_name: str, paths: set[str] | None) -> None:
        """Reconcile `paths` of a KB (all of it when None); a failure is logged, not fatal."""
        try:
            kb = self.coffer.kbs.get(kb_name)
        except CofferError:
            return  # not a knowledge base (or deleted meanwhile)
        if not kb.enabled:
            return
        if kb_name not in self.state.watching:
            await self.coffer.kbs.adopt(kb_name)  # copied or synced in from elsewhere
            self.refresh()
        started = time.perf_counter()
        try:
            if paths is None:
                result = await self.coffer.reindexer.reconcile(kb)
                if kb.config.vector_enabled:
                    await self.coffer.embeddings.retry_now(kb.name)
            else:
                result = await self.coffer.reindexer.sync_paths(kb, paths)
            log.debug(
                "%s: %s %s paths in %.3f s: %s",
                kb_name,
                "reconciled" if paths is None else "synced",
                "all" if paths is None else len(paths),
                time.perf_counter() - started,
                result.as_dict(),
            )
        except CofferError as exc:
            log.error("%s: %s", kb_name, exc.message)
        except Exception as exc:
            # An unexpected failure must not end the loop that keeps every KB current:
            # log it, show it in status, and let the next full reconcile repair.
            log.exception("%s: indexing failed", kb_name)
            self.state.last_error = f"{type(exc).__name__}: {exc}"

    async def _periodic_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.reconcile_interval_s)
            with contextlib.suppress(CofferError):
                self.refresh()
            self.request_full()
