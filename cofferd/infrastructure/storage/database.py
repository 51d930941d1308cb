"""The database: one writer thread that owns the only writer connection (so writes are
serialized, as datasette does), and a small pool of reader threads, each with its own
read-only connection (WAL: they never wait on the writer). SQL runs as plain synchronous
functions ``fn(conn)``, so one request is one thread hop however many statements it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TypeVar

from cofferd.domain.errors import IndexRebuilding, StorageError
from cofferd.domain.events import Events, IndexDamaged
from cofferd.infrastructure import memory
from cofferd.infrastructure.storage import cjk_tokens, schema, vec_index
from cofferd.infrastructure.storage.sqlite import (
    CHECKPOINT_PAGES,
    Connection,
    Error,
    Extension,
    atomic,
    checkpoint_every,
    connect,
    damaged,
    storage_failed,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
READERS = 2
# Free pages are given back once there are this many and this share of the file.
RECLAIM_MIN_PAGES = 2048
RECLAIM_SHARE = 0.05
RECLAIM_STEP_PAGES = 1024  # per write: the writer is free in between
EXTENSIONS: tuple[Extension, ...] = (cjk_tokens.load, vec_index.load)  # every connection loads them


class _Worker:
    """Threads that each own one connection; `fn(conn)` runs on one of them."""

    def __init__(self, opener: Callable[[], Connection], threads: int, name: str) -> None:
        self._opener = opener
        self._local = threading.local()
        self._opened: list[Connection] = []
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)

    def _call(self, fn: Callable[[Connection], T]) -> T:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._opener()
            with self._lock:
                self._opened.append(conn)
        return fn(conn)

    async def run(self, fn: Callable[[Connection], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._call, fn)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        with self._lock:
            for conn in self._opened:
                conn.close()
            self._opened.clear()


class Database:
    """One writer connection (all writes serialized) and a few read-only readers (WAL).

    A database that turns out damaged (at open, or on any later read or write) is moved
    aside as `coffer.db.corrupt-<time>` and replaced by an empty one; IndexDamaged is then
    delivered (awaited) so the index is rebuilt from the files. Its files are private
    (0600) whatever the umask: they hold the text of every note.
    """

    def __init__(self, path: Path, events: Events | None = None) -> None:
        self.path = path
        self.events = events or Events()  # tests open a database alone
        self._writer: _Worker | None = None
        self._readers: _Worker | None = None
        self.damage: list[dict[str, str]] = []  # what was moved aside, when, and why
        self._recovering: asyncio.Task[None] | None = None
        self.created = False  # no file was there to open: the index is new

    async def open(self) -> Database:
        try:
            await self._open()
        except Error as exc:
            if not damaged(exc):
                raise
            await self._recover(str(exc))
        return self

    async def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):  # SQLite creates -wal/-shm like the database
            with contextlib.suppress(FileNotFoundError):
                os.chmod(f"{self.path}{suffix}", 0o600)
        if not self.path.exists():
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            self.created = True
        self._writer = _Worker(lambda: connect(self.path, extensions=EXTENSIONS), 1, "db-writer")
        await self._writer.run(schema.migrate)
        self._readers = _Worker(
            lambda: connect(self.path, readonly=True, extensions=EXTENSIONS), READERS, "db-reader"
        )

    def _quarantine(self, reason: str) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{self.path}{suffix}", f"{aside}{suffix}")
        log.error("the index %s is damaged (%s); moved it to %s and rebuilding", self.path,
                  reason, aside)  # fmt: skip
        self.damage.append({"at": stamp, "moved_to": str(aside), "reason": reason[:300]})

    async def check(self) -> None:
        """Read every page (quick_check): damage in the middle shows only on reading. The
        read is background work: in a thread of its own at the lowest CPU priority, so it
        holds up neither a reader nor anything else. A read-only check can report FTS5
        damage that is only writes made meanwhile, so what it finds is checked again on
        the writer, where no write runs beside it."""
        check = _ReadOnlyCheck(self.path)
        try:
            rows = await _in_background(check.run)
        except Error as exc:
            if not damaged(exc):
                raise
            rows = [str(exc)]
        except asyncio.CancelledError:
            check.interrupt()  # the daemon stops: the check must not hold it up
            raise
        if rows != ["ok"]:
            rows = await self.write(_quick_check)
        if rows != ["ok"]:
            await self._damaged("; ".join(rows[:3]))

    async def _damaged(self, reason: str) -> None:
        if self._recovering is None or self._recovering.done():
            self._recovering = asyncio.create_task(self._recover(reason))
        await asyncio.shield(self._recovering)

    async def _recover(self, reason: str) -> None:
        await self._close_workers()
        self._quarantine(reason)
        await self._open()
        await self.events.deliver(IndexDamaged(reason))

    async def _close_workers(self) -> None:
        for worker in (self._readers, self._writer):
            if worker is not None:
                await asyncio.to_thread(worker.close)
        self._readers = self._writer = None

    async def close(self, *, optimize: bool = True) -> None:
        if optimize and self._writer is not None:
            with contextlib.suppress(Error):
                await self._writer.run(lambda c: c.execute("PRAGMA optimize"))
        await self._close_workers()

    async def write(self, fn: Callable[[Connection], T]) -> T:
        if self._writer is None:
            raise IndexRebuilding("the index is not open")
        return await self._run(self._writer, fn)

    async def transact(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` on the writer inside `atomic()`."""

        def run(conn: Connection) -> T:
            with atomic(conn):
                return fn(conn)

        return await self.write(run)

    async def reclaim(self, *, large_work: bool = False, whole: bool = False) -> int:
        """Give the space of deleted rows back to the file system once there is enough of
        it (`whole`: however little there is: after a keyword index's merge, whose old
        pieces are all free pages, 8 MB of a 45 MB cold index), a few MB per write so that
        other writes go on in between (a database made before incremental vacuum is
        converted, VACUUM, the first time); then, or after `large_work` or a bulk load, the
        memory that work left behind back to the OS (and the WAL written back). Bytes
        freed."""
        freed = 0
        while step := await self.write(partial(_reclaim_step, under_way=whole or bool(freed))):
            freed += step
        if freed:
            log.info("gave %.1f MB of the index back to the file system", freed / 1e6)
        # a bulk load has ended (every bulk pass ends here): its WAL written back now, and
        # every ~4 MB again
        was = await self.write(lambda conn: checkpoint_every(conn, CHECKPOINT_PAGES))
        if freed or large_work or was != CHECKPOINT_PAGES:
            await self.write(_give_back_memory)
        return freed

    async def read(self, fn: Callable[[Connection], T]) -> T:
        if self._readers is None:
            raise IndexRebuilding("the index is not open")
        return await self._run(self._readers, fn)

    async def _run(self, worker: _Worker, fn: Callable[[Connection], T]) -> T:
        try:
            return await worker.run(fn)
        except Error as exc:
            if damaged(exc):
                await self._damaged(str(exc))
                raise IndexRebuilding(f"the index was damaged ({exc})") from exc
            if storage_failed(exc):
                raise StorageError(f"the index cannot be written: {exc}") from exc
            raise


def _quick_check(conn: Connection) -> list[str]:
    return [str(r[0]) for r in conn.execute("PRAGMA quick_check")]


class _ReadOnlyCheck:
    """quick_check on a connection of its own, which another thread may interrupt."""

    def __init__(self, path: Path, events: Events | None = None) -> None:
        self.path = path
        self.events = events or Events()  # tests open a database alone
        self._conn: Connection | None = None
        self._interrupted = False

    def run(self) -> list[str]:
        self._conn = connect(self.path, readonly=True, extensions=EXTENSIONS)
        try:
            if self._interrupted:
                return []
            return _quick_check(self._conn)
        finally:
            self._conn.close()

    def interrupt(self) -> None:
        self._interrupted = True
        if self._conn is not None:
            with contextlib.suppress(Error):  # closed meanwhile: the check is over
                self._conn.interrupt()


async def _in_background(fn: Callable[[], T]) -> T:
    """`fn()` in a thread of its own that gives way to every other thread and process."""
    executor = ThreadPoolExecutor(1, "db-background", initializer=_lowest_priority)
    try:
        return await asyncio.get_running_loop().run_in_executor(executor, fn)
    finally:
        executor.shutdown(wait=False)


def _lowest_priority() -> None:
    if sys.platform == "linux":  # a thread's own nice value (elsewhere it is the process's)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def _give_back_memory(conn: Connection) -> None:
    # the WAL written back now (without waiting for readers): the file shrinks at once
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    conn.execute("PRAGMA shrink_memory")  # the writer's page cache
    memory.trim()


def _reclaim_step(conn: Connection, under_way: bool) -> int:
    """Bytes given back by one step (0: nothing left, or, before it is under way, not enough
    free to be worth it)."""
    (free,) = conn.execute("PRAGMA freelist_count").fetchone()
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    if not free or (not under_way and free < max(RECLAIM_MIN_PAGES, pages * RECLAIM_SHARE)):
        return 0
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    (mode,) = conn.execute("PRAGMA auto_vacuum").fetchone()
    if mode != 2:  # made before incremental vacuum: once, the whole file
        log.info("converting the index to give space back as documents go (once)")
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("VACUUM")
        return int(free * page_size)
    conn.execute(f"PRAGMA incremental_vacuum({RECLAIM_STEP_PAGES})").fetchall()
    (left,) = conn.execute("PRAGMA freelist_count").fetchone()
    return int((free - left) * page_size)
