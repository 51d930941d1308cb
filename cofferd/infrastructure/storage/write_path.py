"""The write path over SQLite, composed of the modules that own each table: a document's
row (document_rows), its chunks with their FTS rows and vectors (chunk_rows), its tags and
links (graph_store), its audit event (activity_store) and its tracked source
(tracked_sources). The DocumentIndex, DocumentRemoval and KBIndex ports.

Writes arrive in batches from the Reindexer. Each document is written inside its own
savepoint: one that cannot be stored (text the database refuses, a constraint) is undone
alone and reported back as skipped, and the rest of the batch commits. A failure of the
storage itself (disk full, I/O error) is not the document's fault: the whole batch fails
and is retried once writing works again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from cofferd.domain.file_records import FileStat
from cofferd.domain.index_records import DocumentWrite, IndexedFile, IndexedFiles, WriteFailure
from cofferd.infrastructure.storage import (
    activity_store,
    chunk_rows,
    document_rows,
    fts_index,
    graph_store,
    tracked_sources,
)
from cofferd.infrastructure.storage.database import Database
from cofferd.infrastructure.storage.sqlite import (
    BULK_CHECKPOINT_PAGES,
    Connection,
    Error,
    atomic,
    checkpoint_every,
    damaged,
    storage_failed,
)
from cofferd.infrastructure.storage.tracked_sources import SqliteTrackedSources

MERGE_STEP = 2_000  # FTS5 pages (~4 KB) written per step of merging a keyword index
# A batch of this much text is part of a bulk load: the WAL is written back less often
# (sqlite.BULK_CHECKPOINT_PAGES) until the load has ended (Database.reclaim, which every
# bulk pass ends with).
BULK_BATCH_BYTES = 64 * 1024


def _write_documents(
    conn: Connection, kb: str, writes: Sequence[DocumentWrite], actor: str
) -> None:
    """Documents with nothing stored to replace (new ones, or cleared first): all of them
    in a few statements (a cold reconcile writes thousands)."""
    chunk_rows.insert(conn, kb, writes)
    document_rows.upsert(conn, kb, writes)
    graph_store.add(conn, kb, writes)
    activity_store.record(
        conn,
        [(w.event, actor, kb, w.document.id, {"path": w.path, "chunks": len(w.chunks)})
         for w in writes],
    )  # fmt: skip


def _write_document(conn: Connection, kb: str, w: DocumentWrite, actor: str) -> None:
    if w.event != "kb_document_ingested":  # replaces what is stored
        chunk_rows.delete_of_document(conn, kb, w.document.id)
        graph_store.clear(conn, kb, w.document.id)
    _write_documents(conn, kb, [w], actor)


def _remove_document(conn: Connection, kb: str, doc_id: str, actor: str, reason: str) -> bool:
    path = document_rows.path_of(conn, kb, doc_id)
    if path is None:
        return False
    chunk_rows.delete_of_document(conn, kb, doc_id)
    graph_store.clear(conn, kb, doc_id)
    document_rows.delete(conn, kb, doc_id)
    if reason == "deleted":  # a file that vanished may come back (an unmounted disk)
        tracked_sources.forget(conn, kb, doc_id)
    details = {"path": path, "reason": reason}
    activity_store.record(conn, [("kb_document_deleted", actor, kb, doc_id, details)])
    return True


def _attempt(conn: Connection, write: Callable[[], None]) -> str | None:
    """`write` in a savepoint of its own: None when it was written, else why the database
    or the encoder refused it. A failure of the storage (not the documents' doing) goes on
    up: the batch is retried."""
    try:
        with atomic(conn):
            write()
    except (Error, ValueError, OverflowError) as exc:
        if storage_failed(exc) or damaged(exc):
            raise
        return f"cannot be stored: {type(exc).__name__}: {exc}"[:300]
    return None


def _write_batch(
    conn: Connection, kb: str, writes: Sequence[DocumentWrite], actor: str
) -> list[WriteFailure]:
    """New documents together in one savepoint; if the database refuses one of them, each
    again in a savepoint of its own, so that only that one is left out. Changed documents
    each in their own."""
    new = [w for w in writes if w.event == "kb_document_ingested"]
    one_by_one = [w for w in writes if w.event != "kb_document_ingested"]
    if new and _attempt(conn, partial(_write_documents, conn, kb, new, actor)) is not None:
        one_by_one = new + one_by_one
    failed = []
    for w in one_by_one:
        reason = _attempt(conn, partial(_write_document, conn, kb, w, actor))
        if reason is not None:
            failed.append(WriteFailure(w.path, w.stat, reason))
    return failed


def _drop_kb(conn: Connection, kb: str) -> int:
    chunk_rows.drop_kb(conn, kb)
    graph_store.drop_kb(conn, kb)
    tracked_sources.drop_kb(conn, kb)
    return document_rows.delete_kb(conn, kb)


class SqliteDocumentIndex:
    """What is indexed of each KB, and every change to it."""

    def __init__(self, db: Database, tracked: SqliteTrackedSources) -> None:
        self.db = db
        self.tracked = tracked

    async def indexed_files(
        self, kb: str, chunking: str, paths: Sequence[str] | None = None
    ) -> IndexedFiles:
        """All indexed files of a KB, or those at `paths` or inside them as folders."""
        return await self.db.read(
            lambda conn: document_rows.indexed_files(conn, kb, chunking, paths)
        )

    async def indexed_details(self, kb: str, paths: Sequence[str]) -> dict[str, IndexedFile]:
        return await self.db.read(lambda conn: document_rows.indexed_details(conn, kb, paths))

    async def apply(
        self,
        kb: str,
        writes: Sequence[DocumentWrite],
        removed: Sequence[str],
        restat: Sequence[tuple[str, FileStat]],
        actor: str,
    ) -> list[WriteFailure]:
        """Write a batch in one transaction; the documents that could not be written."""

        bulk = sum(len(c.fts_text) for w in writes for c in w.chunks) >= BULK_BATCH_BYTES

        def run(conn: Connection) -> list[WriteFailure]:
            if bulk:
                checkpoint_every(conn, BULK_CHECKPOINT_PAGES)
            document_rows.restat(conn, kb, restat)
            replaced = [w.document.id for w in writes if w.event != "kb_document_ingested"]
            titles = document_rows.own_titles(conn, kb, [*removed, *replaced])
            for doc_id in removed:
                _remove_document(conn, kb, doc_id, actor, "file_removed")
            if writes:
                chunk_rows.prepare(conn, kb)
            failed = _write_batch(conn, kb, writes, actor)
            document_rows.retitle(conn, kb, [*titles, *(w.document.title for w in writes)])
            return failed

        return await self.db.transact(run)

    async def degraded(
        self, kb: str, first: int, among: Sequence[str]
    ) -> tuple[list[tuple[str, list[str]]], int, int]:
        return await self.db.read(lambda conn: document_rows.degraded(conn, kb, first, among))

    async def reclaim(self, *, large_work: bool = False, whole: bool = False) -> int:
        return await self.db.reclaim(large_work=large_work, whole=whole)

    async def bulk_load(self, kb: str) -> None:
        await self.db.transact(lambda conn: fts_index.merge_later(conn, kb))

    async def merge_keyword_index(self, kb: str) -> None:
        while await self.db.write(lambda conn: fts_index.merge_step(conn, kb, MERGE_STEP)):
            pass  # a step per write: a save waits for one step at most
        # in one piece now: pieces written from now on merge as FTS5 merges them (a save
        # during the steps above made one more piece, not a merge of the bulk load's)
        await self.db.transact(lambda conn: fts_index.merge_as_written(conn, kb))

    async def merge_as_written(self) -> list[str]:
        """The KBs whose keyword index a bulk load left merging later (the daemon stopped
        before its merge), made to merge as they are written again."""

        def run(conn: Connection) -> list[str]:
            return [kb for kb in fts_index.kbs(conn) if fts_index.merge_as_written(conn, kb)]

        return await self.db.transact(run)

    async def delete_document(self, kb: str, doc_id: str, actor: str) -> bool:
        def run(conn: Connection) -> bool:
            titles = document_rows.own_titles(conn, kb, [doc_id])
            removed = _remove_document(conn, kb, doc_id, actor, "deleted")
            document_rows.retitle(conn, kb, titles)
            return removed

        removed = await self.db.transact(run)
        await self.tracked.save(kb)
        await self.reclaim()
        return removed

    async def delete_kb(self, kb: str) -> int:
        dropped = await self.db.transact(lambda conn: _drop_kb(conn, kb))
        await self.reclaim()
        return dropped

    async def metrics(self, kb: str) -> dict[str, int]:
        def run(conn: Connection) -> dict[str, int]:
            return {**document_rows.counts(conn, kb), "chunks": chunk_rows.count(conn, kb)}

        return await self.db.read(run)

    async def formats(self, kb: str) -> dict[str, int]:
        return await self.db.read(lambda conn: document_rows.formats(conn, kb))

    async def converted_files(self, kb: str) -> dict[str, list[str]]:
        return await self.db.read(lambda conn: document_rows.converted_files(conn, kb))
