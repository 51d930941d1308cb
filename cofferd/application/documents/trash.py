"""Deleting a document moves it to its knowledge base's trash; it can be restored from there
(same path, same id, indexed at once) until the retention runs out and it is purged."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from ulid import ULID

from cofferd.application.documents import references
from cofferd.application.documents.documents import ID_PREFIX_MIN_CHARS, Documents, DocumentView
from cofferd.application.indexing.knowledge_bases import KnowledgeBases
from cofferd.application.indexing.reindexer import Reindexer
from cofferd.domain.errors import (
    CofferError,
    DocumentAmbiguous,
    DocumentNotFound,
    TrashEntryNotFound,
)
from cofferd.domain.file_records import TrashEntry
from cofferd.domain.formats import is_converted
from cofferd.domain.models import Document, utc_now, utc_text
from cofferd.domain.ports import DocsTree, DocumentRemoval, TrackedSources, TrashBin

log = logging.getLogger(__name__)

RETENTION_DAYS = 30
PURGE_INTERVAL_S = 24 * 3600.0  # expired entries purged at start, then daily


@dataclass(frozen=True)
class Trashed:
    entry: TrashEntry
    expires_at: str


class Trash:
    def __init__(
        self,
        kbs: KnowledgeBases,
        store: DocumentRemoval,
        tracked: TrackedSources,
        tree: DocsTree,
        reindexer: Reindexer,
        documents: Documents,
        trash_bin: TrashBin,
        *,
        retention_days: int = RETENTION_DAYS,
    ) -> None:
        self.kbs = kbs
        self.store = store
        self.tracked = tracked
        self.tree = tree
        self.reindexer = reindexer
        self.documents = documents
        self.bin = trash_bin
        self.retention_days = retention_days

    def _trashed(self, entry: TrashEntry) -> Trashed:
        deleted = datetime.fromisoformat(entry.deleted_at)
        return Trashed(entry, utc_text(deleted + timedelta(days=self.retention_days)))

    async def delete(self, kb: str, ref: str, *, actor: str) -> tuple[Document, Trashed]:
        """Move the document's file and its kept original to the trash; drop its rows."""
        doc = await self.documents.exact(kb, ref)
        async with self.kbs.registry.lock(kb):
            if await asyncio.to_thread(self.tree.stat, kb, doc.path) is None:
                await self.store.delete_document(kb, doc.id, actor)  # already gone from disk
                raise DocumentNotFound(kb, doc.id)
            original = await asyncio.to_thread(self.tree.original, kb, doc.id)
            entry = TrashEntry(
                id=str(ULID()),
                document_id=doc.id,
                relative_path=doc.path,
                title=doc.title,
                deleted_at=utc_now(),
                original=original.name if original else None,
                source_path=(await self.tracked.tracked_sources(kb)).get(doc.id),
                content_sha256=doc.content_sha256 if is_converted(doc.path) else None,
            )
            await asyncio.to_thread(self.bin.put, kb, entry, original)
            await self.store.delete_document(kb, doc.id, actor)
        await self.kbs.activity.audit(
            "kb_document_trashed", actor, kb, doc.id, {"path": doc.path, "trash_id": entry.id}
        )
        return doc, self._trashed(entry)

    async def list(self, kb: str, limit: int, offset: int) -> tuple[list[Trashed], int]:
        """A page of the KB's trash, newest first (what has expired is purged first), and
        how many entries it holds."""
        self.kbs.get(kb)
        await self.purge_expired(kb)
        entries, total = await asyncio.to_thread(self.bin.page, kb, limit, offset)
        return [self._trashed(e) for e in entries], total

    async def restore(self, kb_name: str, trash_id: str, *, actor: str) -> DocumentView:
        """Put the files back where they were and index the document at once."""
        kb = self.kbs.get_enabled(kb_name)
        async with self.kbs.registry.lock(kb_name):
            entry = await asyncio.to_thread(self._entry, kb_name, trash_id)
            await asyncio.to_thread(self.bin.restore, kb_name, entry)
            await self.reindexer.sync_paths_locked(kb, [entry.relative_path], actor=actor)
            view = await self.documents.get(kb_name, entry.relative_path)
            if entry.source_path:
                await self.tracked.track_source(kb_name, view.document.id, entry.source_path)
        await self.kbs.activity.audit(
            "kb_document_restored",
            actor,
            kb_name,
            view.document.id,
            {"path": entry.relative_path, "trash_id": entry.id},
        )
        return view

    def _entry(self, kb: str, ref: str) -> TrashEntry:
        """The unexpired entry `ref` names: its id, or a start of it (any case, as long as
        a start of a document id must be) that no other unexpired entry's id shares."""
        entry = self.bin.get(kb, ref)
        if entry is None and len(ref) >= ID_PREFIX_MIN_CHARS:
            fits = [
                e
                for e in self.bin.entries(kb)
                if e.id.startswith(ref.upper()) and not self._expired(self._trashed(e))
            ]
            if len(fits) > 1:
                listed = references.listed([(e.id, e.relative_path) for e in fits])
                raise DocumentAmbiguous(
                    f"{ref!r} is the start of several trash ids: {listed}; give more of it",
                    id=ref,
                    candidates=references.described(
                        [(e.id, e.relative_path, e.title) for e in fits]
                    ),
                )
            entry = fits[0] if fits else None
        if entry is None or self._expired(self._trashed(entry)):
            raise TrashEntryNotFound(kb, ref)
        return entry

    def _expired(self, trashed: Trashed) -> bool:
        return trashed.expires_at <= utc_now()  # one fixed-width UTC form: text order is time

    async def purge_expired(self, kb: str) -> int:
        async with self.kbs.registry.lock(kb):
            entries = await asyncio.to_thread(self.bin.entries, kb)
            expired = [e for e in entries if self._expired(self._trashed(e))]
            for entry in expired:
                await asyncio.to_thread(self.bin.purge, kb, entry.id)
        for entry in expired:
            await self.kbs.activity.audit(
                "kb_trash_purged", "system", kb, entry.document_id,
                {"path": entry.relative_path, "trash_id": entry.id},
            )  # fmt: skip
        return len(expired)

    async def purge_all(self) -> None:
        """Purge every KB's expired entries (the indexing service runs this daily)."""
        for kb in self.kbs.list():
            try:
                purged = await self.purge_expired(kb.name)
            except (OSError, CofferError) as exc:  # tried again tomorrow; the rest go on
                log.error("cannot purge the trash of %r: %s", kb.name, exc)
                continue
            if purged:
                log.info("purged %d expired trash entries of %r", purged, kb.name)
