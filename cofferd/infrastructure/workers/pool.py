"""A pool of worker processes that do the daemon's work on content, on every core, off the
serving loop.

Work comes as jobs of units (a unit is a few items, sent to one worker at once); each item
is answered by one reply, and each reply must come within that item's time. A worker over
its time is killed and replaced: its item fails (`WorkFailed`), the rest of its unit goes
to the next worker. A worker that dies is replaced too, and its item tried once more
before it fails (the death may not be the item's doing: the OOM killer, a kill by hand).

Interactive jobs (a save, an API write) are served before bulk jobs (a full reconcile),
and one more worker, started with the pool and kept, serves interactive jobs only: a save
never waits for a worker busy with a reconcile. Jobs of one kind take turns. A job has a
few units in flight at a time, so its consumer (the index writer) sets the pace and memory
stays bounded. The `size` bulk workers start when there is work for them and stop after a
while without any.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from cofferd.domain.errors import EngineUnavailable
from cofferd.infrastructure.workers import frames

log = logging.getLogger(__name__)

Item = TypeVar("Item")

IDLE_S = 30.0  # a worker beyond the first stops after this long without work
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
RESTART_S = 1.0  # after a worker could not start
LARGE_REPLY = 1024 * 1024  # replies larger than this are unpickled off the serving loop
READ_BLOCK = 256 * 1024
WINDOW = 2  # units per worker a job may have in flight or waiting for its consumer
EXPRESS = 0  # the slot that serves interactive jobs only
BULK_NICE = 10  # bulk workers yield the CPU to serving, writing and the express worker
READY = "ready"


@dataclass(frozen=True)
class WorkFailed:
    """An item that got no reply of its own: `reason` says why."""

    reason: str


class WorkerGone(Exception):
    pass


@dataclass
class _Unit(Generic[Item]):
    job: _Job[Item]
    items: Sequence[Item]
    deaths: int = 0  # workers that died on this unit's first item


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


class Worker:
    """One worker process and its pipes."""

    def __init__(
        self, transport: asyncio.SubprocessTransport, proc: asyncio.subprocess.Process
    ) -> None:
        self.transport = transport  # closed with the process, so no pipe outlives it
        self.proc = proc
        assert proc.stdin is not None and proc.stdout is not None
        self.stdin = proc.stdin
        self.stdout = proc.stdout
        self._buffer = bytearray()  # what has arrived of the next replies

    @classmethod
    async def start(cls, module: str, nice: int = 0) -> Worker:
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.subprocess_exec(
            lambda: asyncio.subprocess.SubprocessStreamProtocol(limit=2**16, loop=loop),
            sys.executable, "-m", module,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=None,
        )  # fmt: skip
        worker = cls(transport, asyncio.subprocess.Process(transport, protocol, loop))
        if nice:
            with contextlib.suppress(OSError, AttributeError):  # a lower priority: always allowed
                os.setpriority(os.PRIO_PROCESS, worker.pid, nice)
        try:
            ready = (await worker.receive(START_TIMEOUT_S))[0]
        except BaseException as exc:  # the pool closing, too: never leave a process behind
            await worker.kill()
            if isinstance(exc, TimeoutError | WorkerGone | frames.BrokenStream):
                raise EngineUnavailable(
                    f"a worker process ({module}) could not start: {type(exc).__name__}",
                    engine="workers",
                ) from None
            raise
        if ready != READY:
            await worker.kill()
            raise EngineUnavailable(f"a worker process ({module}) answered {ready!r}")
        return worker

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def send(self, message: Any) -> None:
        try:
            self.stdin.write(frames.encode(message))
            await self.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise WorkerGone from exc

    async def receive(self, timeout: float) -> list[Any]:
        """The replies that have arrived, at least one, within `timeout`. Replies are read
        in bulk (a unit's small ones arrive together): one wake of the loop for many."""
        try:
            async with asyncio.timeout(timeout):
                while not (complete := self._complete()):
                    block = await self.stdout.read(READ_BLOCK)
                    if not block:
                        raise WorkerGone
                    self._buffer += block
        except ConnectionResetError as exc:
            raise WorkerGone from exc
        if sum(map(len, complete)) > LARGE_REPLY:
            return await asyncio.to_thread(lambda: [frames.decode(f) for f in complete])
        return [frames.decode(f) for f in complete]

    def _complete(self) -> list[bytes]:
        """The whole frames in the buffer, taken out of it."""
        found, at = [], 0
        buffer = self._buffer
        while len(buffer) - at >= frames.HEADER.size:
            length = frames.frame_length(bytes(buffer[at : at + frames.HEADER.size]))
            end = at + frames.HEADER.size + length
            if len(buffer) < end:
                break
            found.append(bytes(buffer[at + frames.HEADER.size : end]))
            at = end
        if at:
            del buffer[:at]
        return found

    async def stop(self) -> None:
        """Let it finish and exit (end of its input), or kill it."""
        with contextlib.suppress(OSError):
            self.stdin.close()
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await self.proc.wait()
        except TimeoutError:
            await self.kill()
        self.transport.close()

    async def kill(self) -> int | None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        try:  # a process stuck in the kernel (a dead network mount) dies when it returns
            async with asyncio.timeout(STOP_TIMEOUT_S):
                code = await self.proc.wait()
        except TimeoutError:
            log.warning("worker %d does not exit; left to the kernel", self.pid)
            return None
        self.transport.close()
        return code


@dataclass
class PoolState:
    started: int = 0
    start_error: str | None = None  # why the last worker could not start
    replaced_over_time: int = 0
    replaced_after_death: int = 0
    busy: int = 0


class WorkerPool:
    """`size` workers running `python -m module`, plus the express worker."""

    def __init__(self, module: str, size: int, *, idle_s: float = IDLE_S) -> None:
        if size < 1:
            raise ValueError("a pool needs at least one worker")
        self.module = module
        self.size = size
        self.idle_s = idle_s
        self.state = PoolState()
        self._jobs: list[_Job[Any]] = []
        self._wake = asyncio.Event()
        self._workers: dict[int, Worker] = {}  # by slot
        self._slots: list[asyncio.Task[None]] = []
        self._closing = False

    def start(self) -> None:
        self._slots = [
            asyncio.create_task(self._slot(i), name=f"worker-slot-{i}")
            for i in range(self.size + 1)
        ]

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        for task in self._slots:
            task.cancel()
        await asyncio.gather(*self._slots, return_exceptions=True)
        # nothing of value is in a worker: what it was preparing is prepared again next time
        await asyncio.gather(*(w.kill() for w in self._workers.values()))
        self._workers.clear()

    def status(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "running": len(self._workers),
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
        job: _Job[Item] = _Job(head, 0 if interactive else 1, timeout_of)
        job.pending.extend(_Unit(job, unit) for unit in units if unit)
        self._jobs.append(job)
        self._wake.set()
        try:
            while job.busy():
                done = await job.out.get()
                self._wake.set()  # room in its window: the next unit may go
                if isinstance(done, BaseException):
                    raise done
                for pair in done:
                    yield pair
        finally:
            job.closed = True
            job.pending.clear()
            self._jobs.remove(job)

    # -- the slots: one task per worker it may run ----------------------------------------

    def _pick(self, express: bool) -> _Unit[Any] | None:
        window = WINDOW * (self.size + 1)
        ready = [
            job
            for job in self._jobs
            if job.pending
            and not job.closed
            and job.in_flight + job.out.qsize() < window
            and (job.priority == 0 or not express)
        ]
        if not ready:
            return None
        job = min(ready, key=lambda j: (j.priority, j.served))
        job.served += 1
        job.in_flight += 1  # taken: in flight until its replies are out (or it is put back)
        return job.pending.popleft()

    async def _next(self, express: bool, idle_s: float | None) -> _Unit[Any] | None:
        """The next unit to work on; None after `idle_s` without one."""
        while not self._closing:
            unit = self._pick(express)
            if unit is not None:
                return unit
            self._wake.clear()
            try:
                async with asyncio.timeout(idle_s):
                    await self._wake.wait()
            except TimeoutError:
                return None
        return None

    async def _slot(self, index: int) -> None:
        express = index == EXPRESS  # kept running, so that a save never waits for a start
        while not self._closing:
            if express and index not in self._workers:
                await self._start(index)
            unit = await self._next(express, None if express else self.idle_s)
            if unit is None:
                worker = self._workers.get(index)
                if worker is not None:
                    await worker.stop()  # (if the pool closes meanwhile, close() kills it)
                    del self._workers[index]
                continue
            if index not in self._workers and not await self._start(index, unit.job):
                unit.job.in_flight -= 1
                unit.job.pending.appendleft(unit)
                continue
            await self._work(index, unit)

    async def _start(self, index: int, job: _Job[Any] | None = None) -> bool:
        try:
            self._workers[index] = await Worker.start(
                self.module, 0 if index == EXPRESS else BULK_NICE
            )
        except (EngineUnavailable, OSError) as exc:  # OSError: no process to be had (EMFILE)
            if not isinstance(exc, EngineUnavailable):
                exc = EngineUnavailable(f"a worker process cannot start: {exc}", engine="workers")
            if exc.message != self.state.start_error:  # once, not every second
                log.error("%s", exc.message)
            self.state.start_error = exc.message
            if job is not None:
                job.out.put_nowait(exc)
            await asyncio.sleep(RESTART_S)
            return False
        self.state.started += 1
        self.state.start_error = None
        return True

    async def _work(self, index: int, unit: _Unit[Any]) -> None:
        job, worker = unit.job, self._workers[index]
        self.state.busy += 1
        done: list[tuple[Any, Any]] = []
        try:
            if job.closed:
                return
            await worker.send((job.head, list(unit.items)))
            position = 0
            while position < len(unit.items):
                limit = job.timeout_of(unit.items[position])
                try:
                    replies = await worker.receive(limit)
                except TimeoutError:
                    self.state.replaced_over_time += 1
                    item = unit.items[position]
                    done.append((item, WorkFailed(f"took longer than {limit:g} s to prepare")))
                    self._again(job, unit.items[position + 1 :])
                    await self._drop(index)
                    return
                except (WorkerGone, frames.BrokenStream):
                    await self._died(index, unit, position, done)
                    return
                if position + len(replies) > len(unit.items):  # more than it was asked
                    await self._died(index, unit, position, done)
                    return
                done += zip(unit.items[position : position + len(replies)], replies, strict=True)
                position += len(replies)
        except WorkerGone:
            await self._died(index, unit, 0, done)
        except Exception:  # unforeseen (a message that cannot be sent, a bug): the unit's
            # items are answered all the same, as if its worker had died, and the slot goes on
            log.exception("a worker slot failed on a unit of %d items", len(unit.items))
            await self._died(index, unit, len(done), done)
        finally:
            job.in_flight -= 1
            self.state.busy -= 1
            if done and not job.closed:
                job.out.put_nowait(done)
            self._wake.set()

    async def _died(
        self, index: int, unit: _Unit[Any], position: int, done: list[tuple[Any, Any]]
    ) -> None:
        """The worker died (or spoke out of turn) on the item at `position`: that item is
        tried once more in a new worker, then fails; the rest are done again."""
        code = await self._drop(index)
        self.state.replaced_after_death += 1
        rest = unit.items[position:]
        deaths = unit.deaths + 1 if position == 0 else 1
        if deaths < 2:
            unit.job.pending.appendleft(_Unit(unit.job, rest, deaths))
            return
        log.warning("a worker died twice on the same item (exit %s); skipping it", code)
        done.append((rest[0], WorkFailed(f"its worker process died (exit {code})")))
        self._again(unit.job, rest[1:])

    def _again(self, job: _Job[Any], items: Sequence[Any]) -> None:
        if items:
            job.pending.appendleft(_Unit(job, items))

    async def _drop(self, index: int) -> int | None:
        worker = self._workers.pop(index, None)
        return await worker.kill() if worker is not None else None
