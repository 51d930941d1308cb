"""The database: one writer thread that owns the only writer connection (so writes are
serialized, as datasette does), and a small pool of reader threads, each with its own
read-only connection (WAL: they never wait on the writer). SQL runs as plain synchronous
functions ``fn(conn)``, so one request is one thread hop however many statements it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from cofferd.domain.errors import StorageError
from cofferd.infrastructure import schema
from cofferd.infrastructure.sqlite import Connection, Error, atomic, connect, storage_failed

T = TypeVar("T")
READERS = 2


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
    """One writer connection (all writes serialized) and a few read-only readers (WAL)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer: _Worker | None = None
        self._readers: _Worker | None = None

    async def open(self) -> Database:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = _Worker(lambda: connect(self.path), 1, "db-writer")
        try:
            await self._writer.run(schema.migrate)
        except BaseException:
            self._writer.close()
            self._writer = None
            raise
        self._readers = _Worker(lambda: connect(self.path, readonly=True), READERS, "db-reader")
        return self

    async def close(self, *, optimize: bool = True) -> None:
        if self._readers is not None:
            self._readers.close()
            self._readers = None
        if self._writer is not None:
            if optimize:
                with contextlib.suppress(Error):
                    await self._writer.run(lambda c: c.execute("PRAGMA optimize"))
            self._writer.close()
            self._writer = None

    async def write(self, fn: Callable[[Connection], T]) -> T:
        if self._writer is None:
            raise RuntimeError("database is closed")
        try:
            return await self._writer.run(fn)
        except Error as exc:
            if storage_failed(exc):
                raise StorageError(f"the index cannot be written: {exc}") from exc
            raise

    async def transact(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` on the writer inside `atomic()`."""

        def run(conn: Connection) -> T:
            with atomic(conn):
                return fn(conn)

        return await self.write(run)

    async def read(self, fn: Callable[[Connection], T]) -> T:
        if self._readers is None:
            raise RuntimeError("database is closed")
        return await self._readers.run(fn)
