"""The one module that opens SQLite: driver choice, pragmas, one writer, read-only readers.

The driver is ``sqlean`` (SQLite >= 3.50 with extension loading); the standard library's
``sqlite3`` is a fallback only where it can load extensions. Import ``Row`` and the
exception classes from here: a sqlean ``OperationalError`` is not a ``sqlite3`` one.

All SQL runs as plain synchronous functions ``fn(conn)`` on aiosqlite's connection thread
(``Database.write`` / ``Database.read``), so one request is one thread hop however many
statements it needs.
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import aiosqlite

from cofferd.infrastructure import schema, vec_index


def _choose_driver() -> ModuleType:
    try:
        import sqlean

        module: ModuleType = sqlean
        return module
    except ImportError:  # pragma: no cover - sqlean is a hard dependency
        if hasattr(sqlite3.Connection, "enable_load_extension"):
            return sqlite3
        raise


driver: ModuleType = _choose_driver()
Row: Any = driver.Row
Error: type[Exception] = driver.Error
OperationalError: type[Exception] = driver.OperationalError
IntegrityError: type[Exception] = driver.IntegrityError
Connection = Any  # the driver's connection class; typed loosely because sqlean ships no stubs
SQLITE_VERSION: str = driver.sqlite_version

T = TypeVar("T")
READERS = 2
BUSY_TIMEOUT_MS = 10_000


def connect(path: Path, *, readonly: bool = False) -> Connection:
    if readonly:
        conn = driver.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    else:
        conn = driver.connect(str(path), check_same_thread=False)
    conn.isolation_level = None  # transactions are explicit: see transaction()
    conn.row_factory = Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute("PRAGMA cache_size = -16000")
    vec_index.load(conn)
    if not readonly:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    return conn


@contextlib.contextmanager
def transaction(conn: Connection) -> Iterator[Connection]:
    """One write transaction, taken at once (no lock upgrade deadlock); rolled back on error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextlib.contextmanager
def savepoint(conn: Connection) -> Iterator[Connection]:
    """A nested atomic unit: on error only its own changes are undone. (One fixed name:
    SQLite nests same-named savepoints, and the statements stay in its cache.)"""
    conn.execute("SAVEPOINT unit")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK TO unit")
        conn.execute("RELEASE unit")
        raise
    conn.execute("RELEASE unit")


class Database:
    """One writer connection (all writes serialized) and a few read-only readers (WAL)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer: aiosqlite.Connection | None = None
        self._readers: list[aiosqlite.Connection] = []
        self._next_reader = itertools.cycle(range(READERS))

    async def open(self) -> Database:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._writer = await aiosqlite.Connection(
                lambda: connect(self.path), iter_chunk_size=64
            )
            await self.write(schema.migrate)
            for _ in range(READERS):
                reader = aiosqlite.Connection(
                    lambda: connect(self.path, readonly=True), iter_chunk_size=64
                )
                self._readers.append(await reader)
        except BaseException:
            await self.close(optimize=False)  # its threads would keep the process alive
            raise
        return self

    async def close(self, *, optimize: bool = True) -> None:
        for conn in self._readers:
            await conn.close()
        self._readers.clear()
        if self._writer is not None:
            if optimize:
                await self.write(lambda c: c.execute("PRAGMA optimize"))
            await self._writer.close()
            self._writer = None

    async def write(self, fn: Callable[[Connection], T]) -> T:
        if self._writer is None:
            raise RuntimeError("database is closed")
        return await _run(self._writer, fn)

    async def transact(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` on the writer inside one transaction (rolled back if it raises)."""

        def run(conn: Connection) -> T:
            with transaction(conn):
                return fn(conn)

        return await self.write(run)

    async def read(self, fn: Callable[[Connection], T]) -> T:
        if not self._readers:
            raise RuntimeError("database is closed")
        return await _run(self._readers[next(self._next_reader)], fn)


async def _run(conn: aiosqlite.Connection, fn: Callable[[Connection], T]) -> T:
    # aiosqlite (pinned <0.23) runs `fn(*args)` on its connection thread via `_execute`;
    # `_conn` is the driver connection that thread owns.
    def call() -> T:
        return fn(conn._conn)

    result: T = await conn._execute(call)  # type: ignore[no-untyped-call]
    return result
