"""How Coffer runs work in worker processes (preparing documents, converting them, the
bundled model), off the serving loop: a pool of them. (ripgrep is not a worker: a search
runs it as a bounded subprocess of its own per request, infrastructure.files.grep.)

A pool knows no job: its owner gives it the entry point its workers run and what they may
answer (`WorkerEntry`: the module, imported by the owner, and its own reply allow-list).
Every pool starts its workers the same way (workers.process: isolated from the daemon's
working directory, at a niceness, with an environment), speaks frames (workers.frames)
and holds every job to the same budgets.

Work comes as jobs of units (a unit is a few items, sent to one worker at once); each item
is answered by one reply, and each reply must come within that item's time. A worker over
its time is killed and replaced: its item fails (`WorkFailed`), the rest of its unit goes
to the next worker (a worker found stopped, SIGSTOP, is no fault of its item's: replaced,
the item tried again). A worker that dies, or sends what is not a frame of ours, is
replaced too; its item is blamed only on evidence (a poison pill): when it crashed a fresh
process that had been given nothing else, `tries` times. A death that is not a crash (a
kill from outside: the OOM killer, a kill by hand), or that came while the worker was idle
or starting, is no one's: the item is tried again (up to OUTSIDE_TRIES deaths, then it
fails as `outside`, blamed on nothing). A worker that dies while it waits for work wakes
its slot: it is dropped at once, never listed as running, nor left work it cannot do.
A start that fails is a worker to start again, after a wait that doubles while things
keep failing; a job fails (with why) only once START_TRIES starts in a row have failed.
Anything else that goes wrong in a slot fails its unit's items with a reason; a job always
ends, and so does every job still running when the pool closes (with EngineUnavailable).

Interactive jobs (a save, an API write) are served before bulk jobs (a full reconcile),
and one more worker, started with the pool and kept, serves interactive jobs only: a save
never waits for a worker busy with a reconcile (a pool may have none: `express=False`).
Jobs of one kind take turns. A job has a few units in flight at a time, so its consumer
(the index writer) sets the pace and memory stays bounded. The `size` bulk workers start
when there is work for them and stop after `idle_s` without any; the express worker is
kept (`keep_express`) or stops the same way.

Each slot has a wake of its own, cleared before it looks for work; every slot is woken
whenever work may have become its to take (a job, a unit given back, room in a job's
window, a slot that stops waiting), so no unit waits for a slot that is not looking.

Long on purpose: one scheduler. Which slot takes which unit, when a worker starts, is
lowered, replaced or let go, and how every item is answered once are one set of rules
that hold only together.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from cofferd.domain.errors import EngineUnavailable
from cofferd.infrastructure.workers import frames
from cofferd.infrastructure.workers.process import READY, Worker, WorkerEntry, WorkerGone, crashed

__all__ = [
    "BULK_NICE", "READY", "WorkFailed", "Worker", "WorkerEntry", "WorkerGone", "WorkerPool",
]  # fmt: skip

log = logging.getLogger(__name__)

Item = TypeVar("Item")

IDLE_S = 30.0  # a worker beyond the first stops after this long without work
RESTART_S = 0.25  # the first wait after a failed start or a death; it doubles each time
RESTART_MAX_S = 8.0  # up to this, until a worker answers again
START_TRIES = 6  # starts in a row that fail before a job waiting for one fails (~8 s)
OUTSIDE_TRIES = 8  # deaths from outside an item may see before it fails (blamed on nothing)
WINDOW = 2  # units per worker a job may have in flight or waiting for its consumer
EXPRESS = 0  # the slot that serves interactive jobs only
BULK_NICE = 10  # bulk workers yield the CPU to serving, writing and the express worker
FIRST_UNIT_S = 2.0  # a worker started at full priority is lowered after this long on its first unit


@dataclass(frozen=True)
class WorkFailed:
    """An item that got no reply of its own: `reason` says why, `cause` in one word
    (over its time; its worker died or spoke out of turn; anything else)."""

    reason: str
    cause: Literal["time", "death", "error", "outside"] = "error"


@dataclass
class _Unit(Generic[Item]):
    job: _Job[Item]
    items: Sequence[Item]
    deaths: int = 0  # fresh workers its first item crashed while it was their only one
    outside: int = 0  # workers killed (or stopped) from outside on its first item
    solo: bool = False  # its one item goes to a fresh worker (evidence: see _died)


@dataclass
class _Job(Generic[Item]):
    head: Any
    priority: int
    timeout_of: Callable[[Item], float]
    pending: deque[_Unit[Item]] = field(default_factory=deque)
    out: asyncio.Queue[list[tuple[Item, Any]] | BaseException] = field(
        default_factory=asyncio.Queue
    )
    in_flight: int = 0
    served: int = 0
    closed: bool = False

    def busy(self) -> bool:
        return bool(self.pending or self.in_flight or not self.out.empty())


@dataclass
class PoolState:
    started: int = 0
    starting: int = 0  # processes started that have not said READY yet
    start_error: str | None = None  # why the last worker could not start
    start_failures: int = 0  # starts that failed in a row
    replaced_over_time: int = 0
    replaced_after_death: int = 0
    busy: int = 0


class WorkerPool:
    """`size` workers running `python -m <entry.module> *args`, plus the express worker.

    `nice`: the bulk workers' niceness (the express worker's is 0); `environment`: called
    in a thread before each start, the worker's environment (None: the daemon's; raising
    EngineUnavailable: no worker can start); `tries`: how many workers an item may see
    die before it fails; `interactive_on_bulk`: whether bulk workers serve interactive
    jobs too (when the express worker is busy), or bulk jobs only;
    `first_at_full_priority`: a bulk worker starts at niceness 0 and is lowered to `nice`
    once its first unit is answered, or FIRST_UNIT_S after it was sent (the first file
    after a wait is not kept waiting by a loaded machine; a backlog still yields); `cwd`:
    the folder its workers start in (never the daemon's working directory)."""

    def __init__(
        self,
        entry: WorkerEntry,
        size: int,
        *,
        idle_s: float = IDLE_S,
        express: bool = True,
        keep_express: bool = True,
        nice: int = BULK_NICE,
        args: Sequence[str] = (),
        environment: Callable[[], Mapping[str, str] | None] | None = None,
        tries: int = 2,
        interactive_on_bulk: bool = True,
        first_at_full_priority: bool = False,
        cwd: str = os.sep,
    ) -> None:
        if size < 1:
            raise ValueError("a pool needs at least one worker")
        self.entry = entry
        self.cwd = cwd
        self.size = size
        self.idle_s = idle_s
        self.express = express
        self.keep_express = keep_express
        self.nice = nice
        self.args = tuple(args)
        self.environment = environment
        self.tries = max(1, tries)
        self.interactive_on_bulk = interactive_on_bulk or not express
        self.first_at_full_priority = first_at_full_priority
        self.state = PoolState()
        self._jobs: list[_Job[Any]] = []
        self._wakes = {index: asyncio.Event() for index in range(EXPRESS, size + 1)}  # by slot
        self._workers: dict[int, Worker] = {}  # by slot
        self._waiting: set[int] = set()  # slots whose worker runs and waits for work
        self._full_priority: set[int] = set()  # slots whose worker is not lowered yet
        self._warming = 0  # bulk workers to start before their work comes
        self._slots: list[asyncio.Task[None]] = []
        self._closing = False
        self._trouble = 0  # starts failed and deaths since a worker last answered

    @property
    def started(self) -> bool:
        return bool(self._slots)

    def start(self) -> None:
        if self._slots or self._closing:
            return
        first = EXPRESS if self.express else EXPRESS + 1
        self._slots = [
            asyncio.create_task(self._slot(i), name=f"worker-slot-{i}")
            for i in range(first, self.size + 1)
        ]

    def warm(self, count: int = 1) -> None:
        """Start `count` bulk workers now (up to `size`), work being on its way (they go as
        usual after `idle_s` without any): their start overlaps what comes before the work."""
        if self._closing or any(index != EXPRESS for index in self._workers):
            return
        self._warming = min(count, self.size)
        self.start()
        self._wake_all()

    async def close(self) -> None:
        """Stop every worker at once; every job still running ends (EngineUnavailable).
        Closing twice is closing once."""
        self._closing = True
        self._wake_all()
        for task in self._slots:
            task.cancel()
        await asyncio.gather(*self._slots, return_exceptions=True)
        # nothing of value is in a worker: what it was preparing is prepared again next time
        await asyncio.gather(*(w.kill() for w in self._workers.values()))
        self._workers.clear()
        stopping = EngineUnavailable("cofferd is stopping", engine="workers")
        for job in self._jobs:
            job.pending.clear()
            job.out.put_nowait(stopping)

    def status(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "running": len(self._workers),
            "starting": self.state.starting,
            "busy": self.state.busy,
            "pids": sorted(w.pid for w in self._workers.values()),
            "replaced_over_time": self.state.replaced_over_time,
            "replaced_after_death": self.state.replaced_after_death,
        }

    async def run(
        self,
        head: Any,
        units: Sequence[Sequence[Item]],
        *,
        interactive: bool,
        timeout_of: Callable[[Item], float],
    ) -> AsyncIterator[tuple[Item, Any]]:
        """Each item with its reply (or a WorkFailed), in the order they are ready."""
        if self._closing:
            raise EngineUnavailable("cofferd is stopping", engine="workers")
        self.start()  # (a pool that starts with its first job)
        job: _Job[Item] = _Job(head, 0 if interactive else 1, timeout_of)
        job.pending.extend(_Unit(job, unit) for unit in units if unit)
        self._jobs.append(job)
        self._wake_all()
        try:
            while job.busy() and not self._closing:
                done = await job.out.get()
                self._wake_all()  # room in its window: the next unit may go
                if isinstance(done, BaseException):
                    raise done
                for pair in done:
                    yield pair
            if self._closing and job.busy():  # closed while this job waited for nothing
                raise EngineUnavailable("cofferd is stopping", engine="workers")
        finally:
            job.closed = True
            job.pending.clear()
            self._jobs.remove(job)

    async def ask(self, head: Any, item: Any, *, interactive: bool, timeout_s: float) -> Any:
        """The reply to one item, or its WorkFailed."""
        pairs = self.run(head, [[item]], interactive=interactive, timeout_of=lambda _: timeout_s)
        (reply,) = [reply async for _item, reply in pairs]  # every item is answered once
        return reply

    # -- the slots: one task per worker it may run ----------------------------------------

    def _wake_all(self) -> None:
        for wake in self._wakes.values():
            wake.set()

    def _stop_waiting(self, index: int) -> None:
        if index in self._waiting:
            self._waiting.discard(index)
            self._wake_all()  # a slot that left work to it takes it now

    def _takes(self, slot: int, job: _Job[Any]) -> bool:
        """Whether the worker of `slot` may serve `job` (the express one: saves only)."""
        return (
            job.priority == 0 if slot == EXPRESS else self.interactive_on_bulk or job.priority > 0
        )

    def _pick(self, index: int) -> _Unit[Any] | None:
        """The next unit for the worker of slot `index`; a slot with no worker running
        leaves a unit to a worker that runs and waits (no process started for it)."""
        window = WINDOW * (self.size + 1)
        ready = [
            job
            for job in self._jobs
            if job.pending
            and not job.closed
            and job.in_flight + job.out.qsize() < window
            and self._takes(index, job)
        ]
        if index not in self._workers:
            ready = [job for job in ready if not any(self._takes(s, job) for s in self._waiting)]
        if not ready:
            return None
        job = min(ready, key=lambda j: (j.priority, j.served))
        job.served += 1
        job.in_flight += 1  # taken: in flight until its replies are out (or it is put back)
        return job.pending.popleft()

    async def _next(self, index: int, idle_s: float | None) -> _Unit[Any] | None:
        """The next unit to work on; None after `idle_s` without one, or once the worker
        that waited for it has died (dropped: another starts for the next unit, the
        express one at once)."""
        wake = self._wakes[index]
        idle_until = None if idle_s is None else asyncio.get_running_loop().time() + idle_s
        try:
            while not self._closing:
                wake.clear()  # before it looks: what happens from now on wakes it
                worker = self._workers.get(index)
                if worker is not None and worker.exited():
                    self._stop_waiting(index)
                    await self._drop_dead(index)
                    return None
                unit = self._pick(index)
                if unit is not None:
                    if any(job.pending for job in self._jobs):
                        self._wake_all()  # what is left may go to another worker
                    return unit
                if index in self._workers:
                    self._waiting.add(index)
                elif self._warming and index != EXPRESS:
                    return None  # (its turn starts the worker)
                try:
                    async with asyncio.timeout_at(idle_until):  # (woken or not)
                        await wake.wait()  # (its worker's death wakes it too: _start)
                except TimeoutError:
                    return None
            return None
        finally:
            self._stop_waiting(index)

    async def _slot(self, index: int) -> None:
        """Serve units for as long as the pool runs: nothing that goes wrong in one ends
        the slot (its pool would lose a worker, and a job waiting on it would never end)."""
        while not self._closing:
            try:
                await self._turn(index)
            except Exception:  # a bug: logged, the worker dropped, the slot goes on
                log.exception("worker slot %d failed; it goes on", index)
                await self._drop(index)
                await asyncio.sleep(RESTART_S)

    async def _turn(self, index: int) -> None:
        express = index == EXPRESS
        kept = express and self.keep_express  # kept running: a save never waits for a start
        if kept and index not in self._workers:
            await self._start(index)
        elif self._warming and not express and index not in self._workers:
            self._warming -= 1
            await self._start(index)
        unit = await self._next(index, None if kept else self.idle_s)
        if unit is None:
            worker = self._workers.pop(index, None)
            if worker is not None:
                await worker.stop()  # (if the pool closes meanwhile, close() kills it)
            return
        try:
            worker = self._workers.get(index)
            if worker is not None and worker.exited():
                await self._drop_dead(index)
            elif worker is not None and unit.solo and worker.served:
                await self._drop(index)  # its item alone in a fresh worker
            started = index in self._workers or await self._start(index, unit.job)
        except BaseException:
            self._give_back(unit)
            raise
        if not started:
            self._give_back(unit)
            return
        await self._work(index, unit)

    def _give_back(self, unit: _Unit[Any]) -> None:
        """A unit taken but not sent (its worker could not start): pending again, first,
        and every slot woken (one that left it to this slot may take it now)."""
        unit.job.in_flight -= 1
        unit.job.pending.appendleft(unit)
        self._wake_all()

    def _backoff(self) -> float:
        return min(RESTART_S * 2 ** (self._trouble - 1), RESTART_MAX_S) if self._trouble else 0

    async def _start(self, index: int, job: _Job[Any] | None = None) -> bool:
        """Start the worker of `index`, after the wait that trouble asks for. A start that
        fails fails `job` only once START_TRIES have failed in a row."""
        if self._trouble:
            await asyncio.sleep(self._backoff())
        try:
            env = await asyncio.to_thread(self.environment) if self.environment else None
            full = index == EXPRESS or self.first_at_full_priority
            self.state.starting += 1
            try:
                self._workers[index] = await Worker.start(
                    self.entry, 0 if full else self.nice, self.args, env, self.cwd
                )
            finally:
                self.state.starting -= 1
            self._workers[index].when_exited(self._wakes[index].set)
            if index != EXPRESS and self.first_at_full_priority:
                self._full_priority.add(index)
        except Exception as exc:  # noqa: BLE001 - OSError (EMFILE), its environment, any
            if not isinstance(exc, EngineUnavailable):
                reason = f"a worker process cannot start: {type(exc).__name__}: {exc}"
                exc = EngineUnavailable(reason[:300], engine="workers")
            if exc.message != self.state.start_error:  # once, not every second
                log.warning("%s; another is started", exc.message)  # (killed while starting)
            self.state.start_error = exc.message
            self.state.start_failures += 1
            if self.state.start_failures == START_TRIES:  # not a passing thing
                log.error("%s, %d times in a row", exc.message, START_TRIES)
            self._trouble += 1
            if job is not None and self.state.start_failures >= START_TRIES:
                job.out.put_nowait(exc)
            return False
        self.state.started += 1
        self.state.start_error = None
        self.state.start_failures = 0
        return True

    async def _work(self, index: int, unit: _Unit[Any]) -> None:
        job, worker = unit.job, self._workers[index]
        self.state.busy += 1
        done: list[tuple[Any, Any]] = []
        lowering = None
        if index in self._full_priority:
            loop = asyncio.get_running_loop()
            lowering = loop.call_later(FIRST_UNIT_S, self._lower, index, worker)
        fresh = not worker.served  # nothing was done in it before this unit
        try:
            if job.closed:
                return
            try:
                await worker.send((job.head, list(unit.items)))
            except WorkerGone:  # it died before it took the unit: no item's doing
                await self._lost(index, unit)
                return
            position = 0
            while position < len(unit.items):
                limit = job.timeout_of(unit.items[position])
                try:
                    replies = await worker.receive(limit)
                except TimeoutError:
                    if worker.stopped():  # frozen from outside, not by its item
                        await self._died(index, unit, position, done, fresh, outside=True)
                        return
                    self.state.replaced_over_time += 1
                    item = unit.items[position]
                    done.append((item, WorkFailed(f"took longer than {limit:g} s", "time")))
                    self._again(job, unit.items[position + 1 :])
                    await self._drop(index)
                    return
                except WorkerGone:
                    await self._died(index, unit, position, done, fresh)
                    return
                except frames.BrokenStream as exc:
                    await self._died(index, unit, position, done, fresh, f"sent {exc}")
                    return
                if position + len(replies) > len(unit.items):  # more than it was asked
                    await self._died(index, unit, position, done, fresh, "answered out of turn")
                    return
                self._trouble = 0
                done += zip(unit.items[position : position + len(replies)], replies, strict=True)
                position += len(replies)
        except Exception as exc:  # unforeseen (a message that cannot be sent, a bug): the
            # unit's items are answered all the same, with the reason, and the slot goes on
            log.exception("a worker slot failed on a unit of %d items", len(unit.items))
            await self._drop(index)
            reason = f"its worker could not be used: {type(exc).__name__}"
            done += [(item, WorkFailed(reason)) for item in unit.items[len(done) :]]
        finally:
            if lowering is not None:
                lowering.cancel()
                self._lower(index, worker)
            job.in_flight -= 1
            self.state.busy -= 1
            if done and not job.closed:
                job.out.put_nowait(done)
            self._wake_all()

    async def _lost(self, index: int, unit: _Unit[Any]) -> None:
        """The worker was gone before it took `unit`: replaced, the unit given again."""
        await self._drop_dead(index)
        unit.job.pending.appendleft(unit)

    async def _died(
        self,
        index: int,
        unit: _Unit[Any],
        position: int,
        done: list[tuple[Any, Any]],
        fresh: bool,
        how: str = "",
        *,
        outside: bool = False,
    ) -> None:
        """The worker died (or spoke out of turn, or was found stopped: `outside`) on the
        item at `position`; the rest of the unit is done again. A crash is evidence
        against the item only when it was the first item of a `fresh` worker: the item
        goes alone to a fresh worker until it has crashed `tries` of them, then fails. A
        death that is no crash (killed or stopped from outside) is no evidence: the item
        is tried again, up to OUTSIDE_TRIES times."""
        job = unit.job
        code = await self._drop(index)
        self.state.replaced_after_death += 1
        rest = unit.items[position:]
        item = rest[0]
        deaths, outsides = (unit.deaths, unit.outside) if position == 0 else (0, 0)
        if outside or not (how or crashed(code)):
            self._trouble += 1
            outsides += 1
            if outsides < OUTSIDE_TRIES:
                job.pending.appendleft(_Unit(job, rest, deaths, outsides, unit.solo))
                return
            how = f"was {'stopped' if outside else 'killed'} from outside {outsides} times"
            log.warning("its worker process %s (exit %s) on the same item", how, code)
            done.append((item, WorkFailed(f"its worker process {how}", "outside")))
            self._again(job, rest[1:])
            return
        if fresh and position == 0:
            deaths += 1
        self._again(job, rest[1:])
        if deaths < self.tries:
            job.pending.appendleft(_Unit(job, [item], deaths, outsides, solo=True))
            return
        reason = f"its worker process {how or 'died'} (exit {code})"
        log.warning("%s on the same item, alone in a new process, %d times; skipping it",
                    reason, deaths)  # fmt: skip
        done.append((item, WorkFailed(reason, "death")))

    def _again(self, job: _Job[Any], items: Sequence[Any]) -> None:
        if items:
            job.pending.appendleft(_Unit(job, items))

    def _lower(self, index: int, worker: Worker) -> None:
        """The worker of `index`, started at full priority, lowered to the pool's nice."""
        if index in self._full_priority and self._workers.get(index) is worker:
            self._full_priority.discard(index)
            worker.lower(self.nice)

    async def _drop_dead(self, index: int) -> None:
        """Its worker died before it took work (while it waited, or as a unit was sent):
        replaced, no item's doing."""
        self.state.replaced_after_death += 1
        self._trouble += 1
        await self._drop(index)

    async def _drop(self, index: int) -> int | None:
        self._full_priority.discard(index)
        worker = self._workers.pop(index, None)
        return await worker.kill() if worker is not None else None
