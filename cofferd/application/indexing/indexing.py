"""Keeping every knowledge base current: the queue of changed paths, coalescing, adopting KB
folders that appear, the start-up and periodic full reconciles, and all the background work
that must go on by itself: the embedding queue, the periodic jobs it is handed (the trash
purge), and restarting whatever runs a session (the file watcher) when it ends. It owns
every retry and its timing.

File events are hints, never trusted: the watcher hands over paths, and the Reindexer
stats every one of them (a folder that appeared is scanned whole, a vanished path is
removed). Bursts coalesce: while one batch is indexed, later paths pile up and become the
next batch. A periodic full reconcile repairs anything the events missed.

A pass that fails stays failing until a whole pass succeeds (a save indexed meanwhile does
not make it right), and a whole pass is tried again a few seconds later, later each time it
fails in a row. What a KB is owed (its first pass, a pass asked for, paths queued) is said
by `owed`: status is `ok` only when nothing is.

Knowledge bases are indexed side by side, each by a runner of its own: a save in one is
never queued behind another's full reconcile. Within one, changed paths go before a full
reconcile that is waiting (it would cover them, but much later).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cofferd.application.indexing.conversion_queue import Conversions
from cofferd.application.indexing.embeddings import Embeddings
from cofferd.application.indexing.knowledge_bases import KnowledgeBases
from cofferd.application.indexing.reindexer import Reindexer
from cofferd.domain.errors import CofferError, KBUnavailable, StorageError
from cofferd.domain.models import utc_now

log = logging.getLogger(__name__)

RECONCILE_INTERVAL_S = 600.0
EMBED_RECHECK_S = 15.0  # the embedding queue looks for retries that came due this often
RETRY_S = (2.0, 5.0, 15.0, 30.0, 60.0)  # after a pass failed: a whole pass, until it works
RESTART_S = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0)  # a session that fails in a row
STABLE_S = 60.0  # a session that ran this long before failing starts again at once
FIRST_PASSES_POLL_S = 0.25


@dataclass(frozen=True)
class PeriodicJob:
    """Work the service runs every `interval_s` (first at start when `at_start`) until it
    stops; a failure of the storage or the files is logged and tried again next time."""

    name: str
    interval_s: float
    run: Callable[[], Any]
    at_start: bool


@dataclass
class IndexingState:
    busy: set[str] = field(default_factory=set)  # KBs being indexed now
    last_error: str | None = None
    last_full_reconcile_at: str | None = None
    last_full_reconcile_s: float | None = None
    passed: set[str] = field(default_factory=set)  # KBs whose whole pass ended, done or not
    failing: dict[str, str] = field(default_factory=dict)  # KB -> why its last pass failed
    # KB -> why its folder could not be used at its last pass: not a failure of indexing
    # (status asks the boundary itself, and says it once), only logged once
    unavailable: dict[str, str] = field(default_factory=dict)
    retries: dict[str, int] = field(default_factory=dict)  # KB -> failed passes in a row
    retry_due: dict[str, asyncio.TimerHandle] = field(default_factory=dict)  # KB -> its retry
    asked: set[str] = field(default_factory=set)  # KBs a whole pass was asked for (not a sweep)
    sweeping: set[str] = field(default_factory=set)  # KBs in a periodic check, nothing owed


class IndexingService:
    def __init__(
        self,
        kbs: KnowledgeBases,
        reindexer: Reindexer,
        embeddings: Embeddings,
        conversions: Conversions | None = None,
        *,
        jobs: Sequence[PeriodicJob] = (),
        reconcile_interval_s: float = RECONCILE_INTERVAL_S,
    ) -> None:
        self.kbs = kbs
        self.reindexer = reindexer
        self.embeddings = embeddings
        self.conversions = conversions
        self.jobs = tuple(jobs)  # run by it, beside the periodic full reconcile
        self.reconcile_interval_s = reconcile_interval_s
        self.state = IndexingState()
        self.pending: dict[str, set[str]] = {}
        self._full: set[str] = set()
        self._runners: dict[str, asyncio.Task[None]] = {}
        self._started = False
        self._stopping = False
        self._background: list[asyncio.Task[None]] = []

    # -- what the watcher and the API tell it ---------------------------------------------

    def paths_changed(self, kb: str, relpaths: Iterable[str]) -> None:
        self.pending.setdefault(kb, set()).update(relpaths)
        self._run(kb)

    def request_full(self, kb: str | None = None) -> None:
        """Reconcile a KB whole (every KB when None), its settings read again first: its
        folder, docs/ or settings file appeared, changed or vanished. It is owed until the
        pass ends."""
        for name in [kb] if kb else [k.name for k in self.kbs.list()]:
            self.state.asked.add(name)
            self._full.add(name)
            self._run(name)

    def sweep(self) -> None:
        """The periodic check of every KB whole: nothing is known to be owed (it repairs
        what the file events missed)."""
        for name in [k.name for k in self.kbs.list()]:
            self._full.add(name)
            self._run(name)

    def _run(self, kb: str) -> None:
        """Make sure the KB's runner is at work (it ends when its queue is empty)."""
        runner = self._runners.get(kb)
        if self._started and not self._stopping and (runner is None or runner.done()):
            self._runners[kb] = asyncio.create_task(self._runner(kb), name=f"indexing-{kb}")

    def forget(self, kb: str) -> None:
        """Drop queued work of a KB that is about to be deleted."""
        self.pending.pop(kb, None)
        self._full.discard(kb)
        self._clear(kb)
        self.state.passed.discard(kb)
        self.state.asked.discard(kb)

    def problems(self) -> dict[str, str]:
        """KB -> why its last pass failed, until a whole pass succeeds (a folder away or
        refused is not a failure of indexing: the boundary says so, at the moment it is
        asked)."""
        return dict(self.state.failing)

    def owed(self, kb: str) -> bool:
        """Whether indexing knows it owes `kb` work: its first whole pass since the start,
        a whole pass asked for (queued or under way), changed paths queued or being synced,
        or a retry after a failure. A periodic check is not owed work (what it finds to do
        shows on the progress board)."""
        s = self.state
        return (
            kb not in s.passed
            or bool(self.pending.get(kb))
            or kb in s.asked
            or kb in s.retry_due
            or (kb in s.busy and kb not in s.sweeping)
        )

    def _failed(self, name: str, exc: BaseException) -> None:
        message = exc.message if isinstance(exc, CofferError) else f"{type(exc).__name__}: {exc}"
        if isinstance(exc, KBUnavailable):
            self.state.failing.pop(name, None)  # whatever failed before, the folder is away
            if self.state.unavailable.get(name) != message:  # logged once, not every retry
                log.warning("%s: %s", name, message)
            self.state.unavailable[name] = message
            return
        if self.state.failing.get(name) != message:  # logged once, not every retry
            log.error("%s: %s", name, message)
        self.state.failing[name] = message

    def _clear(self, name: str) -> None:
        """Nothing of the KB's earlier passes is reported any more: a whole pass succeeded
        (or the KB is gone)."""
        for known in (self.state.failing, self.state.retries, self.state.unavailable):
            known.pop(name, None)
        if (due := self.state.retry_due.pop(name, None)) is not None:
            due.cancel()

    def _retry(self, name: str) -> None:
        """A whole pass again a little later (later each time in a row), once: a pass
        failed (a disk full or read-only, a folder away, a helper process that died)."""
        if name in self.state.retry_due or self._stopping:
            return
        attempt = self.state.retries.get(name, 0)
        self.state.retries[name] = attempt + 1
        delay = RETRY_S[min(attempt, len(RETRY_S) - 1)]

        def again() -> None:
            self.state.retry_due.pop(name, None)
            self.request_full(name)

        self.state.retry_due[name] = asyncio.get_running_loop().call_later(delay, again)

    # -- life -----------------------------------------------------------------------------

    def start(self, *, full_reconcile: bool = True) -> None:
        self._started = True
        if full_reconcile:
            self.request_full()
        for kb in {*self.pending, *self._full}:  # asked for before the start
            self._run(kb)
        for job in (
            PeriodicJob("periodic-reconcile", self.reconcile_interval_s, self.sweep, False),
            *self.jobs,
        ):
            self._every(job)
        self._spawn("embeddings", self._embedding())
        if self.conversions is not None:
            self._spawn("conversions", self.conversions.run())

    def supervise(
        self,
        name: str,
        session: Callable[[], Awaitable[None]],
        adapt: Callable[[BaseException], bool] = lambda exc: False,
    ) -> None:
        """Run `session` (a watch of the files, say) again and again until the service
        stops; each asks for the full reconcile that covers what no session saw, once it
        is under way (`request_full`). After a failure it starts again a little later (at
        once when `adapt`, told of the failure, says it changed how the session runs),
        later each time it fails in a row."""
        self._spawn(name, self._supervised(session, adapt))

    def _spawn(self, name: str, work: Awaitable[None]) -> None:
        self._background.append(asyncio.ensure_future(work))
        self._background[-1].set_name(name)

    def _every(self, job: PeriodicJob) -> None:
        async def repeat() -> None:
            if not job.at_start:
                await asyncio.sleep(job.interval_s)
            while not self._stopping:
                try:
                    outcome = job.run()
                    if asyncio.iscoroutine(outcome):
                        await outcome
                except (CofferError, OSError) as exc:  # tried again next time; logged now
                    log.error("%s failed: %s", job.name, exc)
                await asyncio.sleep(job.interval_s)

        self._spawn(job.name, repeat())

    async def _supervised(
        self, session: Callable[[], Awaitable[None]], adapt: Callable[[BaseException], bool]
    ) -> None:
        failures = 0
        while not self._stopping:
            started = time.monotonic()
            try:
                await session()
                failures = 0
            except Exception as exc:  # noqa: BLE001 - whatever ends it, it must run again
                if time.monotonic() - started > STABLE_S:
                    failures = 0
                if not adapt(exc):
                    await asyncio.sleep(RESTART_S[min(failures, len(RESTART_S) - 1)])
                    failures += 1

    async def _embedding(self) -> None:
        """The embedding queue: a batch per KB that owes vectors, then a wait until woken
        (new documents, a new model) or until retries may have come due."""
        while not self._stopping:
            try:
                worked = await self.embeddings.run_once()
            except CofferError as exc:
                log.error("embedding: %s", exc.message)
                worked = False
            except Exception:
                log.exception("embedding queue failed; retrying shortly")
                worked = False
            if not worked:
                await self.embeddings.wanted(EMBED_RECHECK_S)

    async def stop(self, grace_s: float = 1.0) -> None:
        """Stop; let the batches in flight finish (bounded by `grace_s`)."""
        self._stopping = True
        self.pending.clear()
        self._full.clear()
        for due in self.state.retry_due.values():
            due.cancel()
        for task in self._background:
            task.cancel()
        runners = [t for t in self._runners.values() if not t.done()]
        if runners:
            _, cut = await asyncio.wait(runners, timeout=grace_s)
            if cut:
                log.warning("stopping in the middle of a reconcile; it resumes at next start")
                for task in cut:
                    task.cancel()
        await asyncio.gather(*self._runners.values(), *self._background, return_exceptions=True)
        await self.reindexer.upkeep_done(grace_s)

    @property
    def queue_depth(self) -> int:
        return sum(len(p) for p in self.pending.values()) + len(self._full)

    def first_pass_pending(self, kb: str) -> bool:
        """Whether `kb` waits for its first whole pass since the daemon started (or since it
        was made): its index may lack files. A pass that could not end well (a failure, a
        folder away) is not waited for: status says why."""
        return kb not in self.state.passed

    async def first_passes(self) -> None:
        """Wait until every enabled KB's first whole pass since the start has ended (well
        or not: a failure or a folder away is not waited for)."""
        while any(self.first_pass_pending(kb.name) for kb in self.kbs.list() if kb.enabled):
            await asyncio.sleep(FIRST_PASSES_POLL_S)

    def startup_done(self) -> bool:
        """Every enabled KB has been tried whole since the daemon started: reconciled, or
        its pass ended by a folder away or refused, or a failure (status says which)."""
        return all(kb.name in self.state.passed for kb in self.kbs.list() if kb.enabled)

    def status(self) -> dict[str, Any]:
        s = self.state
        return {
            "queue_depth": self.queue_depth,
            "busy": bool(s.busy),
            "last_error": s.last_error,
            "last_full_reconcile_at": s.last_full_reconcile_at,
            "last_full_reconcile_s": s.last_full_reconcile_s,
            "reconcile_interval_s": self.reconcile_interval_s,
        }

    # -- the work -------------------------------------------------------------------------

    async def _runner(self, kb: str) -> None:
        """Index one KB until nothing is asked of it: changed paths first."""
        while not self._stopping and (self.pending.get(kb) or kb in self._full):
            self.state.busy.add(kb)
            try:
                if self.pending.get(kb):
                    await self._reconcile(kb, self.pending.pop(kb))
                else:
                    self._full.discard(kb)
                    if kb not in self.state.asked and kb in self.state.passed:
                        self.state.sweeping.add(kb)
                    self.state.asked.discard(kb)  # asked again meanwhile: owed again
                    await self._reconcile(kb, None)
                    self.state.passed.add(kb)
            finally:
                self.state.busy.discard(kb)
                self.state.sweeping.discard(kb)

    async def _reconcile(self, name: str, paths: set[str] | None) -> None:
        """Reconcile `paths` of a KB (all of it when None). A failure is logged and shown in
        status until a whole pass succeeds, and a whole pass is tried again soon; it never
        ends the loop that keeps every other KB current."""
        started = time.perf_counter()
        try:
            if paths is None:
                self.pending.pop(name, None)  # a full pass covers them
                kb = await self.kbs.adopt(name)  # its settings may have changed
            else:
                kb = self.kbs.registry.get(name)
            if kb is None or not kb.enabled:
                return
            if paths is None:
                change = self.kbs.pass_began(name)
                result = await self.reindexer.reconcile(kb)
                self.kbs.pass_ended(name, change)
                if kb.config.vector_enabled:
                    await self.embeddings.retry_now(kb.name)
                if self.conversions is not None:
                    await self.conversions.prune(kb.name)
                self.state.last_full_reconcile_at = utc_now()
                self.state.last_full_reconcile_s = round(time.perf_counter() - started, 3)
            else:
                result = await self.reindexer.sync_paths(kb, paths)
            if paths is None:
                self._clear(name)
            else:  # the folder answers again; what failed before is still owed
                self.state.unavailable.pop(name, None)
            log.debug(
                "%s: %s in %.3f s: %s",
                name,
                "reconciled" if paths is None else f"synced {len(paths)} paths",
                time.perf_counter() - started,
                result.as_dict(),
            )
        except (StorageError, KBUnavailable) as exc:  # the disk or the folder may come back
            self._failed(name, exc)
            self._retry(name)
        except (CofferError, OSError) as exc:  # a helper process died, a file refused...
            self._failed(name, exc)
            self._retry(name)
        except Exception as exc:
            # Unexpected: logged with its traceback and shown in status; the whole pass
            # tried again soon repairs what this pass missed.
            log.exception("%s: indexing failed", name)
            self.state.last_error = self.state.failing[name] = f"{type(exc).__name__}: {exc}"
            self._retry(name)
