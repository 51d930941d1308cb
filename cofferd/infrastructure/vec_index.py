"""sqlite-vec: the only module that imports it or touches vector tables.

One vec0 table per knowledge base (`vec_<hash>`), created lazily at the KB's width, with
cosine distance; `vec_tables` records which model and width each table holds so a model
switch is noticed. vec0 has no upsert: rows are deleted, then inserted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cofferd.infrastructure.sqlite import Connection

try:
    import sqlite_vec

    IMPORT_ERROR: str | None = None
except ImportError as exc:  # pragma: no cover - a hard dependency
    sqlite_vec = None
    IMPORT_ERROR = str(exc)

load_error: str | None = IMPORT_ERROR


def load(conn: Connection) -> bool:
    """Load the extension into a connection; False (and `load_error` set) when it cannot."""
    global load_error
    if sqlite_vec is None:
        return False
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
    except Exception as exc:  # noqa: BLE001 - driver errors differ per driver; reported in status
        load_error = f"sqlite-vec cannot be loaded: {exc}"
        return False
    return True


def available(conn: Connection) -> bool:
    try:
        conn.execute("SELECT vec_version()").fetchone()
    except Exception:  # noqa: BLE001 - "no such function" from whichever driver
        return False
    return True


def table_name(kb: str) -> str:
    return "vec_" + hashlib.sha256(kb.encode()).hexdigest()[:16]


def recorded(conn: Connection, kb: str) -> tuple[str, int] | None:
    row = conn.execute(
        "SELECT model, dimensions FROM vec_tables WHERE resource_name = ?", (kb,)
    ).fetchone()
    return (row[0], int(row[1])) if row else None


def ensure(conn: Connection, kb: str, model: str, dimensions: int) -> None:
    """Create the KB's table at this width and record its model (inside a transaction)."""
    if recorded(conn, kb) == (model, dimensions):
        return
    drop(conn, kb)
    conn.execute(
        f"CREATE VIRTUAL TABLE {table_name(kb)} USING vec0("
        f"chunk_id TEXT PRIMARY KEY, embedding float[{int(dimensions)}] distance_metric=cosine)"
    )
    conn.execute(
        "INSERT INTO vec_tables (resource_name, table_name, model, dimensions) VALUES (?, ?, ?, ?)",
        (kb, table_name(kb), model, dimensions),
    )


def drop(conn: Connection, kb: str) -> None:
    if recorded(conn, kb) is not None:
        conn.execute(f"DROP TABLE IF EXISTS {table_name(kb)}")
        conn.execute("DELETE FROM vec_tables WHERE resource_name = ?", (kb,))


def delete(conn: Connection, kb: str, chunk_ids: Sequence[str]) -> None:
    if chunk_ids and recorded(conn, kb) is not None:
        conn.executemany(
            f"DELETE FROM {table_name(kb)} WHERE chunk_id = ?", [(c,) for c in chunk_ids]
        )


def insert(conn: Connection, kb: str, rows: Sequence[tuple[str, Sequence[float]]]) -> None:
    assert sqlite_vec is not None
    conn.executemany(
        f"INSERT INTO {table_name(kb)} (chunk_id, embedding) VALUES (?, ?)",
        [(chunk_id, sqlite_vec.serialize_float32(list(vector))) for chunk_id, vector in rows],
    )


def search(
    conn: Connection,
    kb: str,
    vector: Sequence[float],
    k: int,
    within: tuple[str, Sequence[Any]] | None = None,
) -> list[tuple[str, float]]:
    """The k nearest (chunk id, cosine distance); `within` is a subquery (with its
    arguments) selecting the chunk ids allowed, applied inside the KNN search."""
    if sqlite_vec is None or recorded(conn, kb) is None:
        return []
    subquery, args = within if within else ("", ())
    rows = conn.execute(
        f"SELECT chunk_id, distance FROM {table_name(kb)} WHERE embedding MATCH ? AND k = ?"
        + (f" AND chunk_id IN ({subquery})" if subquery else ""),
        (sqlite_vec.serialize_float32(list(vector)), k, *args),
    ).fetchall()
    return [(r[0], float(r[1])) for r in rows]


def chunk_ids(conn: Connection, kb: str) -> list[str]:
    if recorded(conn, kb) is None:
        return []
    return [r[0] for r in conn.execute(f"SELECT chunk_id FROM {table_name(kb)} ORDER BY 1")]
