"""The FTS5 tables: one per knowledge base, the only module that names them while the daemon
runs (schema.py's migrations, which made `fts_tables` and rebuild each table under a new
name through `create` here, name them too).

A table per KB keeps each KB's search its own: a query in a ten-document KB never walks
the postings of a large one, and each KB's bm25 statistics describe only its own text.
A chunk's FTS rowid is its `chunks.seq`. Columns: the chunk's `text`, its `heading` path, and
`meta`, the document's title, aliases and tags (on each of its chunks, so a title or tag
match lifts every passage of that document). `fts_tables` records which table belongs to
which KB; the name is derived from the KB's name, so it is never user text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from cofferd.infrastructure.storage import fts_text
from cofferd.infrastructure.storage.sqlite import Connection

TOKENIZER = "porter unicode61 remove_diacritics 2"


def table_name(kb: str) -> str:
    return "fts_" + hashlib.sha256(kb.encode()).hexdigest()[:16]


def exists(conn: Connection, kb: str) -> bool:
    row = conn.execute("SELECT 1 FROM fts_tables WHERE resource_name = ?", (kb,)).fetchone()
    return row is not None


def kbs(conn: Connection) -> list[str]:
    """The KBs that have a table."""
    return [str(r[0]) for r in conn.execute("SELECT resource_name FROM fts_tables")]


def ensure(conn: Connection, kb: str) -> str:
    """The KB's table, created on first use (inside the caller's transaction)."""
    name = table_name(kb)
    if not exists(conn, kb):
        create(conn, name)
        conn.execute("INSERT INTO fts_tables (resource_name, table_name) VALUES (?, ?)", (kb, name))
    return name


def create(conn: Connection, name: str) -> None:
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5("
        f"text, heading, meta, tokenize = '{TOKENIZER}')"
    )


def drop(conn: Connection, kb: str) -> None:
    if exists(conn, kb):
        conn.execute(f"DROP TABLE IF EXISTS {table_name(kb)}")
        conn.execute("DELETE FROM fts_tables WHERE resource_name = ?", (kb,))


def insert(conn: Connection, kb: str, rows: Sequence[tuple[int, str, str, str]]) -> None:
    """Chunks as (rowid, text, heading path, meta: their document's title, aliases and
    tags), each already in the form FTS5 indexes (fts_text.index_text)."""
    conn.executemany(
        f"INSERT INTO {table_name(kb)} (rowid, text, heading, meta) VALUES (?, ?, ?, ?)", rows
    )


def delete(conn: Connection, kb: str, rowids: Iterable[int]) -> None:
    conn.executemany(f"DELETE FROM {table_name(kb)} WHERE rowid = ?", [(r,) for r in rowids])


def texts(conn: Connection, kb: str, rowids: Sequence[int]) -> dict[int, str]:
    """The stored text of these chunks, as people see it."""
    if not rowids or not exists(conn, kb):
        return {}
    marks = ",".join("?" * len(rowids))
    rows = conn.execute(
        f"SELECT rowid, text FROM {table_name(kb)} WHERE rowid IN ({marks})", list(rowids)
    )
    return {int(r[0]): fts_text.display_text(r[1]) for r in rows}


def ranked(
    conn: Connection,
    kb: str,
    match: str,
    top_k: int,
    within: tuple[str, Sequence[Any]] | None = None,
    part: tuple[int, int] = (0, 1),
) -> list[tuple[int, float]]:
    """The best (seq, score) rows by bm25 over this KB's text, best first: among the
    rows `within` selects (a subquery with its arguments) whose seq is `part[0]` modulo
    `part[1]` (parts can be ranked side by side). Only rowids are read: a ranking that
    reads each row's text, or orders by FTS5's `rank`, takes twice the time."""
    if not exists(conn, kb):
        return []
    name = table_name(kb)
    subquery, args = within if within else ("", ())
    rows = conn.execute(
        f"""
        SELECT rowid, -{fts_text.rank_of(name)} AS score FROM {name}
        WHERE {name} MATCH ? {"AND rowid % ? = ?" if part[1] > 1 else ""}
              {f"AND rowid IN ({subquery})" if subquery else ""}
        ORDER BY score DESC, rowid LIMIT ?
        """,
        (match, *(part[::-1] if part[1] > 1 else ()), *args, top_k),
    )
    return [(int(r[0]), float(r[1])) for r in rows]


def marked(
    conn: Connection, kb: str, match: str, seqs: Sequence[int]
) -> dict[int, tuple[str, str]]:
    """These rows' (text, text with the matches of `match` marked), by seq."""
    if not seqs or not exists(conn, kb):
        return {}
    name = table_name(kb)
    rows = conn.execute(
        f"""
        SELECT {name}.rowid, {name}.text, highlight({name}, 0, ?, ?)
        FROM json_each(?) AS wanted CROSS JOIN {name} ON {name}.rowid = wanted.value
        WHERE {name} MATCH ?
        """,
        (fts_text.HIGHLIGHT_START, fts_text.HIGHLIGHT_END, json.dumps(list(seqs)), match),
    )
    return {int(r[0]): (r[1], r[2]) for r in rows}


def count(conn: Connection, kb: str, match: str) -> int:
    """How many chunks `match` matches: a walk of its postings, without ranking (~50x
    cheaper a row than ranking them)."""
    if not exists(conn, kb):
        return 0
    name = table_name(kb)
    (found,) = conn.execute(
        f"SELECT count(*) FROM {name} WHERE {name} MATCH ?", (match,)
    ).fetchone()
    return int(found)


def matching(conn: Connection, kb: str, match: str) -> tuple[str, list[Any]]:
    """A subquery (with its arguments) selecting the seqs of the chunks `match` matches."""
    if not exists(conn, kb):
        return "SELECT NULL WHERE 0", []
    name = table_name(kb)
    return f"SELECT rowid FROM {name} WHERE {name} MATCH ?", [match]


# FTS5 merges pieces as it writes them (`automerge`: a level's pieces once there are 4;
# `crisismerge`: at once, whatever the cost, once there are 16); its defaults are restored
# after a bulk load, which leaves them for merge_step (once, at the end: a cold index of
# 13 MB of Chinese spent ~0.15 s of the one writer's CPU merging pieces it merged again).
AUTOMERGE = 4
CRISISMERGE = 16
BULK_CRISISMERGE = 64


def merge_later(conn: Connection, kb: str) -> None:
    """Before a bulk load: the KB's pieces are left as they are written (merge_step makes
    them one after it; `merge_as_written` then restores FTS5's own merging)."""
    _merging(conn, ensure(conn, kb), 0, BULK_CRISISMERGE)


def merge_as_written(conn: Connection, kb: str) -> bool:
    """FTS5's own merging as pieces are written, if a bulk load left it off; whether it did."""
    if not exists(conn, kb):
        return False
    name = table_name(kb)
    row = conn.execute(f"SELECT v FROM {name}_config WHERE k = 'automerge'").fetchone()
    if row is None or row[0] != 0:
        return False
    _merging(conn, name, AUTOMERGE, CRISISMERGE)
    return True


def _merging(conn: Connection, name: str, automerge: int, crisismerge: int) -> None:
    for option, value in (("automerge", automerge), ("crisismerge", crisismerge)):
        conn.execute(f"INSERT INTO {name} ({name}, rank) VALUES (?, ?)", (option, value))


def merge_step(conn: Connection, kb: str, pages: int) -> bool:
    """Merge the KB's index segments toward one, writing about `pages` pages; False once
    they are one. A bulk load leaves a dozen or more segments, and each is searched for
    every term of every query: one segment takes a 10-row highlight from 3.5 to 0.3 ms and
    a rare word's ranking from 1.2 to 0.5 ms at 250,000 documents."""
    if not exists(conn, kb):
        return False
    name = table_name(kb)
    before = conn.total_changes
    conn.execute(f"INSERT INTO {name} ({name}, rank) VALUES ('merge', ?)", (-pages,))
    return conn.total_changes - before >= 2  # FTS5's sign that work was done


def row_count(conn: Connection, kb: str) -> int:
    if not exists(conn, kb):
        return 0
    (count,) = conn.execute(f"SELECT count(*) FROM {table_name(kb)}").fetchone()
    return int(count)


def dump(conn: Connection, kb: str) -> dict[int, tuple[str, str, str]]:
    if not exists(conn, kb):
        return {}
    rows = conn.execute(f"SELECT rowid, text, heading, meta FROM {table_name(kb)}")
    return {int(r[0]): (r[1], r[2], r[3]) for r in rows}
