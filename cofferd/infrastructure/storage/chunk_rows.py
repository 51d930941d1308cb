"""Chunks and what is keyed by a chunk: the only module that writes `chunks` rows (beside
it, only schema.py's migrations: they add its columns, and emptied it once), and with them
each chunk's FTS row (fts_index; its rowid is `chunks.seq`); a chunk's vector (vec_index,
by chunk id) goes with it, while vector_store stores it once it is embedded. So a chunk's
rows come and go together. Passages are built here too, from a chunk joined with its
document.

The functions take a connection and run inside the caller's transaction.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from collections.abc import Sequence
from typing import Any

from cofferd.domain.index_records import DocumentWrite
from cofferd.domain.models import KB_KIND, Passage
from cofferd.infrastructure.storage import fts_index, vec_index
from cofferd.infrastructure.storage.sqlite import Connection

SCOPE = "kind = ? AND resource_name = ?"


def chunk_id(kb: str, doc_id: str, position: int) -> str:
    return f"{_scope(kb)}:{doc_id}:{position}"


@functools.lru_cache(maxsize=256)
def _scope(kb: str) -> str:
    return hashlib.sha256(f"{KB_KIND}\0{kb}".encode()).hexdigest()[:12]


def prepare(conn: Connection, kb: str) -> None:
    """Before writing a KB's chunks: its FTS table, created on first use."""
    fts_index.ensure(conn, kb)


def insert(conn: Connection, kb: str, writes: Sequence[DocumentWrite]) -> None:
    """The chunks of these documents, with their text and their document's title, aliases
    and tags to match on (`fts_meta`), the text as FTS5 indexes it: a few statements for
    the whole batch."""
    (last,) = conn.execute("SELECT coalesce(max(seq), 0) FROM chunks").fetchone()
    seqs = itertools.count(last + 1)
    rows, texts = [], []
    for w in writes:
        doc_id = w.document.id
        for c in w.chunks:
            seq = next(seqs)
            rows.append(
                (seq, chunk_id(kb, doc_id, c.position), doc_id, KB_KIND, kb, c.position,
                 c.heading_json, c.line_start, c.line_end)
            )  # fmt: skip
            texts.append((seq, c.fts_text, c.fts_heading, w.fts_meta))
    if rows:
        conn.executemany(
            "INSERT INTO chunks (seq, id, document_id, kind, resource_name, position, heading,"
            " line_start, line_end) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        fts_index.insert(conn, kb, texts)


def delete_of_document(conn: Connection, kb: str, doc_id: str) -> None:
    """A document's chunks, their FTS rows and their vectors."""
    rows = conn.execute(
        f"SELECT seq, id FROM chunks WHERE {SCOPE} AND document_id = ?", (KB_KIND, kb, doc_id)
    ).fetchall()
    if rows:
        fts_index.delete(conn, kb, [r[0] for r in rows])
        vec_index.delete(conn, kb, [r[1] for r in rows])
        conn.execute(f"DELETE FROM chunks WHERE {SCOPE} AND document_id = ?", (KB_KIND, kb, doc_id))


def drop_kb(conn: Connection, kb: str) -> None:
    fts_index.drop(conn, kb)
    vec_index.drop(conn, kb)
    conn.execute(f"DELETE FROM chunks WHERE {SCOPE}", (KB_KIND, kb))


def of_document(conn: Connection, kb: str, doc_id: str) -> list[tuple[int, str, list[str]]]:
    """(seq, id, heading path) of a document's chunks, in order."""
    rows = conn.execute(
        f"SELECT seq, id, heading FROM chunks WHERE {SCOPE} AND document_id = ? ORDER BY position",
        (KB_KIND, kb, doc_id),
    ).fetchall()
    return [(r[0], r[1], json.loads(r[2])) for r in rows]


def sample(conn: Connection, kb: str, limit: int) -> list[int]:
    """The seq of up to `limit` of the KB's chunks, picked at random."""
    rows = conn.execute(
        f"SELECT seq FROM chunks WHERE {SCOPE} ORDER BY random() LIMIT ?", (KB_KIND, kb, limit)
    )
    return [int(r[0]) for r in rows]


def owing_vectors(conn: Connection, kb: str) -> int:
    """How many chunks the KB's documents that owe vectors have."""
    (chunks,) = conn.execute(
        "SELECT count(*) FROM documents d JOIN chunks c ON c.kind = d.kind"
        " AND c.resource_name = d.resource_name AND c.document_id = d.id"
        " WHERE d.kind = ? AND d.resource_name = ? AND d.embed_pending = 1",
        (KB_KIND, kb),
    ).fetchone()
    return int(chunks)


def count(conn: Connection, kb: str) -> int:
    (chunks,) = conn.execute(f"SELECT count(*) FROM chunks WHERE {SCOPE}", (KB_KIND, kb)).fetchone()
    return int(chunks)


def with_documents(conn: Connection, key: str, values: Sequence[Any]) -> dict[Any, Any]:
    """Chunks with their document's title and path, by `key` (`seq` or `id`)."""
    marks = ",".join("?" * len(values))
    rows = conn.execute(
        "SELECT c.seq, c.id, c.document_id, c.position, c.heading, c.line_start, c.line_end,"
        " d.title, d.path"
        " FROM chunks c JOIN documents d ON d.kind = c.kind"
        " AND d.resource_name = c.resource_name AND d.id = c.document_id"
        f" WHERE c.{key} IN ({marks})",
        list(values),
    )
    return {r[key]: r for r in rows}


def passage(row: Any, text: str, score: float, snippet: tuple[str, int]) -> Passage:
    """A row of `with_documents` as a passage (`snippet`: fts_text.snippet's)."""
    return Passage(
        document_id=row["document_id"],
        title=row["title"],
        text=text,
        score=score,
        position=int(row["position"]),
        path=row["path"],
        heading=tuple(json.loads(row["heading"])),
        snippet=snippet[0],
        match_at=snippet[1],
        line_start=int(row["line_start"]),
        line_end=int(row["line_end"]),
    )


def dump(conn: Connection, kb: str) -> dict[str, Any]:
    """The KB's chunks with their FTS columns, its vectors' chunk ids, and how many FTS
    rows no chunk has (the oracle compares them; `seq` is left out: it is not derived)."""
    texts = fts_index.dump(conn, kb)
    rows = conn.execute(
        "SELECT seq, id, document_id, position, heading, line_start, line_end FROM chunks"
        f" WHERE {SCOPE} ORDER BY id",
        (KB_KIND, kb),
    ).fetchall()
    return {
        "chunks": [(*tuple(r)[1:], *texts.get(r[0], (None, None, None))) for r in rows],
        "vectors": vec_index.chunk_ids(conn, kb) if vec_index.available(conn) else [],
        "orphan_fts_rows": len(texts) - len(rows),
    }
