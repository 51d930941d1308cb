from __future__ import annotations

import asyncio
import threading
import time
from array import array
from pathlib import Path

import pytest

from cofferd.infrastructure.storage import fts_index, fts_text, schema, sqlite, vec_index
from cofferd.infrastructure.storage.database import RECLAIM_MIN_PAGES, Database
from cofferd.infrastructure.storage.sqlite import atomic


def test_driver_is_sqlean_with_a_modern_sqlite() -> None:
    assert sqlite.sqlean.__name__.startswith("sqlean")
    major, minor, *_ = (int(x) for x in sqlite.SQLITE_VERSION.split("."))
    assert (major, minor) >= (3, 50)
    assert issubclass(sqlite.OperationalError, sqlite.Error)


async def test_wal_schema_and_user_version(tmp_path: Path) -> None:
    db = await Database(tmp_path / "c.db").open()
    try:
        mode = await db.write(lambda c: c.execute("PRAGMA journal_mode").fetchone()[0])
        version = await db.read(lambda c: c.execute("PRAGMA user_version").fetchone()[0])
        tables = await db.read(
            lambda c: {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
        )
        assert mode == "wal" and version == len(schema.MIGRATIONS)
        assert {"documents", "chunks", "fts_tables", "audit"} <= tables
    finally:
        await db.close()


async def test_readers_never_see_database_is_locked(tmp_path: Path) -> None:
    db = await Database(tmp_path / "c.db").open()
    release = asyncio.Event()
    loop = asyncio.get_running_loop()

    holding = threading.Event()

    def long_write(conn: sqlite.Connection) -> None:
        with atomic(conn):
            conn.execute("INSERT INTO audit (at, actor, event) VALUES ('t', 'test', 'held')")
            holding.set()
            asyncio.run_coroutine_threadsafe(release.wait(), loop).result(timeout=10)

    try:
        writer = asyncio.create_task(db.write(long_write))
        assert await asyncio.to_thread(holding.wait, 10)  # the writer holds its transaction
        for _ in range(20):
            seen = await db.read(lambda c: c.execute("SELECT count(*) FROM audit").fetchone()[0])
            assert seen == 0  # the uncommitted row is invisible, and reading did not block
        release.set()
        await writer
        assert await db.read(lambda c: c.execute("SELECT count(*) FROM audit").fetchone()[0]) == 1
    finally:
        release.set()
        await db.close()


def test_a_commit_that_fails_leaves_no_transaction_open(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    conn = sqlite.connect(path)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    conn.execute(
        "CREATE TABLE child (id INTEGER PRIMARY KEY,"
        " parent INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)"
    )
    with pytest.raises(sqlite.IntegrityError), atomic(conn):
        conn.execute("INSERT INTO child VALUES (1, 42)")  # refused only at COMMIT
    assert not conn.in_transaction
    with atomic(conn):  # a transaction of its own again, not a savepoint inside the old one
        conn.execute("INSERT INTO parent VALUES (1)")
    other = sqlite.connect(path, readonly=True)
    try:
        assert other.execute("SELECT count(*) FROM parent").fetchone()[0] == 1
        assert other.execute("SELECT count(*) FROM child").fetchone()[0] == 0
    finally:
        other.close()
        conn.close()


def test_migrations_apply_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = sqlite.connect(tmp_path / "c.db")
    schema.migrate(conn)
    monkeypatch.setattr(
        schema, "MIGRATIONS", [*schema.MIGRATIONS, "CREATE TABLE extra (x); SELECT * FROM nope"]
    )
    with pytest.raises(sqlite.OperationalError):
        schema.migrate(conn)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(schema.MIGRATIONS) - 1
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name='extra'").fetchone()[0] == 0


def test_a_newer_database_is_refused(tmp_path: Path) -> None:
    conn = sqlite.connect(tmp_path / "c.db")
    conn.execute("PRAGMA user_version = 99")
    with pytest.raises(RuntimeError, match="newer"):
        schema.migrate(conn)


def test_upgrading_keeps_keyword_rows_until_the_reindex(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = sqlite.connect(tmp_path / "c.db")
    with monkeypatch.context() as m:
        m.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:6])
        schema.migrate(conn)
    name = fts_index.table_name("notes")
    conn.execute(f"CREATE VIRTUAL TABLE {name} USING fts5(text, heading, tokenize = 'porter')")
    conn.execute(f"INSERT INTO {name} (rowid, text, heading) VALUES (7, 'old words', 'Title')")
    conn.execute("INSERT INTO fts_tables VALUES ('notes', ?)", (name,))
    conn.commit()
    schema.migrate(conn)
    assert fts_index.dump(conn, "notes") == {7: ("old words", "Title", "")}
    assert [r[0] for r in fts_index.ranked(conn, "notes", '"old"', 5)] == [7]
    columns = {r[1] for r in conn.execute("PRAGMA table_info(documents)")}
    assert {"tags", "aliases"} <= columns


def test_upgrading_makes_the_cjk_separator_one_byte(tmp_path: Path) -> None:
    conn = sqlite.connect(tmp_path / "c.db")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:11])
        schema.migrate(conn)
    fts_index.ensure(conn, "notes")
    z = fts_text.ZWSP
    old = (f"{z}東{z}京{z}の{z}塔{z} tower", f"{z}塔{z}", f"{z}東{z}京{z}")  # as v11 indexed them
    fts_index.insert(conn, "notes", [(7, *old)])
    conn.commit()
    schema.migrate(conn)
    rebuilt = tuple(fts_text.index_text(t) for t in ("東京の塔 tower", "塔", "東京"))
    assert fts_index.dump(conn, "notes") == {7: rebuilt}
    assert rebuilt[0] == "東\x1f京\x1fの\x1f塔 tower"
    assert [r[0] for r in fts_index.ranked(conn, "notes", '"東 京"', 5)] == [7]
    assert fts_index.texts(conn, "notes", [7]) == {7: "東京の塔 tower"}


def test_upgrading_keeps_every_vector_in_int8(tmp_path: Path) -> None:
    conn = sqlite.connect(tmp_path / "c.db")
    assert vec_index.load(conn)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:8])
        schema.migrate(conn)
    old = "vec_" + vec_index.table_name("notes").removeprefix("vecq_")
    conn.execute(
        f"CREATE VIRTUAL TABLE {old} USING vec0("
        "chunk_id TEXT PRIMARY KEY, embedding float[3] distance_metric=cosine)"
    )
    vectors = {"a": [1.0, 0.0, 0.0], "b": [0.6, 0.8, 0.0], "c": [0.0, 0.0, -2.0]}
    for chunk, vector in vectors.items():
        conn.execute(f"INSERT INTO {old} VALUES (?, ?)", (chunk, array("f", vector).tobytes()))
    conn.execute("INSERT INTO vec_tables VALUES ('notes', ?, 'model', 3)", (old,))
    conn.commit()
    schema.migrate(conn)
    assert vec_index.recorded(conn, "notes") == ("model", 3)
    assert vec_index.chunk_ids(conn, "notes") == ["a", "b", "c"]
    assert (
        conn.execute("SELECT count(*) FROM sqlite_master WHERE name = ?", (old,)).fetchone()[0] == 0
    )
    nearest = vec_index.search(conn, "notes", [0.5, 1.0, 0.0], 3)
    assert [c for c, _ in nearest] == ["b", "a", "c"]
    assert [d for _, d in nearest] == pytest.approx([0.0161, 0.5528, 1.0], abs=0.01)


def _file_mb(path: Path) -> float:
    return path.stat().st_size / 1e6


async def _fill_and_empty(db: Database) -> None:
    rows = [("t", "test", "filler", "x" * 2000) for _ in range(10_000)]  # ~20 MB
    await db.transact(
        lambda c: c.executemany(
            "INSERT INTO audit (at, actor, event, details) VALUES (?, ?, ?, ?)", rows
        )
    )
    await db.write(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
    await db.transact(lambda c: c.execute("DELETE FROM audit"))


@pytest.mark.parametrize("made_before_incremental_vacuum", [False, True])
async def test_the_space_of_deleted_rows_is_given_back(
    tmp_path: Path, made_before_incremental_vacuum: bool
) -> None:
    path = tmp_path / "c.db"
    if made_before_incremental_vacuum:  # as earlier versions made it: no auto_vacuum
        conn = sqlite.sqlean.connect(str(path))
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE older (x)")
        conn.close()
    db = await Database(path).open()
    try:
        mode = await db.write(lambda c: c.execute("PRAGMA auto_vacuum").fetchone()[0])
        assert mode == (0 if made_before_incremental_vacuum else 2)
        await _fill_and_empty(db)
        full = _file_mb(path)
        assert full > 15
        assert await db.reclaim() > 15e6
        assert await db.reclaim() == 0  # nothing more worth giving back
        await db.write(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
        assert _file_mb(path) < full / 4
        assert await db.write(lambda c: c.execute("PRAGMA auto_vacuum").fetchone()[0]) == 2
    finally:
        await db.close()


async def test_a_few_free_pages_are_given_back_when_asked_for_whole(tmp_path: Path) -> None:
    """Under the threshold, free pages stay (a save never waits for a vacuum); after a
    keyword index's merge (`whole`) every one goes, however few: a cold index's merge left
    8 MB free in a 45 MB database, just under the threshold."""
    db = await Database(tmp_path / "c.db").open()
    try:
        rows = [("t", "test", "filler", "x" * 2000) for _ in range(1_000)]  # ~2 MB, 500 pages
        await db.transact(
            lambda c: c.executemany(
                "INSERT INTO audit (at, actor, event, details) VALUES (?, ?, ?, ?)", rows
            )
        )
        await db.transact(lambda c: c.execute("DELETE FROM audit"))
        free = await db.write(lambda c: c.execute("PRAGMA freelist_count").fetchone()[0])
        assert 0 < free < RECLAIM_MIN_PAGES
        assert await db.reclaim() == 0
        assert await db.reclaim(whole=True) >= free * 4096
        assert await db.write(lambda c: c.execute("PRAGMA freelist_count").fetchone()[0]) == 0
    finally:
        await db.close()


async def test_document_changes_count_names_and_times_not_embeddings(tmp_path: Path) -> None:
    """What completion keeps is good while the count stays: a new title, path or time
    counts, an embedding's bookkeeping does not (it writes all the time)."""
    db = await Database(tmp_path / "c.db").open()

    def count(conn: sqlite.Connection) -> dict[str, int]:
        return dict(conn.execute("SELECT resource_name, changes FROM document_changes"))

    insert = (
        "INSERT INTO documents (id, kind, resource_name, project_id, path, title,"
        " content_sha256, source_mode, created_at, updated_at, file_size, file_mtime_ns,"
        " chunking) VALUES (?, 'knowledge_base', ?, 'g', ?, 't', 'h', 'm', 'c', 'u', 0, 0, 'x')"
    )
    try:
        await db.write(lambda c: c.execute(insert, ("1", "kb", "a.md")))
        await db.write(lambda c: c.execute(insert, ("2", "other", "a.md")))
        first = await db.read(count)
        # each starts at the time (µs): an index made again never repeats an old count
        assert all(abs(n / 1e6 - time.time()) < 60 for n in first.values())
        assert await db.read(count) == first
        for update in (
            "embed_pending = 1",
            "embed_error = 'e', embed_retry_at = 5",
            "metadata = '{}'",
        ):
            await db.write(
                lambda c, u=update: c.execute(f"UPDATE documents SET {u} WHERE id = '1'")
            )
        assert await db.read(count) == first
        for update in ("title = 'T'", "path = 'b.md'", "aliases = '[\"x\"]'", "updated_at = 'v'"):
            await db.write(
                lambda c, u=update: c.execute(f"UPDATE documents SET {u} WHERE id = '1'")
            )
        await db.write(lambda c: c.execute("DELETE FROM documents WHERE id = '1'"))
        assert await db.read(count) == {"kb": first["kb"] + 5, "other": first["other"]}
    finally:
        await db.close()


def test_pdfs_and_decks_chunked_by_page_are_chunked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 13: pages flow into passages now, so a PDF's or deck's passages cut at
    every page are made again (their chunking no longer the KB's); notes and workbooks keep
    theirs."""
    conn = sqlite.connect(tmp_path / "c.db")
    with monkeypatch.context() as before:
        before.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:12])
        schema.migrate(conn)
    for n, fmt in enumerate(("md", "pdf", "pptx", "xlsx")):
        conn.execute(
            "INSERT INTO documents (id, kind, resource_name, project_id, path, title,"
            " content_sha256, source_mode, created_at, updated_at, file_size, file_mtime_ns,"
            " chunking, format) VALUES (?, 'kb', 'k', '', ?, 't', 'x', 'converted', '', '',"
            " 1, 1, 'v8:words:512:64', ?)",
            (f"d{n}", f"f{n}.{fmt}", fmt),
        )
    with monkeypatch.context() as then:
        then.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:13])
        schema.migrate(conn)
    stamps = dict(conn.execute("SELECT format, chunking FROM documents").fetchall())
    assert stamps == {
        "md": "v8:words:512:64",
        "pdf": "pages-cut",
        "pptx": "pages-cut",
        "xlsx": "v8:words:512:64",
    }


def test_converted_documents_are_prepared_again_for_their_first_headings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 15: a converted document's own title and first heading are kept (a title
    two documents give themselves: domain.title_choice), so converted documents are
    prepared again to fill them; notes people edit keep their rows."""
    conn = sqlite.connect(tmp_path / "c.db")
    with monkeypatch.context() as before:
        before.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:14])
        schema.migrate(conn)
    for n, (fmt, mode) in enumerate((("md", "edited"), ("md", "converted"), ("pptx", "converted"))):
        conn.execute(
            "INSERT INTO documents (id, kind, resource_name, project_id, path, title,"
            " content_sha256, source_mode, created_at, updated_at, file_size, file_mtime_ns,"
            " chunking, format) VALUES (?, 'kb', 'k', '', ?, 't', 'x', ?, '', '',"
            " 1, 1, 'v8:words:512:64', ?)",
            (f"d{n}", f"f{n}.{fmt}", mode, fmt),
        )
    schema.migrate(conn)
    stamps = conn.execute("SELECT path, chunking, own_title, heading_title FROM documents")
    assert sorted(tuple(row) for row in stamps) == [
        ("f0.md", "v8:words:512:64", None, None),
        ("f1.md", "titles-again", None, None),
        ("f2.pptx", "titles-again", None, None),
    ]
