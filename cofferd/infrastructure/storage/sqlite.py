"""The SQLite driver and what every SQL helper shares: the typed connection, `connect()`
with Coffer's pragmas and the extensions it is given, and `atomic()`, the one way to make
changes atomic (a transaction at the outside, savepoints inside it).

The driver is ``sqlean`` (SQLite >= 3.50 with extension loading). Import ``Row`` and the
exception classes from here: a sqlean ``OperationalError`` is not a ``sqlite3`` one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import sqlean

log = logging.getLogger(__name__)

Row: Any = sqlean.Row
Error: type[Exception] = sqlean.Error
OperationalError: type[Exception] = sqlean.OperationalError
IntegrityError: type[Exception] = sqlean.IntegrityError
SQLITE_VERSION: str = sqlean.sqlite_version

BUSY_TIMEOUT_MS = 10_000
JOURNAL_SIZE_LIMIT = 16 * 1024 * 1024
# The WAL is written back into the database at the commit that makes it this many pages:
# SQLite's default (~4 MB), and while a bulk load writes (~64 MB: a cold index of 13 MB of
# Chinese wrote it back a dozen times, 0.1 s of the one writer's CPU; the index is derived,
# and what a crash loses of it is read again from the files)
CHECKPOINT_PAGES = 1000
BULK_CHECKPOINT_PAGES = 16384
READER_CACHE_KB = 4000
WRITER_CACHE_KB = 16000


class Cursor(Protocol):
    lastrowid: int | None
    rowcount: int
    row_factory: Any

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def fetchmany(self, size: int) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """What Coffer uses of a DB-API connection (sqlean ships no type stubs)."""

    @property
    def in_transaction(self) -> bool: ...

    @property
    def total_changes(self) -> int: ...

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Any, /) -> Cursor: ...

    def cursor(self) -> Cursor: ...

    def close(self) -> None: ...

    def interrupt(self) -> None: ...

    def enable_load_extension(self, enabled: bool, /) -> None: ...


Extension = Callable[[Connection], object]  # loads an extension into a connection


def connect(
    path: Path, *, readonly: bool = False, extensions: Sequence[Extension] = ()
) -> Connection:
    if readonly:
        conn: Any = sqlean.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    else:
        conn = sqlean.connect(str(path), check_same_thread=False)
    conn.isolation_level = None  # transactions are explicit: see atomic()
    conn.row_factory = Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA temp_store = MEMORY")
    # Pages stay in the OS's file cache anyway; a reader needs few of its own (they are
    # memory the daemon keeps), the writer more (it rewrites FTS segments).
    conn.execute(f"PRAGMA cache_size = -{READER_CACHE_KB if readonly else WRITER_CACHE_KB}")
    for load in extensions:
        load(conn)
    if not readonly:
        # before the WAL is set up: only a new, empty file takes it (Database.reclaim)
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        # after a checkpoint the WAL file shrinks back to this (a big batch once made it
        # hundreds of MB, kept for ever)
        conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
    connection: Connection = conn
    return connection


def checkpoint_every(conn: Connection, pages: int) -> int:
    """The writer's WAL written back once it holds `pages` pages (CHECKPOINT_PAGES, or
    BULK_CHECKPOINT_PAGES while a bulk load writes); the number it was."""
    (was,) = conn.execute("PRAGMA wal_autocheckpoint").fetchone()
    if was != pages:
        conn.execute(f"PRAGMA wal_autocheckpoint = {int(pages)}")
    return int(was)


@contextlib.contextmanager
def atomic(conn: Connection) -> Iterator[Connection]:
    """All of the block or none of it. Outermost: one write transaction, taken at once (no
    lock-upgrade deadlock). Nested: a savepoint, so a failure undoes only its own changes.
    A COMMIT (or RELEASE) that fails undoes the block too, so no transaction is ever left
    open on the connection. Clean-up never hides the error that caused it."""
    if conn.in_transaction:
        # One name at every depth: SQLite matches the innermost savepoint of that name,
        # and the statements stay in its cache.
        begin, end = "SAVEPOINT unit", "RELEASE unit"
        undo: tuple[str, ...] = ("ROLLBACK TO unit", "RELEASE unit")
    else:
        begin, undo, end = "BEGIN IMMEDIATE", ("ROLLBACK",), "COMMIT"
    conn.execute(begin)
    try:
        yield conn
        conn.execute(end)
    except BaseException:
        _undo(conn, undo)
        raise


def _undo(conn: Connection, statements: Sequence[str]) -> None:
    # SQLite may already have rolled the transaction back (disk full, I/O error): then
    # there is nothing left to undo, and the original error is the one worth reporting.
    if not conn.in_transaction:
        return
    try:
        for statement in statements:
            conn.execute(statement)
    except Error as exc:
        log.error("could not roll back (%s); the original error follows", exc)


# Primary result codes that say the storage failed, not the statement: the work is retried
# once writing works again rather than blamed on the document being written.
_STORAGE_CODES = frozenset({3, 5, 6, 7, 8, 10, 13, 14, 15})
# (PERM, BUSY, LOCKED, NOMEM, READONLY, IOERR, FULL, CANTOPEN, PROTOCOL)
_DAMAGE_CODES = frozenset({11, 26})  # CORRUPT, NOTADB


def _code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(exc, Error) and isinstance(code, int) else None


def storage_failed(exc: BaseException) -> bool:
    return _code(exc) in _STORAGE_CODES


def damaged(exc: BaseException) -> bool:
    """The database file is not a database, or not a whole one."""
    return _code(exc) in _DAMAGE_CODES
