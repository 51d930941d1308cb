"""The `documents` rows: the only module that writes them (a document as indexed, the size
and time of its file, its embed flags `embed_pending`/`embed_error`/`embed_retry_at`), the
lookups over them, the titles converted documents go by while another gives itself theirs
(`retitle`, domain.title_choice), and the DocumentCatalog port. Long on purpose: the one
module of the table's rows. Beside it, only schema.py's migrations
write the table: they add its columns, emptied it once (5) and marked PDFs and decks to be
chunked again (13), and their triggers (10) count its changes of names in
`document_changes`.

The functions take a connection and run inside the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cofferd.domain.file_records import FileStat
from cofferd.domain.formats import CONVERTED_FORMATS, format_of
from cofferd.domain.index_records import DocumentWrite, IndexedFile, IndexedFiles
from cofferd.domain.models import KB_KIND, WORKSPACE_GLOBAL, Document, utc_from_ns
from cofferd.domain.title_choice import Titled, chosen, folded
from cofferd.infrastructure.storage.database import Database
from cofferd.infrastructure.storage.schema import DEGRADED, MERGE_CONFLICT
from cofferd.infrastructure.storage.sqlite import Connection

SCOPE = "kind = ? AND resource_name = ?"
NAMED_BY = ("title", "path", "aliases")  # what finding a document by name looks in
AMBIGUOUS_SHOWN = 5  # documents named when an id prefix fits several
EMBED_ERROR_CHARS = 500
DETAILS_PER_QUERY = 10_000  # paths in one JSON list


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


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


# -- writes ---------------------------------------------------------------------------------


def upsert(conn: Connection, kb: str, writes: Sequence[DocumentWrite]) -> None:
    """The documents' rows, inserted or replaced (a replaced row forgets its last embed
    failure)."""
    conn.executemany(
        """
        INSERT INTO documents (id, kind, resource_name, project_id, path, title, description,
            content_sha256, embed_pending, source_mode, metadata, created_at, updated_at,
            file_size, file_mtime_ns, chunking, tags, aliases, format, own_title, heading_title)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (kind, resource_name, id) DO UPDATE SET
            path = excluded.path, title = excluded.title, description = excluded.description,
            content_sha256 = excluded.content_sha256, embed_pending = excluded.embed_pending,
            source_mode = excluded.source_mode, metadata = excluded.metadata,
            updated_at = excluded.updated_at, file_size = excluded.file_size,
            file_mtime_ns = excluded.file_mtime_ns, chunking = excluded.chunking,
            tags = excluded.tags, aliases = excluded.aliases, format = excluded.format,
            own_title = excluded.own_title, heading_title = excluded.heading_title,
            embed_error = NULL, embed_retry_at = 0
        """,
        [(d.id, KB_KIND, kb, WORKSPACE_GLOBAL, d.path, d.title, d.description,
          d.content_sha256, int(d.embed_pending), d.source_mode,
          _json(d.metadata), d.created_at, d.updated_at,
          w.stat.size, w.stat.mtime_ns, w.chunking, _json(d.tags), _json(d.aliases),
          format_of(d.path), d.title if w.heading_title else None, w.heading_title)
         for w in writes for d in (w.document,)],
    )  # fmt: skip


# A document's own title is the one it gives itself: `own_title`, kept where it has a
# heading to go by instead, else its `title`. Both compared in any ASCII case (indexed).


def own_titles(conn: Connection, kb: str, ids: Sequence[str]) -> list[str]:
    """The own titles of these documents (those indexed): what their removal or their new
    text may leave to one document again."""
    if not ids:
        return []
    rows = conn.execute(
        f"SELECT coalesce(own_title, title) FROM documents WHERE {SCOPE}"
        " AND id IN (SELECT value FROM json_each(?))",
        (KB_KIND, kb, json.dumps(list(ids))),
    )
    return [r[0] for r in rows]


def retitle(conn: Connection, kb: str, titles: Sequence[str]) -> None:
    """Title the documents that give themselves one of `titles` as domain.title_choice
    chooses: a converted document whose own title another document gives itself too goes
    by its first heading. A document titled by its heading that another now gives itself
    goes back to its own, and the documents of that own title are chosen for again."""
    todo, done = list(titles), set()
    while todo:
        title = todo.pop()
        if folded(title) in done:
            continue
        done.add(folded(title))
        rows = conn.execute(
            " UNION ".join(  # each by its index
                f"SELECT id, title, own_title, heading_title FROM documents"
                f" WHERE {SCOPE} AND {column} = ? COLLATE NOCASE"
                for column in ("own_title", "title")
            ),
            (KB_KIND, kb, title) * 2,
        ).fetchall()
        owners = [r for r in rows if folded(r[2] or r[1]) == folded(title)]
        if owners:  # by their headings into a title another gives itself now: chosen again
            todo += [r[2] for r in rows if r[2] and folded(r[2]) != folded(title)]
        titled = {r[0]: r[1] for r in owners}
        choice = chosen(
            [Titled(r[0], r[2] or r[1], r[3]) for r in owners],
            lambda heading, doc_id: _own_title_taken(conn, kb, heading, doc_id),
        )
        conn.executemany(
            f"UPDATE documents SET title = ? WHERE {SCOPE} AND id = ?",
            [(new, KB_KIND, kb, i) for i, new in choice.items() if titled[i] != new],
        )


def _own_title_taken(conn: Connection, kb: str, title: str, doc_id: str) -> bool:
    """Whether a document but `doc_id` gives itself `title` (any ASCII case)."""
    return any(
        conn.execute(
            f"SELECT 1 FROM documents WHERE {SCOPE} AND {own} AND id != ? LIMIT 1",
            (KB_KIND, kb, title, doc_id),
        ).fetchone()
        for own in (
            "own_title = ? COLLATE NOCASE",
            "own_title IS NULL AND title = ? COLLATE NOCASE",
        )
    )


def set_aside(conn: Connection, kb: str, title: str) -> list[tuple[str, str, str]]:
    """(id, path, title) of the documents titled by their first heading that give
    themselves `title` (any ASCII case)."""
    rows = conn.execute(
        "SELECT id, path, title FROM documents"
        f" WHERE {SCOPE} AND own_title = ? COLLATE NOCASE AND title != own_title",
        (KB_KIND, kb, title),
    )
    return [(r[0], r[1], r[2]) for r in rows]


def restat(conn: Connection, kb: str, stats: Sequence[tuple[str, FileStat]]) -> None:
    """Files touched without a change of content: their new size and time, by document id."""
    conn.executemany(
        "UPDATE documents SET file_size = ?, file_mtime_ns = ?, updated_at = ?"
        f" WHERE {SCOPE} AND id = ?",
        [(stat.size, stat.mtime_ns, utc_from_ns(stat.mtime_ns), KB_KIND, kb, doc_id)
         for doc_id, stat in stats],
    )  # fmt: skip


def delete(conn: Connection, kb: str, doc_id: str) -> None:
    conn.execute(f"DELETE FROM documents WHERE {SCOPE} AND id = ?", (KB_KIND, kb, doc_id))


def delete_kb(conn: Connection, kb: str) -> int:
    cur = conn.execute(f"DELETE FROM documents WHERE {SCOPE}", (KB_KIND, kb))
    return int(cur.rowcount)


# -- embed flags ----------------------------------------------------------------------------


def due_embeds(conn: Connection, kb: str, now: float, limit: int) -> list[tuple[str, str, str]]:
    """(id, content_sha256, chunking) of documents that owe vectors and are due."""
    rows = conn.execute(
        f"SELECT id, content_sha256, chunking FROM documents WHERE {SCOPE}"
        " AND embed_pending = 1 AND embed_retry_at <= ? ORDER BY embed_retry_at, id"
        " LIMIT ?",
        (KB_KIND, kb, now, limit),
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def content_of(conn: Connection, kb: str, doc_id: str) -> tuple[str, str] | None:
    """(content_sha256, chunking) of the document as stored now."""
    row = conn.execute(
        f"SELECT content_sha256, chunking FROM documents WHERE {SCOPE} AND id = ?",
        (KB_KIND, kb, doc_id),
    ).fetchone()
    return (row[0], row[1]) if row else None


def embedded(conn: Connection, kb: str, doc_id: str) -> None:
    conn.execute(
        "UPDATE documents SET embed_pending = 0, embed_error = NULL,"
        f" embed_retry_at = 0 WHERE {SCOPE} AND id = ?",
        (KB_KIND, kb, doc_id),
    )


def embed_failed(
    conn: Connection, kb: str, doc_ids: Sequence[str], error: str, retry_at: float
) -> None:
    conn.executemany(
        f"UPDATE documents SET embed_error = ?, embed_retry_at = ? WHERE {SCOPE} AND id = ?",
        [(error[:EMBED_ERROR_CHARS], retry_at, KB_KIND, kb, d) for d in doc_ids],
    )


def owe_vectors(conn: Connection, kb: str, pending: bool) -> None:
    """Every document of the KB owes vectors (`pending`), or none does."""
    conn.execute(
        "UPDATE documents SET embed_pending = ?, embed_error = NULL,"
        f" embed_retry_at = 0 WHERE {SCOPE}",
        (int(pending), KB_KIND, kb),
    )


def retry_embeds_now(conn: Connection, kb: str) -> None:
    conn.execute(
        f"UPDATE documents SET embed_retry_at = 0 WHERE {SCOPE}"
        " AND embed_pending = 1 AND embed_retry_at > 0",
        (KB_KIND, kb),
    )


# -- lookups --------------------------------------------------------------------------------


def indexed_files(
    conn: Connection, kb: str, chunking: str, paths: Sequence[str] | None = None
) -> IndexedFiles:
    """All indexed files of a KB, or those at `paths` or inside them as folders: their
    sizes and times, the time NULL where they were chunked otherwise than `chunking`."""
    sql = (
        "SELECT path, file_size, CASE WHEN chunking = ? THEN file_mtime_ns END"
        f" FROM documents WHERE {SCOPE}"
    )
    cursor = conn.cursor()
    cursor.row_factory = None  # plain tuples, kept as they are (IndexedFiles)
    if paths is None:
        rows = cursor.execute(sql, (chunking, KB_KIND, kb)).fetchall()
    else:
        rows = []
        for p in paths:
            # One index range holds `p` and everything under `p/` ('0' sorts right after
            # '/'); it also holds siblings like `p.md`, dropped here.
            rows += [
                r
                for r in cursor.execute(
                    sql + " AND path >= ? AND path < ?", (chunking, KB_KIND, kb, p, p + "0")
                )
                if r[0] == p or r[0].startswith(p + "/")
            ]
    return IndexedFiles(rows)


def indexed_details(conn: Connection, kb: str, paths: Sequence[str]) -> dict[str, IndexedFile]:
    """What the index remembers of each of these files, by path (those it holds)."""
    found: dict[str, IndexedFile] = {}
    cursor = conn.cursor()
    cursor.row_factory = None
    for start in range(0, len(paths), DETAILS_PER_QUERY):
        listed = json.dumps(paths[start : start + DETAILS_PER_QUERY])
        for path, doc_id, size, mtime_ns, sha, chunking in cursor.execute(
            "SELECT d.path, d.id, d.file_size, d.file_mtime_ns, d.content_sha256, d.chunking"
            " FROM json_each(?) AS asked CROSS JOIN documents AS d"
            " ON d.kind = ? AND d.resource_name = ? AND d.path = asked.value",
            (listed, KB_KIND, kb),
        ):
            found[path] = IndexedFile(doc_id, FileStat(size, mtime_ns), sha, chunking)
    return found


def path_of(conn: Connection, kb: str, doc_id: str) -> str | None:
    row = conn.execute(
        f"SELECT path FROM documents WHERE {SCOPE} AND id = ?", (KB_KIND, kb, doc_id)
    ).fetchone()
    return str(row[0]) if row else None


def ids_by_path(conn: Connection, kb: str, paths: Sequence[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in set(paths):
        row = conn.execute(
            f"SELECT id FROM documents WHERE {SCOPE} AND path = ?", (KB_KIND, kb, path)
        ).fetchone()
        if row:
            found[path] = row[0]
    return found


def get(conn: Connection, kb: str, doc_id: str) -> Document | None:
    row = conn.execute(
        f"SELECT * FROM documents WHERE {SCOPE} AND id = ?", (KB_KIND, kb, doc_id)
    ).fetchone()
    return document_from_row(row) if row else None


def find(conn: Connection, kb: str, ref: str) -> list[Document]:
    """The document a reference names: by id, else by path, else the documents whose id
    starts with it (any case; a few, to name them when there are several)."""
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


def names(conn: Connection, kb: str, like: str | None) -> list[tuple[str, str, str]]:
    """(id, path, title) of every document of the KB; with `like`, of those whose path
    holds it or whose title is it (in any ASCII case, as LIKE compares)."""
    where, args = SCOPE, [KB_KIND, kb]
    if like is not None:
        where += " AND (path LIKE ? ESCAPE '\\' OR title LIKE ? ESCAPE '\\')"
        args += [f"%{_like_escaped(like)}%", _like_escaped(like)]
    rows = conn.execute(f"SELECT id, path, title FROM documents WHERE {where}", args)
    return [(r[0], r[1], r[2]) for r in rows]


def _like_escaped(text: str) -> str:
    """`text` matched as it is by LIKE ... ESCAPE '\\'."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def by_metadata(conn: Connection, kb: str, key: str, value: str | None) -> list[Document]:
    """Documents whose metadata has `key` (equal to `value` when given), oldest first."""
    sql = f"SELECT * FROM documents WHERE {SCOPE} AND json_extract(metadata, '$.' || ?) IS NOT NULL"
    args: list[Any] = [KB_KIND, kb, key]
    if value is not None:
        sql += " AND json_extract(metadata, '$.' || ?) = ?"
        args += [key, value]
    rows = conn.execute(sql + " ORDER BY created_at, id", args).fetchall()
    return [document_from_row(r) for r in rows]


def merge_conflicts(conn: Connection, kb: str) -> list[Document]:
    """Documents holding git's merge markers (through their partial index), by path."""
    rows = conn.execute(
        f"SELECT * FROM documents INDEXED BY idx_documents_conflict WHERE {SCOPE}"
        f" AND {MERGE_CONFLICT}",
        (KB_KIND, kb),
    ).fetchall()
    return sorted((document_from_row(r) for r in rows), key=lambda d: d.path)


def degraded(
    conn: Connection, kb: str, first: int, among: Sequence[str]
) -> tuple[list[tuple[str, list[str]]], int, int]:
    """(path, why) of the first `first` documents by path indexed in a bounded form; how
    many there are; how many of them are at the paths `among`."""
    where = f" FROM documents INDEXED BY idx_documents_degraded WHERE {SCOPE} AND {DEGRADED}"
    rows = conn.execute(
        f"SELECT path, json_extract(metadata, '$.degraded') {where} ORDER BY path LIMIT ?",
        (KB_KIND, kb, first),
    ).fetchall()
    total = int(conn.execute(f"SELECT count(*) {where}", (KB_KIND, kb)).fetchone()[0])
    shared = 0
    for at in range(0, len(among), 500):  # within SQLite's bound on parameters
        part = among[at : at + 500]
        marks = ", ".join("?" * len(part))
        found = conn.execute(f"SELECT count(*) {where} AND path IN ({marks})", (KB_KIND, kb, *part))
        shared += int(found.fetchone()[0])
    return [(path, json.loads(why)) for path, why in rows], total, shared


def page(
    conn: Connection, kb: str, q: str | None, limit: int, offset: int
) -> tuple[list[Document], int]:
    """Documents newest first (when `q` is given, those whose title, file name or an alias
    holds it, in any ASCII case), and how many there are."""
    where = SCOPE
    args: list[Any] = [KB_KIND, kb]
    if q:
        where += (
            " AND (" + " OR ".join(f"lower({c}) LIKE lower(?) ESCAPE '\\'" for c in NAMED_BY) + ")"
        )
        args += [f"%{_like_escaped(q)}%"] * len(NAMED_BY)
    total = conn.execute(f"SELECT count(*) FROM documents WHERE {where}", args).fetchone()
    rows = conn.execute(
        f"SELECT * FROM documents WHERE {where} ORDER BY updated_at DESC, id LIMIT ? OFFSET ?",
        [*args, limit, offset],
    ).fetchall()
    return [document_from_row(r) for r in rows], int(total[0])


def formats(conn: Connection, kb: str) -> dict[str, int]:
    rows = conn.execute(
        f"SELECT format, count(*) FROM documents WHERE {SCOPE} GROUP BY format", (KB_KIND, kb)
    )
    return {r[0]: int(r[1]) for r in rows}


def converted_files(conn: Connection, kb: str) -> dict[str, list[str]]:
    marks = ", ".join("?" * len(CONVERTED_FORMATS))
    found: dict[str, list[str]] = {}
    for digest, path in conn.execute(
        f"SELECT content_sha256, path FROM documents WHERE {SCOPE} AND format IN ({marks})",
        (KB_KIND, kb, *CONVERTED_FORMATS),
    ):
        found.setdefault(digest, []).append(path)
    return found


def counts(conn: Connection, kb: str) -> dict[str, int]:
    """`documents_degraded`: indexed in a bounded form (over a budget), or its last
    embedding failed (keyword search and grep still find it)."""
    docs, pending, embed_failed, doc_bytes = conn.execute(
        "SELECT count(*), coalesce(sum(embed_pending), 0),"
        " count(embed_error), coalesce(sum(file_size), 0)"
        f" FROM documents WHERE {SCOPE}",
        (KB_KIND, kb),
    ).fetchone()
    (bounded,) = conn.execute(
        f"SELECT count(*) FROM documents INDEXED BY idx_documents_degraded WHERE {SCOPE}"
        f" AND {DEGRADED} AND embed_error IS NULL",
        (KB_KIND, kb),
    ).fetchone()
    return {
        "documents": docs,
        "documents_degraded": embed_failed + bounded,
        "embed_pending": pending,
        "document_bytes": doc_bytes,
    }


def dump(conn: Connection, kb: str) -> list[tuple[Any, ...]]:
    """Every row of the KB as the oracle compares it (the index time left out)."""
    rows = conn.execute(
        "SELECT id, path, title, description, content_sha256, embed_pending,"
        " source_mode, metadata, file_size, file_mtime_ns, chunking, tags, aliases,"
        f" updated_at FROM documents WHERE {SCOPE} ORDER BY id",
        (KB_KIND, kb),
    ).fetchall()
    return [tuple(r) for r in rows]


class SqliteDocumentCatalog:
    """The DocumentCatalog port: documents as indexed, looked up on the readers."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def find_documents(self, kb: str, ref: str) -> list[Document]:
        return await self.db.read(lambda conn: find(conn, kb, ref))

    async def set_aside_titles(self, kb: str, title: str) -> list[tuple[str, str, str]]:
        return await self.db.read(lambda conn: set_aside(conn, kb, title))

    async def document_names(self, kb: str, like: str | None = None) -> list[tuple[str, str, str]]:
        return await self.db.read(lambda conn: names(conn, kb, like))

    async def get_document(self, kb: str, doc_id: str) -> Document | None:
        return await self.db.read(lambda conn: get(conn, kb, doc_id))

    async def merge_conflicts(self, kb: str) -> list[Document]:
        return await self.db.read(lambda conn: merge_conflicts(conn, kb))

    async def list_documents(
        self, kb: str, *, q: str | None, limit: int, offset: int
    ) -> tuple[list[Document], int]:
        return await self.db.read(lambda conn: page(conn, kb, q, limit, offset))

    async def document_ids(self, kb: str, paths: Sequence[str]) -> dict[str, str]:
        return await self.db.read(lambda conn: ids_by_path(conn, kb, paths))

    async def find_by_metadata(self, kb: str, key: str, value: str | None = None) -> list[Document]:
        return await self.db.read(lambda conn: by_metadata(conn, kb, key, value))
