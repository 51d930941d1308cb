"""Every SQL statement about documents, chunks, keyword search and audit (SQLite + FTS5)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from cofferd.domain.models import KB_KIND, WORKSPACE_GLOBAL, Document, Passage, utc_now
from cofferd.domain.ports import DocumentWrite, EmbedJob, FileStat, IndexedFile
from cofferd.infrastructure import fts, vec_index
from cofferd.infrastructure.database import Connection, Database, savepoint

# Group commits: each document is atomic in its own SAVEPOINT; the batch commits together.
WRITE_BATCH = 500


def store_scope(kind: str, kb: str) -> str:
    return hashlib.sha256(f"{kind}\0{kb}".encode()).hexdigest()[:12]


def chunk_id(kb: str, doc_id: str, position: int) -> str:
    return f"{store_scope(KB_KIND, kb)}:{doc_id}:{position}"


def _document(row: Any) -> Document:
    return Document(
        id=row["id"],
        resource_name=row["resource_name"],
        path=row["path"],
        title=row["title"],
        description=row["description"],
        content_sha256=row["content_sha256"],
        source_mode=row["source_mode"],
        metadata=json.loads(row["metadata"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        embed_pending=bool(row["embed_pending"]),
        kind=row["kind"],
    )


def _delete_chunks(conn: Connection, kb: str, doc_id: str) -> None:
    rows = conn.execute(
        "SELECT seq, id FROM chunks WHERE kind = ? AND resource_name = ? AND document_id = ?",
        (KB_KIND, kb, doc_id),
    ).fetchall()
    if rows:
        conn.executemany("DELETE FROM documents_fts WHERE rowid = ?", [(r[0],) for r in rows])
        vec_index.delete(conn, kb, [r[1] for r in rows])
        conn.execute(
            "DELETE FROM chunks WHERE kind = ? AND resource_name = ? AND document_id = ?",
            (KB_KIND, kb, doc_id),
        )


def _audit(
    conn: Connection,
    event: str,
    actor: str,
    kb: str | None,
    doc_id: str | None,
    details: dict[str, Any],
) -> None:
    conn.execute(
        "INSERT INTO audit (at, actor, event, kind, resource_name, document_id, details)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (utc_now(), actor, event, KB_KIND if kb else None, kb, doc_id, json.dumps(details)),
    )


def _write_document(conn: Connection, kb: str, w: DocumentWrite, actor: str) -> None:
    d = w.document
    if w.event != "kb_document_ingested":  # a new document has no chunks to replace
        _delete_chunks(conn, kb, d.id)
    for chunk in w.chunks:
        cur = conn.execute(
            "INSERT INTO chunks (id, document_id, kind, resource_name, position, heading)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                chunk_id(kb, d.id, chunk.position),
                d.id,
                KB_KIND,
                kb,
                chunk.position,
                json.dumps(chunk.heading, ensure_ascii=False),
            ),
        )
        conn.execute(
            "INSERT INTO documents_fts (rowid, text, heading, kb) VALUES (?, ?, ?, ?)",
            (
                cur.lastrowid,
                fts.index_text(chunk.text),
                fts.index_text(" / ".join(chunk.heading)),
                kb,
            ),
        )
    conn.execute(
        """
        INSERT INTO documents (id, kind, resource_name, project_id, path, title, description,
            content_sha256, embed_pending, source_mode, metadata, created_at, updated_at,
            file_size, file_mtime_ns, chunking)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (kind, resource_name, id) DO UPDATE SET
            path = excluded.path, title = excluded.title, description = excluded.description,
            content_sha256 = excluded.content_sha256, embed_pending = excluded.embed_pending,
            source_mode = excluded.source_mode, metadata = excluded.metadata,
            updated_at = excluded.updated_at, file_size = excluded.file_size,
            file_mtime_ns = excluded.file_mtime_ns, chunking = excluded.chunking,
            embed_error = NULL, embed_retry_at = 0
        """,
        (
            d.id,
            KB_KIND,
            kb,
            WORKSPACE_GLOBAL,
            d.path,
            d.title,
            d.description,
            d.content_sha256,
            int(d.embed_pending),
            d.source_mode,
            json.dumps(d.metadata, ensure_ascii=False, sort_keys=True),
            d.created_at,
            d.updated_at,
            w.stat.size,
            w.stat.mtime_ns,
            w.chunking,
        ),
    )
    _audit(conn, w.event, actor, kb, d.id, {"path": d.path, "chunks": len(w.chunks)})


def _remove_document(conn: Connection, kb: str, doc_id: str, actor: str, reason: str) -> bool:
    row = conn.execute(
        "SELECT path FROM documents WHERE kind = ? AND resource_name = ? AND id = ?",
        (KB_KIND, kb, doc_id),
    ).fetchone()
    if row is None:
        return False
    _delete_chunks(conn, kb, doc_id)
    conn.execute(
        "DELETE FROM documents WHERE kind = ? AND resource_name = ? AND id = ?",
        (KB_KIND, kb, doc_id),
    )
    conn.execute(
        "DELETE FROM tracked_sources WHERE resource_name = ? AND document_id = ?", (kb, doc_id)
    )
    _audit(conn, "kb_document_deleted", actor, kb, doc_id, {"path": row["path"], "reason": reason})
    return True


def _keyword_hits(conn: Connection, kb: str, match: str, top_k: int) -> list[Passage]:
    rows = conn.execute(
        """
            SELECT h.score, h.snip, h.text, c.document_id, c.position, c.heading,
                   d.title, d.path
            FROM (
                SELECT rowid AS seq, -rank AS score, text,
                       snippet(documents_fts, 0, ?, ?, '…', 24) AS snip
                FROM documents_fts
                WHERE documents_fts MATCH ? AND rank MATCH ? AND kb = ?
                ORDER BY rank LIMIT ?
            ) AS h
            JOIN chunks AS c ON c.seq = h.seq
            JOIN documents AS d
              ON d.kind = c.kind AND d.resource_name = c.resource_name
             AND d.id = c.document_id
            ORDER BY h.score DESC
            """,
        (fts.HIGHLIGHT_START, fts.HIGHLIGHT_END, match, fts.RANK, kb, top_k),
    ).fetchall()
    return [_passage(r, float(r["score"]), r["snip"]) for r in rows]


def embedding_text(heading: list[str], text: str) -> str:
    """A chunk as it is embedded: its heading path for context, without repeating the
    heading the chunk itself starts with."""
    first_line = text.lstrip().split("\n", 1)[0]
    if heading and first_line.lstrip("#").strip() == heading[-1]:
        heading = heading[:-1]
    return " / ".join(heading) + "\n\n" + text if heading else text


def _passage(row: Any, score: float, snippet: str) -> Passage:
    return Passage(
        document_id=row["document_id"],
        title=row["title"],
        text=fts.display_text(row["text"]),
        score=score,
        position=int(row["position"]),
        path=row["path"],
        heading=tuple(json.loads(row["heading"])),
        snippet=fts.display_text(snippet),
    )


def dump_index(conn: Connection, kb: str) -> dict[str, Any]:
    """A canonical picture of everything derived for a KB (timestamps left out): the oracle
    compares it with the dump of a fresh rebuild from the same files."""
    docs = conn.execute(
        "SELECT id, path, title, description, content_sha256, embed_pending,"
        " source_mode, metadata, file_size, file_mtime_ns, chunking FROM documents"
        " WHERE kind = ? AND resource_name = ? ORDER BY id",
        (KB_KIND, kb),
    ).fetchall()
    chunks = conn.execute(
        "SELECT c.id, c.document_id, c.position, c.heading, f.text, f.heading, f.kb"
        " FROM chunks c LEFT JOIN documents_fts f ON f.rowid = c.seq"
        " WHERE c.kind = ? AND c.resource_name = ? ORDER BY c.id",
        (KB_KIND, kb),
    ).fetchall()
    (fts_rows,) = conn.execute("SELECT count(*) FROM documents_fts").fetchone()
    (all_chunks,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
    vectors = vec_index.chunk_ids(conn, kb) if vec_index.available(conn) else []
    return {
        "documents": [tuple(r) for r in docs],
        "chunks": [tuple(r) for r in chunks],
        "vectors": vectors,
        "orphan_fts_rows": fts_rows - all_chunks,
    }


class SqliteIndexStore:
    """The IndexStore port over one SQLite database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def indexed_files(
        self, kb: str, paths: Sequence[str] | None = None
    ) -> dict[str, IndexedFile]:
        """All indexed files of a KB, or those at `paths` or inside them as folders."""

        def run(conn: Connection) -> dict[str, IndexedFile]:
            sql = (
                "SELECT path, id, file_size, file_mtime_ns, content_sha256, chunking"
                " FROM documents WHERE kind = ? AND resource_name = ?"
            )
            if paths is None:
                rows = conn.execute(sql, (KB_KIND, kb)).fetchall()
            else:
                rows = []
                for p in paths:
                    # One index range holds `p` and everything under `p/` ('0' sorts right
                    # after '/'); it also holds siblings like `p.md`, dropped here.
                    rows += [
                        r
                        for r in conn.execute(
                            sql + " AND path >= ? AND path < ?", (KB_KIND, kb, p, p + "0")
                        )
                        if r[0] == p or r[0].startswith(p + "/")
                    ]
            return {r[0]: IndexedFile(r[1], FileStat(r[2], r[3]), r[4], r[5]) for r in rows}

        return await self.db.read(run)

    async def apply(
        self,
        kb: str,
        writes: Sequence[DocumentWrite],
        removed: Sequence[str],
        restat: Sequence[tuple[str, FileStat]],
        actor: str,
    ) -> None:
        def run(conn: Connection) -> None:
            for doc_id, stat in restat:
                conn.execute(
                    "UPDATE documents SET file_size = ?, file_mtime_ns = ?"
                    " WHERE kind = ? AND resource_name = ? AND id = ?",
                    (stat.size, stat.mtime_ns, KB_KIND, kb, doc_id),
                )
            for doc_id in removed:
                with savepoint(conn):
                    _remove_document(conn, kb, doc_id, actor, "file_removed")
            for w in writes:
                with savepoint(conn):
                    _write_document(conn, kb, w, actor)

        await self.db.transact(run)

    async def delete_document(self, kb: str, doc_id: str, actor: str) -> bool:
        def run(conn: Connection) -> bool:
            return _remove_document(conn, kb, doc_id, actor, "deleted")

        return await self.db.transact(run)

    async def document_ids(self, kb: str, paths: Sequence[str]) -> dict[str, str]:
        def run(conn: Connection) -> dict[str, str]:
            found: dict[str, str] = {}
            for path in set(paths):
                row = conn.execute(
                    "SELECT id FROM documents WHERE kind = ? AND resource_name = ? AND path = ?",
                    (KB_KIND, kb, path),
                ).fetchone()
                if row:
                    found[path] = row[0]
            return found

        return await self.db.read(run)

    async def find_by_metadata(self, kb: str, key: str, value: str | None = None) -> list[Document]:
        """Documents whose metadata has `key` (equal to `value` when given), oldest first."""

        def run(conn: Connection) -> list[Document]:
            sql = (
                "SELECT * FROM documents WHERE kind = ? AND resource_name = ?"
                " AND json_extract(metadata, '$.' || ?) IS NOT NULL"
            )
            args: list[Any] = [KB_KIND, kb, key]
            if value is not None:
                sql += " AND json_extract(metadata, '$.' || ?) = ?"
                args += [key, value]
            rows = conn.execute(sql + " ORDER BY created_at, id", args).fetchall()
            return [_document(r) for r in rows]

        return await self.db.read(run)

    async def get_document(self, kb: str, doc_id: str) -> Document | None:
        def run(conn: Connection) -> Document | None:
            row = conn.execute(
                "SELECT * FROM documents WHERE kind = ? AND resource_name = ? AND id = ?",
                (KB_KIND, kb, doc_id),
            ).fetchone()
            return _document(row) if row else None

        return await self.db.read(run)

    async def list_documents(
        self, kb: str, *, q: str | None, limit: int, offset: int
    ) -> tuple[list[Document], int]:
        def run(conn: Connection) -> tuple[list[Document], int]:
            where = "kind = ? AND resource_name = ?"
            args: list[Any] = [KB_KIND, kb]
            if q:
                escaped = q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
                where += " AND lower(title) LIKE lower(?) ESCAPE '\\'"
                args.append(f"%{escaped}%")
            total = conn.execute(f"SELECT count(*) FROM documents WHERE {where}", args).fetchone()
            rows = conn.execute(
                f"SELECT * FROM documents WHERE {where}"
                " ORDER BY updated_at DESC, id LIMIT ? OFFSET ?",
                [*args, limit, offset],
            ).fetchall()
            return [_document(r) for r in rows], int(total[0])

        return await self.db.read(run)

    async def keyword_search(self, kb: str, query: str, top_k: int) -> list[Passage]:
        """BM25 over words; when nothing matches, the terms are tried again as prefixes."""
        terms = fts.query_terms(query)
        if not terms:
            return []

        def run(conn: Connection) -> list[Passage]:
            hits = _keyword_hits(conn, kb, fts.match_expression(terms), top_k)
            if not hits:
                hits = _keyword_hits(conn, kb, fts.match_expression(terms, prefix=True), top_k)
            return hits

        return await self.db.read(run)

    async def delete_kb(self, kb: str) -> int:
        def run(conn: Connection) -> int:
            conn.execute(
                "DELETE FROM documents_fts WHERE rowid IN"
                " (SELECT seq FROM chunks WHERE kind = ? AND resource_name = ?)",
                (KB_KIND, kb),
            )
            conn.execute("DELETE FROM chunks WHERE kind = ? AND resource_name = ?", (KB_KIND, kb))
            vec_index.drop(conn, kb)
            conn.execute("DELETE FROM tracked_sources WHERE resource_name = ?", (kb,))
            cur = conn.execute(
                "DELETE FROM documents WHERE kind = ? AND resource_name = ?", (KB_KIND, kb)
            )
            return int(cur.rowcount)

        return await self.db.transact(run)

    async def audit(
        self, event: str, actor: str, kb: str | None, doc_id: str | None, details: dict[str, Any]
    ) -> None:
        def run(conn: Connection) -> None:
            _audit(conn, event, actor, kb, doc_id, details)

        await self.db.transact(run)

    async def track_source(self, kb: str, doc_id: str, source_path: str) -> None:
        def run(conn: Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO tracked_sources"
                " (resource_name, document_id, source_path) VALUES (?, ?, ?)",
                (kb, doc_id, source_path),
            )

        await self.db.transact(run)

    async def tracked_sources(self, kb: str) -> dict[str, str]:
        def run(conn: Connection) -> dict[str, str]:
            rows = conn.execute(
                "SELECT document_id, source_path FROM tracked_sources WHERE resource_name = ?",
                (kb,),
            ).fetchall()
            return {r[0]: r[1] for r in rows}

        return await self.db.read(run)

    async def record_invocation(
        self, client: str, tool: str, duration_ms: float, outcome: str
    ) -> None:
        def run(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO mcp_invocations (at, client, tool, duration_ms, outcome)"
                " VALUES (?, ?, ?, ?, ?)",
                (utc_now(), client[:100], tool[:100], duration_ms, outcome[:100]),
            )

        await self.db.transact(run)

    async def invocations(self, limit: int) -> list[dict[str, Any]]:
        def run(conn: Connection) -> list[dict[str, Any]]:
            rows = conn.execute(
                "SELECT * FROM mcp_invocations ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
            return [dict(r) for r in rows]

        return await self.db.read(run)

    async def audit_log(self, kb: str | None, limit: int) -> list[dict[str, Any]]:
        def run(conn: Connection) -> list[dict[str, Any]]:
            where, args = ("WHERE resource_name = ?", [kb]) if kb else ("", [])
            rows = conn.execute(
                f"SELECT * FROM audit {where} ORDER BY id DESC LIMIT ?", [*args, limit]
            ).fetchall()
            return [{**dict(r), "details": json.loads(r["details"])} for r in rows]

        return await self.db.read(run)

    async def metrics(self, kb: str) -> dict[str, int]:
        def run(conn: Connection) -> dict[str, int]:
            docs, pending, degraded, doc_bytes = conn.execute(
                "SELECT count(*), coalesce(sum(embed_pending), 0),"
                " count(embed_error), coalesce(sum(file_size), 0)"
                " FROM documents WHERE kind = ? AND resource_name = ?",
                (KB_KIND, kb),
            ).fetchone()
            (chunks,) = conn.execute(
                "SELECT count(*) FROM chunks WHERE kind = ? AND resource_name = ?", (KB_KIND, kb)
            ).fetchone()
            return {
                "documents": docs,
                "chunks": chunks,
                "documents_degraded": degraded,
                "embed_pending": pending,
                "document_bytes": doc_bytes,
            }

        return await self.db.read(run)

    async def dump(self, kb: str) -> dict[str, Any]:
        return await self.db.read(lambda conn: dump_index(conn, kb))

    # -- vectors -----------------------------------------------------------------------

    async def vectors_available(self) -> bool:
        return await self.db.read(vec_index.available)

    async def pending_embeds(self, kb: str, limit: int, now: float) -> list[EmbedJob]:
        """Documents that owe vectors and are due, with their chunks' text."""

        def run(conn: Connection) -> list[EmbedJob]:
            docs = conn.execute(
                "SELECT id, content_sha256, chunking FROM documents"
                " WHERE kind = ? AND resource_name = ?"
                " AND embed_pending = 1 AND embed_retry_at <= ? ORDER BY embed_retry_at, id"
                " LIMIT ?",
                (KB_KIND, kb, now, limit),
            ).fetchall()
            jobs = []
            for doc_id, sha, chunking in docs:
                chunks = conn.execute(
                    "SELECT c.id, c.heading, f.text FROM chunks c"
                    " JOIN documents_fts f ON f.rowid = c.seq"
                    " WHERE c.kind = ? AND c.resource_name = ? AND c.document_id = ?"
                    " ORDER BY c.position",
                    (KB_KIND, kb, doc_id),
                ).fetchall()
                texts = [
                    (cid, embedding_text(json.loads(heading), fts.display_text(text)))
                    for cid, heading, text in chunks
                ]
                jobs.append(EmbedJob(doc_id, sha, chunking, texts))
            return jobs

        return await self.db.read(run)

    async def store_vectors(
        self,
        kb: str,
        model: str,
        dimensions: int,
        done: Sequence[tuple[EmbedJob, Sequence[Sequence[float]]]],
    ) -> int:
        """Write the vectors of documents whose content did not change meanwhile; only
        vector rows and the embed flags are touched."""

        def run(conn: Connection) -> int:
            stored = 0
            vec_index.ensure(conn, kb, model, dimensions)
            for job, vectors in done:
                current = conn.execute(
                    "SELECT content_sha256, chunking FROM documents"
                    " WHERE kind = ? AND resource_name = ? AND id = ?",
                    (KB_KIND, kb, job.document_id),
                ).fetchone()
                if current is None or tuple(current) != (job.content_sha256, job.chunking):
                    continue  # edited, re-chunked or deleted meanwhile: embedded again
                ids = [cid for cid, _ in job.chunks]
                vec_index.delete(conn, kb, ids)
                vec_index.insert(conn, kb, list(zip(ids, vectors, strict=True)))
                conn.execute(
                    "UPDATE documents SET embed_pending = 0, embed_error = NULL,"
                    " embed_retry_at = 0 WHERE kind = ? AND resource_name = ? AND id = ?",
                    (KB_KIND, kb, job.document_id),
                )
                stored += 1
            return stored

        return await self.db.transact(run)

    async def embed_failed(
        self, kb: str, doc_ids: Sequence[str], error: str, retry_at: float
    ) -> None:
        def run(conn: Connection) -> None:
            conn.executemany(
                "UPDATE documents SET embed_error = ?, embed_retry_at = ?"
                " WHERE kind = ? AND resource_name = ? AND id = ?",
                [(error[:500], retry_at, KB_KIND, kb, d) for d in doc_ids],
            )

        await self.db.transact(run)

    async def reset_vectors(
        self, kb: str, pending: bool, model: str | None = None, dims: int | None = None
    ) -> None:
        """Drop the KB's vectors (and make an empty table for `model` at `dims`); every
        document then owes new ones, or, with vectors off, none."""

        def run(conn: Connection) -> None:
            vec_index.drop(conn, kb)
            if model is not None and dims is not None:
                vec_index.ensure(conn, kb, model, dims)
            conn.execute(
                "UPDATE documents SET embed_pending = ?, embed_error = NULL,"
                " embed_retry_at = 0 WHERE kind = ? AND resource_name = ?",
                (int(pending), KB_KIND, kb),
            )

        await self.db.transact(run)

    async def retry_embeds_now(self, kb: str) -> None:
        def run(conn: Connection) -> None:
            conn.execute(
                "UPDATE documents SET embed_retry_at = 0 WHERE kind = ? AND resource_name = ?"
                " AND embed_pending = 1 AND embed_retry_at > 0",
                (KB_KIND, kb),
            )

        await self.db.transact(run)

    async def vector_model(self, kb: str) -> tuple[str, int] | None:
        return await self.db.read(lambda conn: vec_index.recorded(conn, kb))

    async def vector_search(self, kb: str, vector: Sequence[float], top_k: int) -> list[Passage]:
        def run(conn: Connection) -> list[Passage]:
            hits = vec_index.search(conn, kb, vector, top_k)
            if not hits:
                return []
            marks = ",".join("?" * len(hits))
            rows = {
                r["id"]: r
                for r in conn.execute(
                    "SELECT c.id, c.document_id, c.position, c.heading, f.text, d.title, d.path"
                    " FROM chunks c JOIN documents_fts f ON f.rowid = c.seq"
                    " JOIN documents d ON d.kind = c.kind AND d.resource_name = c.resource_name"
                    f" AND d.id = c.document_id WHERE c.id IN ({marks})",
                    [chunk for chunk, _ in hits],
                )
            }
            return [
                _passage(rows[chunk], 1.0 - distance, rows[chunk]["text"][:300])
                for chunk, distance in hits
                if chunk in rows
            ]

        return await self.db.read(run)

    async def total_changes(self) -> int:
        return await self.db.write(lambda conn: int(conn.total_changes))
