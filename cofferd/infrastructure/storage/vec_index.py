"""sqlite-vec: the only module that imports it or touches vector tables, besides schema.py's
migrations, which made `vec_tables` and read it to drop or requantize each table through
the functions here.

One vec0 table per knowledge base (`vecq_<hash>`), created lazily at the KB's width;
`vec_tables` records which model and width each table holds so a model switch is noticed.
vec0 has no upsert: rows are deleted, then inserted.

Vectors are stored as int8, a quarter of float32: each is scaled to unit length, then by
127 / (SPREAD / sqrt(width)), so the range of a unit vector's components (rarely beyond
SPREAD standard deviations, 1 / sqrt(width) each) fills the int8 range. vec0 scans int8
fastest by L1 distance (5-7x faster than cosine here: docs/benchmarks.md): a search reads
the nearest `candidates(k)` by L1, then orders those by cosine, which is what it answers.
Against exact float32 cosine search this finds 0.99 of the top 10 (bench.studies.vector_recall).
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cofferd.infrastructure.storage.sqlite import Connection


def _extension() -> tuple[str | None, str | None]:
    """(the path of sqlite-vec's loadable extension, or None and why). Found without
    importing the package, which imports numpy (0.1 s of every daemon's start) for helpers
    Coffer does not use; the path is the one its `loadable_path()` gives."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or spec.origin is None:  # pragma: no cover - a hard dependency
        return None, "No module named 'sqlite_vec'"
    return os.path.join(os.path.dirname(spec.origin), "vec0"), None


EXTENSION, IMPORT_ERROR = _extension()
load_error: str | None = IMPORT_ERROR


def load(conn: Connection) -> bool:
    """Load the extension into a connection; False (and `load_error` set) when it cannot."""
    global load_error
    if EXTENSION is None:
        return False
    try:
        conn.enable_load_extension(True)
        conn.execute("SELECT load_extension(?)", (EXTENSION,))
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


SPREAD = 5.0
RESCORED_MIN = 40  # candidates read by L1 for a search of k: k + max(k, RESCORED_MIN)


def candidates(k: int) -> int:
    return k + max(k, RESCORED_MIN)


def table_name(kb: str) -> str:
    return "vecq_" + hashlib.sha256(kb.encode()).hexdigest()[:16]


def quantized(vector: Sequence[float]) -> bytes:
    """A vector as stored and searched: unit length, scaled into int8 (see above)."""
    scale = 127.0 * math.sqrt(len(vector)) / (SPREAD * (math.hypot(*vector) or 1.0))
    scaled = map(round, map(scale.__mul__, vector))
    return array("b", [127 if q > 127 else -127 if q < -127 else q for q in scaled]).tobytes()


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
    create(conn, table_name(kb), dimensions)
    conn.execute(
        "INSERT INTO vec_tables (resource_name, table_name, model, dimensions) VALUES (?, ?, ?, ?)",
        (kb, table_name(kb), model, dimensions),
    )


def create(conn: Connection, name: str, dimensions: int) -> None:
    conn.execute(
        f"CREATE VIRTUAL TABLE {name} USING vec0("
        f"chunk_id TEXT PRIMARY KEY, embedding int8[{int(dimensions)}] distance_metric=l1)"
    )


def requantize(conn: Connection, kb: str, table: str, dimensions: int) -> None:
    """Copy a float32 table of an index made before int8 into the KB's int8 table (its
    vectors are kept: nothing is embedded again), then drop it."""
    create(conn, table_name(kb), dimensions)
    rows = conn.execute(f"SELECT chunk_id, embedding FROM {table}")
    while batch := rows.fetchmany(1024):
        insert(conn, kb, [(c, array("f", blob).tolist()) for c, blob in batch])
    conn.execute(f"DROP TABLE {table}")
    conn.execute(
        "UPDATE vec_tables SET table_name = ? WHERE resource_name = ?", (table_name(kb), kb)
    )


def drop(conn: Connection, kb: str) -> None:
    row = conn.execute("SELECT table_name FROM vec_tables WHERE resource_name = ?", (kb,))
    if (found := row.fetchone()) is not None:
        conn.execute(f"DROP TABLE IF EXISTS {found[0]}")
        conn.execute("DELETE FROM vec_tables WHERE resource_name = ?", (kb,))


def delete(conn: Connection, kb: str, chunk_ids: Sequence[str]) -> None:
    if chunk_ids and recorded(conn, kb) is not None:
        conn.executemany(
            f"DELETE FROM {table_name(kb)} WHERE chunk_id = ?", [(c,) for c in chunk_ids]
        )


def insert(conn: Connection, kb: str, rows: Sequence[tuple[str, Sequence[float]]]) -> None:
    conn.executemany(
        f"INSERT INTO {table_name(kb)} (chunk_id, embedding) VALUES (?, vec_int8(?))",
        [(chunk_id, quantized(vector)) for chunk_id, vector in rows],
    )


def search(
    conn: Connection,
    kb: str,
    vector: Sequence[float],
    k: int,
    within: tuple[str, Sequence[Any]] | None = None,
) -> list[tuple[str, float]]:
    """The k nearest (chunk id, cosine distance), nearest first; `within` is a subquery
    (with its arguments) selecting the chunk ids allowed, applied inside the scan."""
    if EXTENSION is None or recorded(conn, kb) is None:
        return []
    subquery, args = within if within else ("", ())
    name = table_name(kb)
    # vec0 finds nothing at all when the allowed ids name one it does not hold (a chunk
    # not embedded yet, or in a script the model does not read): only ids it holds are
    # passed on, looked up in its own table of ids
    allowed = f"SELECT id FROM {name}_rowids WHERE id IN ({subquery})"
    query = quantized(vector)
    rows = conn.execute(
        f"""
        WITH nearest AS (
            SELECT chunk_id, embedding FROM {name}
            WHERE embedding MATCH vec_int8(?) AND k = ?
            {f"AND chunk_id IN ({allowed})" if subquery else ""}
        )
        SELECT chunk_id, vec_distance_cosine(vec_int8(embedding), vec_int8(?)) AS distance
        FROM nearest ORDER BY distance, chunk_id LIMIT ?
        """,
        (query, candidates(k), *args, query, k),
    ).fetchall()
    return [(r[0], float(r[1])) for r in rows]


def chunk_ids(conn: Connection, kb: str) -> list[str]:
    if recorded(conn, kb) is None:
        return []
    return [r[0] for r in conn.execute(f"SELECT chunk_id FROM {table_name(kb)} ORDER BY 1")]
