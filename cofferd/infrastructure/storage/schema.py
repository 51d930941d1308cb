"""Schema migrations keyed on ``PRAGMA user_version``; each applies in one transaction."""

from __future__ import annotations

from collections.abc import Callable

from cofferd.domain.models import KB_KIND
from cofferd.infrastructure.storage import fts_index, fts_text, vec_index
from cofferd.infrastructure.storage.sqlite import Connection, atomic

# Every SQL object the index owns. Text is stored once, inside an FTS table; a chunk's
# FTS rowid is its `chunks.seq`.
Migration = str | Callable[[Connection], None]
MERGE_CONFLICT = "json_extract(metadata, '$.conflict') IS NOT NULL"  # as queries write it
DEGRADED = "json_extract(metadata, '$.degraded') IS NOT NULL"


def _fts_table_per_kb(conn: Connection) -> None:
    """5: one FTS table per knowledge base (fts_index). The derived rows are dropped
    and rebuilt from the files by the next reconcile; tracking, audit and the MCP log stay."""
    for (kb,) in conn.execute("SELECT resource_name FROM vec_tables").fetchall():
        vec_index.drop(conn, kb)
    conn.execute("DELETE FROM chunks")
    conn.execute("DELETE FROM documents")
    conn.execute("DROP TABLE documents_fts")
    conn.execute(
        "CREATE TABLE fts_tables (resource_name TEXT NOT NULL PRIMARY KEY,"
        " table_name TEXT NOT NULL)"
    )


def _tags_links_and_titles(conn: Connection) -> None:
    """7: tags (filterable), aliases and links (as written, resolved when asked); each FTS
    table gains a `meta` column (title, aliases, tags). FTS5 cannot add a column: each
    table is copied into a new one, so search keeps working until the next reconcile
    (INDEX_FORMAT v4) fills `meta`."""
    conn.execute("ALTER TABLE documents ADD COLUMN tags TEXT NOT NULL DEFAULT '[]'")
    conn.execute("ALTER TABLE documents ADD COLUMN aliases TEXT NOT NULL DEFAULT '[]'")
    conn.execute(
        "CREATE TABLE document_tags (kind TEXT NOT NULL, resource_name TEXT NOT NULL,"
        " document_id TEXT NOT NULL, tag TEXT NOT NULL,"
        " PRIMARY KEY (kind, resource_name, tag, document_id)) WITHOUT ROWID"
    )
    conn.execute(
        "CREATE INDEX idx_document_tags_document ON document_tags(kind, resource_name, document_id)"
    )
    conn.execute(
        "CREATE TABLE links (kind TEXT NOT NULL, resource_name TEXT NOT NULL,"
        " document_id TEXT NOT NULL, line INTEGER NOT NULL, type TEXT NOT NULL,"
        " target TEXT NOT NULL, key TEXT NOT NULL, name TEXT NOT NULL)"
    )
    conn.execute("CREATE INDEX idx_links_document ON links(kind, resource_name, document_id)")
    conn.execute("CREATE INDEX idx_links_name ON links(kind, resource_name, name)")
    # status counts documents with merge markers: the few, not a scan of every document
    conn.execute(
        "CREATE INDEX idx_documents_conflict ON documents(kind, resource_name)"
        f" WHERE {MERGE_CONFLICT}"
    )
    for (name,) in conn.execute("SELECT table_name FROM fts_tables").fetchall():
        fts_index.create(conn, f"{name}_v7")
        conn.execute(
            f"INSERT INTO {name}_v7 (rowid, text, heading, meta)"
            f" SELECT rowid, text, heading, '' FROM {name}"
        )
        conn.execute(f"DROP TABLE {name}")
        conn.execute(f"ALTER TABLE {name}_v7 RENAME TO {name}")


def _int8_vectors(conn: Connection) -> None:
    """9: vectors stored as int8 (vec_index), copied from each KB's float32 table."""
    for kb, table, dimensions in conn.execute(
        "SELECT resource_name, table_name, dimensions FROM vec_tables"
    ).fetchall():
        vec_index.requantize(conn, kb, table, int(dimensions))


def _document_changes(conn: Connection) -> None:
    """10: a count per KB of changes to its documents' names (path, title, aliases) and
    recency, kept by triggers in the writing transaction: what was read of them together
    with the count stays good while the count does. Embedding and other writes leave it.
    A KB's count starts at the time in microseconds, not 1: an index rebuilt from the files
    never counts again through a number a cache of the old one holds."""
    conn.execute(
        "CREATE TABLE document_changes (kind TEXT NOT NULL, resource_name TEXT NOT NULL,"
        " changes INTEGER NOT NULL, PRIMARY KEY (kind, resource_name)) WITHOUT ROWID"
    )
    count = (
        " BEGIN INSERT INTO document_changes VALUES ({row}.kind, {row}.resource_name,"
        " CAST(unixepoch('subsec') * 1000000 AS INTEGER))"
        " ON CONFLICT DO UPDATE SET changes = changes + 1; END"
    )
    for event, row in (
        ("INSERT", "new"),
        ("DELETE", "old"),
        ("UPDATE OF path, title, aliases, updated_at", "new"),
    ):
        name = f"document_changes_{event.split()[0].lower()}"
        conn.execute(f"CREATE TRIGGER {name} AFTER {event} ON documents" + count.format(row=row))


def _one_byte_cjk_separator(conn: Connection) -> None:
    """12: CJK characters are split by the one-byte SEPARATOR, not a ZWSP, and none beside
    a run where unicode61 splits anyway (fts_text): each FTS table is copied into a new one,
    its text taken back to what was written (our ZWSPs out) and prepared anew, as a rebuild
    from the files prepares it (a ZWSP typed in the text, invisible in results before and
    after, is left out where a rebuild makes it a SEPARATOR). Rowids, chunks and vectors
    stay as they are."""

    def again(text: str) -> str:
        return fts_text.index_text(text.replace(fts_text.ZWSP, ""))

    for (name,) in conn.execute("SELECT table_name FROM fts_tables").fetchall():
        fts_index.create(conn, f"{name}_v12")
        rows = conn.execute(f"SELECT rowid, text, heading, meta FROM {name}")
        while batch := rows.fetchmany(1000):
            conn.executemany(
                f"INSERT INTO {name}_v12 (rowid, text, heading, meta) VALUES (?, ?, ?, ?)",
                [
                    (rowid, again(text), again(heading), again(meta))
                    for rowid, text, heading, meta in batch
                ],
            )
        conn.execute(f"DROP TABLE {name}")
        conn.execute(f"ALTER TABLE {name}_v12 RENAME TO {name}")


def _links_read_again(conn: Connection) -> None:
    """14: link reference definitions (`[label]: target`) and links leading out of the KB's
    folder (`../`) are links now: each note whose text holds either has its links read
    again, by the next pass preparing it (its chunking no KB has; nothing else written
    changes: fragments, anchors and blocks are resolved when asked). Other notes keep their
    rows and vectors."""
    _read_links_again(conn, "(f.text LIKE '%]:%' OR f.text LIKE '%../%')", "links-again")


def _read_links_again(conn: Connection, text_holds: str, chunking: str) -> None:
    """The notes with a chunk whose text matches `text_holds` (SQL on `f.text`) are prepared
    again by the next pass: their chunking (`chunking`) is one no KB has."""
    for kb, table in conn.execute("SELECT resource_name, table_name FROM fts_tables").fetchall():
        conn.execute(
            "UPDATE documents SET chunking = ? WHERE kind = ?"
            " AND resource_name = ? AND format = 'md' AND id IN"
            " (SELECT c.document_id FROM chunks c JOIN " + table + " f ON f.rowid = c.seq"
            f"  WHERE c.kind = ? AND c.resource_name = ? AND {text_holds})",
            (chunking, KB_KIND, kb, KB_KIND, kb),
        )


def _wiki_aliases(conn: Connection) -> None:
    """16: a wiki link's alias (`[[text|Page]]`), and the name it gives, which a GitHub wiki
    reads the link by (`link_targets.DocumentIndexOfPaths.read`). Each note whose text
    holds an aliased wiki link has its links read again by the next pass (as in 14)."""
    conn.execute("ALTER TABLE links ADD COLUMN alias TEXT")
    conn.execute("ALTER TABLE links ADD COLUMN alias_name TEXT")
    conn.execute(
        "CREATE INDEX idx_links_alias_name ON links(kind, resource_name, alias_name)"
        " WHERE alias_name IS NOT NULL"
    )
    _read_links_again(conn, "f.text LIKE '%[[%|%]]%'", "aliases-again")


MIGRATIONS: list[Migration] = [
    """
    CREATE TABLE documents (
        id              TEXT    NOT NULL,
        kind            TEXT    NOT NULL,
        resource_name   TEXT    NOT NULL,
        project_id      TEXT    NOT NULL,
        path            TEXT    NOT NULL,
        title           TEXT    NOT NULL,
        description     TEXT,
        content_sha256  TEXT    NOT NULL,
        embed_pending   INTEGER NOT NULL DEFAULT 0,
        source_mode     TEXT    NOT NULL,
        metadata        TEXT    NOT NULL DEFAULT '{}',
        created_at      TEXT    NOT NULL,
        updated_at      TEXT    NOT NULL,
        file_size       INTEGER NOT NULL,
        file_mtime_ns   INTEGER NOT NULL,
        chunking        TEXT    NOT NULL,
        PRIMARY KEY (kind, resource_name, id)
    );
    CREATE UNIQUE INDEX idx_documents_path ON documents(kind, resource_name, path);
    CREATE INDEX idx_documents_kind_res_time ON documents(kind, resource_name, updated_at DESC);
    CREATE INDEX idx_documents_project ON documents(project_id);

    CREATE TABLE chunks (
        seq             INTEGER PRIMARY KEY,
        id              TEXT    NOT NULL UNIQUE,
        document_id     TEXT    NOT NULL,
        kind            TEXT    NOT NULL,
        resource_name   TEXT    NOT NULL,
        position        INTEGER NOT NULL,
        heading         TEXT    NOT NULL DEFAULT '[]'
    );
    CREATE INDEX idx_chunks_document ON chunks(kind, resource_name, document_id);

    CREATE VIRTUAL TABLE documents_fts USING fts5(
        text, heading, kb UNINDEXED,
        tokenize = 'porter unicode61 remove_diacritics 2'
    );

    CREATE TABLE audit (
        id              INTEGER PRIMARY KEY,
        at              TEXT    NOT NULL,
        actor           TEXT    NOT NULL,
        event           TEXT    NOT NULL,
        kind            TEXT,
        resource_name   TEXT,
        document_id     TEXT,
        details         TEXT    NOT NULL DEFAULT '{}'
    );
    CREATE INDEX idx_audit_resource ON audit(resource_name, id);
    """,
    # 2: vectors. embed_pending = vectors owed (new content, or a failed embed);
    # embed_error/embed_retry_at describe the last failure (documents_degraded).
    """
    CREATE TABLE vec_tables (
        resource_name   TEXT    NOT NULL PRIMARY KEY,
        table_name      TEXT    NOT NULL,
        model           TEXT    NOT NULL,
        dimensions      INTEGER NOT NULL
    );
    ALTER TABLE documents ADD COLUMN embed_error TEXT;
    ALTER TABLE documents ADD COLUMN embed_retry_at REAL NOT NULL DEFAULT 0;
    CREATE INDEX idx_documents_embed ON documents(kind, resource_name, embed_pending)
    """,
    # 3: what agents did through MCP (no arguments, no document contents).
    """
    CREATE TABLE mcp_invocations (
        id              INTEGER PRIMARY KEY,
        at              TEXT    NOT NULL,
        client          TEXT    NOT NULL,
        tool            TEXT    NOT NULL,
        duration_ms     REAL    NOT NULL,
        outcome         TEXT    NOT NULL
    )
    """,
    # 4: originals this machine tracks. Machine-local and written only by path ingest:
    # a `source_path` in frontmatter (which a synced KB controls) is never trusted.
    """
    CREATE TABLE tracked_sources (
        resource_name   TEXT    NOT NULL,
        document_id     TEXT    NOT NULL,
        source_path     TEXT    NOT NULL,
        PRIMARY KEY (resource_name, document_id)
    )
    """,
    _fts_table_per_kb,
    # 6: where each chunk is in its file (line numbers people can open)
    """
    ALTER TABLE chunks ADD COLUMN line_start INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE chunks ADD COLUMN line_end INTEGER NOT NULL DEFAULT 0
    """,
    _tags_links_and_titles,
    # 8: documents indexed in a bounded form (over a budget: metadata.degraded), counted and
    # listed through their partial index
    f"CREATE INDEX idx_documents_degraded ON documents(kind, resource_name) WHERE {DEGRADED}",
    _int8_vectors,
    _document_changes,
    # 11: each document's format (domain.formats: `md`, or the format of a file indexed
    # where it lies), filtered on and counted per KB
    """
    ALTER TABLE documents ADD COLUMN format TEXT NOT NULL DEFAULT 'md';
    CREATE INDEX idx_documents_format ON documents(kind, resource_name, format)
    """,
    _one_byte_cjk_separator,
    # 13: a PDF's pages and a deck's slides flow into passages (chunker): their documents
    # are chunked again, from the converted text kept (a chunking no KB has makes the next
    # pass prepare them; nothing is converted again)
    "UPDATE documents SET chunking = 'pages-cut' WHERE format IN ('pdf', 'pptx')",
    _links_read_again,
    # 15: a converted document's own title (its format's title property) and its first
    # heading, kept where the two differ: while another document gives itself the same
    # title, it goes by its heading (domain.title_choice, document_rows.retitle). Titles
    # are compared in any ASCII case, indexed. Converted documents are prepared again to
    # fill them (from the converted text kept: nothing is converted again).
    """
    ALTER TABLE documents ADD COLUMN own_title TEXT;
    ALTER TABLE documents ADD COLUMN heading_title TEXT;
    CREATE INDEX idx_documents_title ON documents(kind, resource_name, title COLLATE NOCASE);
    CREATE INDEX idx_documents_own_title ON documents(kind, resource_name, own_title COLLATE NOCASE)
        WHERE own_title IS NOT NULL;
    UPDATE documents SET chunking = 'titles-again' WHERE source_mode = 'converted'
    """,
    _wiki_aliases,
]


def migrate(conn: Connection) -> int:
    """Bring the database to the newest schema; returns the version it ends at."""
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        raise RuntimeError(
            f"coffer.db has schema version {version}, newer than this cofferd knows "
            f"({len(MIGRATIONS)}); upgrade Coffer or move the database aside"
        )
    for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
        with atomic(conn):  # executescript would COMMIT first: one statement at a time
            if isinstance(step, str):
                for statement in _statements(step):
                    conn.execute(statement)
            else:
                step(conn)
            conn.execute(f"PRAGMA user_version = {number}")
    return len(MIGRATIONS)


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]
