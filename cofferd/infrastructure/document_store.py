"""Documents, their chunks and keyword search: the DocumentIndex port over SQLite + FTS5.

Writes arrive in batches from the Reindexer. Each document is written inside its own
savepoint: one that cannot be stored (text the database refuses, a constraint) is undone
alone and reported back as skipped, and the rest of the batch commits. A failure of the
storage itself (disk full, I/O error) is not the document's fault: the whole batch fails
and is retried once writing works again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Sequence
from typing import Any

from cofferd.domain.filters import SearchFilters
from cofferd.domain.models import KB_KIND, WORKSPACE_GLOBAL, Document, Passage, utc_from_ns
from cofferd.domain.ports import DocumentWrite, FileStat, IndexedFile, WriteFailure
from cofferd.infrastructure import activity_store, fts, graph_store, keyword_index, vec_index
from cofferd.infrastructure.database import Database
from cofferd.infrastructure.fsutil import atomic_write
from cofferd.infrastructure.schema import MERGE_CONFLICT
from cofferd.infrastructure.search_filter import chunks_within
from cofferd.infrastructure.sqlite import Connection, Error, atomic, damaged, storage_failed
from cofferd.locations import Locations

log = logging.getLogger(__name__)
SCOPE = "kind = ? AND resource_name = ?"
AMBIGUOUS_SHOWN = 5  # documents named when an id prefix fits several
PHRASE_CANDIDATES = 5  # x top_k, read to keep those that hold quoted phrases verbatim


def chunk_id(kb: str, doc_id: str, position: int) -> str:
    scope = hashlib.sha256(f"{KB_KIND}\0{kb}".encode()).hexdigest()[:12]
    return f"{scope}:{doc_id}:{position}"


def document_from_row(row: Any) -> Document:
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
        tags=tuple(json.loads(row["tags"])),
        aliases=tuple(json.loads(row["aliases"])),
    )


def passage_from_row(row: Any, text: str, score: float, snippet: str) -> Passage:
    return Passage(
        document_id=row["document_id"],
        title=row["title"],
        text=text,
        score=score,
        position=int(row["position"]),
        path=row["path"],
        heading=tuple(json.loads(row["heading"])),
        snippet=snippet,
        line_start=int(row["line_start"]),
        line_end=int(row["line_end"]),
    )


def chunk_rows(conn: Connection, key: str, values: Sequence[Any]) -> dict[Any, Any]:
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


def _delete_chunks(conn: Connection, kb: str, doc_id: str) -> None:
    rows = conn.execute(
        f"SELECT seq, id FROM chunks WHERE {SCOPE} AND document_id = ?", (KB_KIND, kb, doc_id)
    ).fetchall()
    if rows:
        keyword_index.delete(conn, kb, [r[0] for r in rows])
        vec_index.delete(conn, kb, [r[1] for r in rows])
        conn.execute(f"DELETE FROM chunks WHERE {SCOPE} AND document_id = ?", (KB_KIND, kb, doc_id))


def _write_document(conn: Connection, kb: str, w: DocumentWrite, actor: str) -> None:
    d = w.document
    new = w.event == "kb_document_ingested"  # a new document has nothing stored to replace
    if not new:
        _delete_chunks(conn, kb, d.id)
    if w.chunks:
        (last,) = conn.execute("SELECT coalesce(max(seq), 0) FROM chunks").fetchone()
        numbered = list(enumerate(w.chunks, start=last + 1))
        conn.executemany(
            "INSERT INTO chunks (seq, id, document_id, kind, resource_name, position, heading,"
            " line_start, line_end) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(seq, chunk_id(kb, d.id, c.position), d.id, KB_KIND, kb, c.position,
              json.dumps(c.heading, ensure_ascii=False), c.line_start, c.line_end)
             for seq, c in numbered],
        )  # fmt: skip
        keyword_index.insert(
            conn, kb, [(seq, c.fts_text, c.fts_heading) for seq, c in numbered], w.fts_meta
        )
    conn.execute(
        """
        INSERT INTO documents (id, kind, resource_name, project_id, path, title, description,
            content_sha256, embed_pending, source_mode, metadata, created_at, updated_at,
            file_size, file_mtime_ns, chunking, tags, aliases)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (kind, resource_name, id) DO UPDATE SET
            path = excluded.path, title = excluded.title, description = excluded.description,
            content_sha256 = excluded.content_sha256, embed_pending = excluded.embed_pending,
            source_mode = excluded.source_mode, metadata = excluded.metadata,
            updated_at = excluded.updated_at, file_size = excluded.file_size,
            file_mtime_ns = excluded.file_mtime_ns, chunking = excluded.chunking,
            tags = excluded.tags, aliases = excluded.aliases,
            embed_error = NULL, embed_retry_at = 0
        """,
        (d.id, KB_KIND, kb, WORKSPACE_GLOBAL, d.path, d.title, d.description, d.content_sha256,
         int(d.embed_pending), d.source_mode,
         _json(d.metadata), d.created_at, d.updated_at,
         w.stat.size, w.stat.mtime_ns, w.chunking, _json(d.tags), _json(d.aliases)),
    )  # fmt: skip
    graph_store.set_tags(conn, kb, d.id, d.tags, new=new)
    graph_store.set_links(conn, kb, d.id, w.links, new=new)
    activity_store.record(conn, w.event, actor, kb, d.id, {"path": d.path, "chunks": len(w.chunks)})


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _remove_document(conn: Connection, kb: str, doc_id: str, actor: str, reason: str) -> bool:
    row = conn.execute(
        f"SELECT path FROM documents WHERE {SCOPE} AND id = ?", (KB_KIND, kb, doc_id)
    ).fetchone()
    if row is None:
        return False
    _delete_chunks(conn, kb, doc_id)
    graph_store.set_tags(conn, kb, doc_id, ())
    graph_store.set_links(conn, kb, doc_id, ())
    conn.execute(f"DELETE FROM documents WHERE {SCOPE} AND id = ?", (KB_KIND, kb, doc_id))
    if reason == "deleted":  # a file that vanished may come back (an unmounted disk)
        conn.execute(
            "DELETE FROM tracked_sources WHERE resource_name = ? AND document_id = ?",
            (kb, doc_id),
        )
    details = {"path": row["path"], "reason": reason}
    activity_store.record(conn, "kb_document_deleted", actor, kb, doc_id, details)
    return True


def _isolated(conn: Connection, write: DocumentWrite, kb: str, actor: str) -> str | None:
    """Write one document in its own savepoint; the reason it could not be, or None."""
    try:
        with atomic(conn):
            _write_document(conn, kb, write, actor)
    except (Error, ValueError, OverflowError) as exc:  # the database or the encoder refused it
        if storage_failed(exc) or damaged(exc):
            raise  # the storage failed, not this document: the batch is retried
        return f"cannot be stored: {type(exc).__name__}: {exc}"[:300]
    return None


def dump_index(conn: Connection, kb: str) -> dict[str, Any]:
    """A canonical picture of everything derived for a KB (index times left out): the
    oracle compares it with the dump of a fresh rebuild from the same files."""
    docs = conn.execute(
        "SELECT id, path, title, description, content_sha256, embed_pending,"
        " source_mode, metadata, file_size, file_mtime_ns, chunking, tags, aliases,"
        " updated_at FROM documents"
        f" WHERE {SCOPE} ORDER BY id",
        (KB_KIND, kb),
    ).fetchall()
    texts = keyword_index.dump(conn, kb)
    chunks = conn.execute(
        "SELECT seq, id, document_id, position, heading, line_start, line_end FROM chunks"
        f" WHERE {SCOPE} ORDER BY id",
        (KB_KIND, kb),
    ).fetchall()
    vectors = vec_index.chunk_ids(conn, kb) if vec_index.available(conn) else []
    return {
        "documents": [tuple(r) for r in docs],
        "chunks": [(*tuple(r)[1:], *texts.get(r[0], (None, None, None))) for r in chunks],
        **graph_store.dump(conn, kb),
        "vectors": vectors,
        "orphan_fts_rows": len(texts) - len(chunks),
    }


def _tracked(conn: Connection, kb: str) -> dict[str, str]:
    rows = conn.execute(
        "SELECT document_id, source_path FROM tracked_sources WHERE resource_name = ?", (kb,)
    ).fetchall()
    return {r[0]: r[1] for r in rows}


class SqliteDocuments:
    """The DocumentIndex port over one SQLite database. Tracked sources are not derived
    from files, so they are also kept in the data home (local/<kb>.sources.json) and
    restored from there when the index is rebuilt."""

    def __init__(self, db: Database, locations: Locations) -> None:
        self.db = db
        self.locations = locations

    async def _save_tracked(self, kb: str) -> None:
        tracked = await self.db.read(lambda conn: _tracked(conn, kb))
        path = self.locations.tracked_sources_path(kb)
        data = json.dumps(tracked, indent=1, sort_keys=True).encode()
        await asyncio.to_thread(atomic_write, path, data, 0o600)

    async def restore_tracked(self, kbs: Sequence[str]) -> None:
        """Tracked sources from the data home into the index (after it was rebuilt)."""
        for kb in kbs:
            path = self.locations.tracked_sources_path(kb)
            try:
                saved = json.loads(await asyncio.to_thread(path.read_bytes))
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                log.error("%s cannot be read (%s); tracked sources not restored", path, exc)
                continue
            rows = [(kb, d, p) for d, p in saved.items() if isinstance(p, str)]
            await self.db.transact(
                lambda conn, rows=rows: conn.executemany(  # type: ignore[misc]
                    "INSERT OR REPLACE INTO tracked_sources"
                    " (resource_name, document_id, source_path) VALUES (?, ?, ?)",
                    rows,
                )
            )

    async def indexed_files(
        self, kb: str, paths: Sequence[str] | None = None
    ) -> dict[str, IndexedFile]:
        """All indexed files of a KB, or those at `paths` or inside them as folders."""

        def run(conn: Connection) -> dict[str, IndexedFile]:
            sql = (
                "SELECT path, id, file_size, file_mtime_ns, content_sha256, chunking"
                f" FROM documents WHERE {SCOPE}"
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
    ) -> list[WriteFailure]:
        """Write a batch in one transaction; the documents that could not be written."""

        def run(conn: Connection) -> list[WriteFailure]:
            conn.executemany(
                "UPDATE documents SET file_size = ?, file_mtime_ns = ?, updated_at = ?"
                f" WHERE {SCOPE} AND id = ?",
                [(stat.size, stat.mtime_ns, utc_from_ns(stat.mtime_ns), KB_KIND, kb, doc_id)
                 for doc_id, stat in restat],
            )  # fmt: skip
            for doc_id in removed:
                _remove_document(conn, kb, doc_id, actor, "file_removed")
            if writes:
                keyword_index.ensure(conn, kb)
            failed = []
            for w in writes:
                reason = _isolated(conn, w, kb, actor)
                if reason is not None:
                    failed.append(WriteFailure(w.document.path, w.stat, reason))
            return failed

        return await self.db.transact(run)

    async def delete_document(self, kb: str, doc_id: str, actor: str) -> bool:
        removed = await self.db.transact(
            lambda conn: _remove_document(conn, kb, doc_id, actor, "deleted")
        )
        await self._save_tracked(kb)
        return removed

    async def document_ids(self, kb: str, paths: Sequence[str]) -> dict[str, str]:
        def run(conn: Connection) -> dict[str, str]:
            found: dict[str, str] = {}
            for path in set(paths):
                row = conn.execute(
                    f"SELECT id FROM documents WHERE {SCOPE} AND path = ?", (KB_KIND, kb, path)
                ).fetchone()
                if row:
                    found[path] = row[0]
            return found

        return await self.db.read(run)

    async def find_by_metadata(self, kb: str, key: str, value: str | None = None) -> list[Document]:
        """Documents whose metadata has `key` (equal to `value` when given), oldest first."""

        def run(conn: Connection) -> list[Document]:
            sql = (
                f"SELECT * FROM documents WHERE {SCOPE}"
                " AND json_extract(metadata, '$.' || ?) IS NOT NULL"
            )
            args: list[Any] = [KB_KIND, kb, key]
            if value is not None:
                sql += " AND json_extract(metadata, '$.' || ?) = ?"
                args += [key, value]
            rows = conn.execute(sql + " ORDER BY created_at, id", args).fetchall()
            return [document_from_row(r) for r in rows]

        return await self.db.read(run)

    async def find_documents(self, kb: str, ref: str) -> list[Document]:
        """The document a reference names: by id, else by path, else the documents whose id
        starts with it (any case; a few, to name them when there are several)."""

        def run(conn: Connection) -> list[Document]:
            for column in ("id", "path"):
                row = conn.execute(
                    f"SELECT * FROM documents WHERE {SCOPE} AND {column} = ?", (KB_KIND, kb, ref)
                ).fetchone()
                if row:
                    return [document_from_row(row)]
            rows = conn.execute(
                f"SELECT * FROM documents WHERE {SCOPE} AND substr(upper(id), 1, ?) = upper(?)"
                " ORDER BY id LIMIT ?",
                (KB_KIND, kb, len(ref), ref, AMBIGUOUS_SHOWN),
            ).fetchall()
            return [document_from_row(r) for r in rows]

        return await self.db.read(run)

    async def merge_conflicts(self, kb: str) -> list[Document]:
        """Documents holding git's merge markers (through their partial index)."""

        def run(conn: Connection) -> list[Document]:
            rows = conn.execute(
                f"SELECT * FROM documents INDEXED BY idx_documents_conflict WHERE {SCOPE}"
                f" AND {MERGE_CONFLICT}",
                (KB_KIND, kb),
            ).fetchall()
            return sorted((document_from_row(r) for r in rows), key=lambda d: d.path)

        return await self.db.read(run)

    async def get_document(self, kb: str, doc_id: str) -> Document | None:
        def run(conn: Connection) -> Document | None:
            row = conn.execute(
                f"SELECT * FROM documents WHERE {SCOPE} AND id = ?", (KB_KIND, kb, doc_id)
            ).fetchone()
            return document_from_row(row) if row else None

        return await self.db.read(run)

    async def list_documents(
        self, kb: str, *, q: str | None, limit: int, offset: int
    ) -> tuple[list[Document], int]:
        def run(conn: Connection) -> tuple[list[Document], int]:
            where = SCOPE
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
            return [document_from_row(r) for r in rows], int(total[0])

        return await self.db.read(run)

    async def keyword_search(
        self, kb: str, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[Passage]:
        """BM25 over words; when nothing matches, the words are tried again as prefixes."""
        parsed = fts.parse_query(query)
        match = parsed.match()
        if match is None:
            return []
        within = chunks_within(kb, filters, "seq") if filters else None

        def run(conn: Connection) -> list[Passage]:
            if parsed.phrases:  # stemmed matches are checked word for word
                hits = self._hits(conn, kb, match, top_k * PHRASE_CANDIDATES, within)
                return [h for h in hits if parsed.holds_phrases(h.text)][:top_k]
            hits = self._hits(conn, kb, match, top_k, within)
            if not hits:
                hits = self._hits(conn, kb, parsed.match(prefix=True) or match, top_k, within)
            return hits

        return await self.db.read(run)

    @staticmethod
    def _hits(
        conn: Connection, kb: str, match: str, top_k: int, within: tuple[str, list[Any]] | None
    ) -> list[Passage]:
        found = keyword_index.search(conn, kb, match, top_k, within)
        if not found:
            return []
        rows = chunk_rows(conn, "seq", [h["seq"] for h in found])
        return [
            passage_from_row(
                rows[h["seq"]],
                fts.display_text(h["text"]),
                float(h["score"]),
                fts.display_text(h["snip"]),
            )
            for h in found
            if h["seq"] in rows
        ]

    async def delete_kb(self, kb: str) -> int:
        def run(conn: Connection) -> int:
            keyword_index.drop(conn, kb)
            vec_index.drop(conn, kb)
            conn.execute(f"DELETE FROM chunks WHERE {SCOPE}", (KB_KIND, kb))
            graph_store.drop_kb(conn, kb)
            conn.execute("DELETE FROM tracked_sources WHERE resource_name = ?", (kb,))
            cur = conn.execute(f"DELETE FROM documents WHERE {SCOPE}", (KB_KIND, kb))
            return int(cur.rowcount)

        return await self.db.transact(run)

    async def track_source(self, kb: str, doc_id: str, source_path: str) -> None:
        await self.db.transact(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO tracked_sources"
                " (resource_name, document_id, source_path) VALUES (?, ?, ?)",
                (kb, doc_id, source_path),
            )
        )
        await self._save_tracked(kb)

    async def tracked_sources(self, kb: str) -> dict[str, str]:
        return await self.db.read(lambda conn: _tracked(conn, kb))

    async def metrics(self, kb: str) -> dict[str, int]:
        def run(conn: Connection) -> dict[str, int]:
            docs, pending, degraded, doc_bytes = conn.execute(
                "SELECT count(*), coalesce(sum(embed_pending), 0),"
                " count(embed_error), coalesce(sum(file_size), 0)"
                f" FROM documents WHERE {SCOPE}",
                (KB_KIND, kb),
            ).fetchone()
            (chunks,) = conn.execute(
                f"SELECT count(*) FROM chunks WHERE {SCOPE}", (KB_KIND, kb)
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

    async def total_changes(self) -> int:
        return await self.db.write(lambda conn: int(conn.total_changes))
