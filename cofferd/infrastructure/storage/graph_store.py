"""What connects documents: their tags and links (the GraphStore port over SQLite).

Both are derived from the files like chunks are, written with their document in one
transaction (write_path calls `set_tags`/`set_links`), so a rebuild reproduces them.
Links are stored as written; what they lead to is resolved when asked (domain.links), so
a document created later is found by links written earlier.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from cofferd.domain.index_records import DocumentWrite, GraphRows, LinkRow
from cofferd.domain.links import Link
from cofferd.domain.models import KB_KIND
from cofferd.domain.tags import tag_key
from cofferd.infrastructure.storage.database import Database
from cofferd.infrastructure.storage.sqlite import Connection, Cursor

SCOPE = "kind = ? AND resource_name = ?"
GRAPH_BATCH = 10_000  # links read at a time for a graph
T = TypeVar("T")


def add(conn: Connection, kb: str, writes: Sequence[DocumentWrite]) -> None:
    """The tags and links of documents that have none stored (new, or cleared)."""
    tags = [
        (KB_KIND, kb, w.document.id, key)
        for w in writes
        for key in dict.fromkeys(tag_key(t) for t in w.document.tags)
    ]
    links = [
        (KB_KIND, kb, w.document.id, k.line, k.type, k.target, k.key, k.name, k.alias, k.alias_name)
        for w in writes
        for k in w.links
    ]
    if tags:
        conn.executemany(
            "INSERT INTO document_tags (kind, resource_name, document_id, tag) VALUES (?, ?, ?, ?)",
            tags,
        )
    if links:
        conn.executemany(
            "INSERT INTO links (kind, resource_name, document_id, line, type, target, key, name,"
            " alias, alias_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            links,
        )


def clear(conn: Connection, kb: str, doc_id: str) -> None:
    """A document's tags and links."""
    conn.execute(
        f"DELETE FROM document_tags WHERE {SCOPE} AND document_id = ?", (KB_KIND, kb, doc_id)
    )
    conn.execute(f"DELETE FROM links WHERE {SCOPE} AND document_id = ?", (KB_KIND, kb, doc_id))


def drop_kb(conn: Connection, kb: str) -> None:
    conn.execute(f"DELETE FROM document_tags WHERE {SCOPE}", (KB_KIND, kb))
    conn.execute(f"DELETE FROM links WHERE {SCOPE}", (KB_KIND, kb))


def dump(conn: Connection, kb: str) -> dict[str, list[tuple[object, ...]]]:
    tags = conn.execute(
        f"SELECT document_id, tag FROM document_tags WHERE {SCOPE} ORDER BY 1, 2", (KB_KIND, kb)
    )
    links = conn.execute(
        f"SELECT document_id, line, type, target, key, alias FROM links WHERE {SCOPE}"
        " ORDER BY 1, 2, 3, 4",
        (KB_KIND, kb),
    )
    return {"tags": [tuple(r) for r in tags], "links": [tuple(r) for r in links]}


_LINKS = (
    "SELECT l.document_id, d.path, l.type, l.target, l.key, l.line, l.alias FROM links l"
    " JOIN documents d ON d.kind = l.kind AND d.resource_name = l.resource_name"
    " AND d.id = l.document_id WHERE l.kind = ? AND l.resource_name = ?"
)


def _rows(rows: Sequence[tuple[str, str, str, str, str, int, str | None]]) -> list[LinkRow]:
    return [(r[0], r[1], Link(r[2], r[3], r[4], int(r[5]), alias=r[6])) for r in rows]  # type: ignore[arg-type]


def _batched(cursor: Cursor) -> Iterator[Any]:
    while batch := cursor.fetchmany(GRAPH_BATCH):
        yield from batch


class SqliteGraph:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def links_from(self, kb: str, doc_id: str) -> list[LinkRow]:
        sql = _LINKS + " AND l.document_id = ? ORDER BY l.line"
        return await self.db.read(
            lambda conn: _rows(conn.execute(sql, (KB_KIND, kb, doc_id)).fetchall())
        )

    async def links_named(self, kb: str, names: Sequence[str]) -> list[LinkRow]:
        """Links whose key ends in one of these names, or whose alias does (what a GitHub
        wiki reads them by): those that may lead to a file so named
        (`link_targets.names_leading_to`)."""
        marks = ", ".join("?" * len(names))
        named = f"SELECT rowid FROM links WHERE {SCOPE} AND {{}} IN ({marks})"
        sql = (
            _LINKS + f" AND l.rowid IN ({named.format('name')} UNION {named.format('alias_name')})"
            " ORDER BY d.path, l.line"
        )
        scope = (KB_KIND, kb, *names)
        return await self.db.read(
            lambda conn: _rows(conn.execute(sql, (KB_KIND, kb, *scope, *scope)).fetchall())
        )

    async def all_links(self, kb: str) -> list[LinkRow]:
        sql = _LINKS + " ORDER BY d.path, l.line"
        return await self.db.read(lambda conn: _rows(conn.execute(sql, (KB_KIND, kb)).fetchall()))

    async def document_paths(self, kb: str) -> dict[str, str]:
        """Every document's path, with its id."""

        def run(conn: Connection) -> dict[str, str]:
            rows = conn.execute(f"SELECT path, id FROM documents WHERE {SCOPE}", (KB_KIND, kb))
            return {r[0]: r[1] for r in rows}

        return await self.db.read(run)

    async def path_page(self, kb: str, limit: int, offset: int) -> tuple[list[str], int]:
        """A page of the documents' paths in order, and how many documents there are."""

        def run(conn: Connection) -> tuple[list[str], int]:
            sql = f"SELECT path FROM documents WHERE {SCOPE} ORDER BY path LIMIT ? OFFSET ?"
            page = [r[0] for r in conn.execute(sql, (KB_KIND, kb, limit, offset))]
            total = conn.execute(f"SELECT count(*) FROM documents WHERE {SCOPE}", (KB_KIND, kb))
            return page, int(total.fetchone()[0])

        return await self.db.read(run)

    async def document_changes(self) -> dict[str, int]:
        """How often each KB's documents changed their names or recency (schema 10)."""

        def run(conn: Connection) -> dict[str, int]:
            rows = conn.execute(
                "SELECT resource_name, changes FROM document_changes WHERE kind = ?", (KB_KIND,)
            )
            return {r[0]: r[1] for r in rows}

        return await self.db.read(run)

    async def names(self, kb: str) -> list[tuple[str, str, str, str]]:
        """Every document's (path, title, aliases as JSON, updated_at): edited last first,
        then the shorter path."""

        def run(conn: Connection) -> list[tuple[str, str, str, str]]:
            cursor = conn.cursor()
            cursor.row_factory = None  # plain tuples
            sql = (
                f"SELECT path, title, aliases, updated_at FROM documents WHERE {SCOPE}"
                " ORDER BY updated_at DESC, length(path), path"
            )
            return list(cursor.execute(sql, (KB_KIND, kb)))

        return await self.db.read(run)

    async def links_sample(self, kb: str, limit: int) -> list[tuple[str, str]]:
        """Up to `limit` of the KB's links, (type, target as written): the first stored."""

        def run(conn: Connection) -> list[tuple[str, str]]:
            sql = f"SELECT type, target FROM links WHERE {SCOPE} LIMIT ?"
            return [(r[0], r[1]) for r in conn.execute(sql, (KB_KIND, kb, limit))]

        return await self.db.read(run)

    async def graph(self, kb: str, draw: Callable[[GraphRows], T]) -> T:
        """`draw` of what the graph of a KB is drawn from, in one query each: every
        document's (id, path, title, its tags joined by a newline), and every link's
        (linking document's id, type, key, target as written, alias), read `GRAPH_BATCH` at a
        time as `draw` goes."""

        def run(conn: Connection) -> T:
            cursor = conn.cursor()
            cursor.row_factory = None  # plain tuples
            documents = list(
                cursor.execute(
                    "SELECT d.id, d.path, d.title, (SELECT group_concat(t.tag, char(10))"
                    " FROM document_tags t WHERE t.kind = d.kind"
                    " AND t.resource_name = d.resource_name AND t.document_id = d.id)"
                    f" FROM documents d WHERE d.{SCOPE.replace(' AND ', ' AND d.')}",
                    (KB_KIND, kb),
                )
            )
            links = conn.cursor()
            links.row_factory = None
            # by the linking document's id, in the order of its index: a document's links
            # were written together, so the rows are read in runs (a join on documents, or
            # the name's index, reads them one seek at a time: 4-8x slower)
            links.execute(
                "SELECT document_id, type, key, target, alias FROM links"
                f" INDEXED BY idx_links_document WHERE {SCOPE}",
                (KB_KIND, kb),
            )
            return draw(GraphRows(documents, _batched(links)))

        return await self.db.read(run)

    async def tag_counts(
        self, kb: str, limit: int, offset: int
    ) -> tuple[list[tuple[str, int]], int]:
        """A page of the tags and how many documents carry each, most used first; and how
        many tags there are."""

        def run(conn: Connection) -> tuple[list[tuple[str, int]], int]:
            rows = conn.execute(
                f"SELECT tag, count(*) FROM document_tags WHERE {SCOPE}"
                " GROUP BY tag ORDER BY 2 DESC, 1 LIMIT ? OFFSET ?",
                (KB_KIND, kb, limit, offset),
            )
            page = [(r[0], int(r[1])) for r in rows]
            total = conn.execute(
                f"SELECT count(DISTINCT tag) FROM document_tags WHERE {SCOPE}", (KB_KIND, kb)
            )
            return page, int(total.fetchone()[0])

        return await self.db.read(run)
