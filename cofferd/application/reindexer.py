"""The one write path: every change to a knowledge base's files ends in `Reindexer`.

Per file: the content hash is the gate (unchanged content is a true no-op); changed
content is parsed, chunked and written with its chunks in one atomic unit. A full
reconcile first compares size and mtime with what was indexed, so an unchanged corpus
is re-checked without reading a single file.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from cofferd.application import markdown
from cofferd.application.chunker import chunk_markdown
from cofferd.application.progress import Progress, ProgressBoard
from cofferd.application.registry import KBRegistry
from cofferd.domain.conflicts import ConflictCopy
from cofferd.domain.models import Document, KnowledgeBase, ReindexResult, utc_from_ns, utc_now
from cofferd.domain.ports import (
    ActivityLog,
    DocsTree,
    DocumentIndex,
    DocumentWrite,
    FileStat,
    IndexedFile,
    TreeScan,
)

log = logging.getLogger(__name__)

# A batch ends at whichever comes first; small batches keep reading and parsing the next
# one overlapping the database writes of this one, also for large files.
BATCH = 500
BATCH_BYTES = 1024 * 1024
# Markdown made from a document can be larger than the original (tables, frontmatter);
# a Markdown file is skipped only beyond this multiple of max_document_bytes.
MARKDOWN_LIMIT_FACTOR = 4
# The stat of a skipped file that is tried again at every pass (unreadable, or a name that
# cannot be indexed): fixing those need not change its size or time.
RECHECK = FileStat(-1, 0)


@dataclass
class _Batch:
    writes: list[DocumentWrite] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    restat: list[tuple[str, FileStat]] = field(default_factory=list)
    skipped: dict[str, tuple[FileStat, str]] = field(default_factory=dict)
    counts: ReindexResult = field(default_factory=ReindexResult)


class Reindexer:
    def __init__(
        self,
        store: DocumentIndex,
        activity: ActivityLog,
        tree: DocsTree,
        registry: KBRegistry,
        progress: ProgressBoard | None = None,
    ) -> None:
        self.progress = progress or ProgressBoard()
        self.store = store
        self.activity = activity
        self.tree = tree
        self.registry = registry
        self.on_change: Callable[[], None] | None = None  # e.g. wake the embedding queue
        # Files skipped for a reason (binary, too large, refused by the index), with the
        # stat they had, so they are not read again until they change.
        self._skipped: dict[tuple[str, str], tuple[FileStat, str]] = {}
        # Sync tools' conflict copies each KB held at its last full scan.
        self._conflicts: dict[str, Mapping[str, ConflictCopy]] = {}

    def conflicts(self, kb: str) -> Mapping[str, ConflictCopy]:
        return self._conflicts.get(kb, {})

    def forget_skipped(self, kb: str) -> None:
        """Read skipped files again (after the rules that skipped them changed)."""
        self._conflicts.pop(kb, None)
        for key in [key for key in self._skipped if key[0] == kb]:
            del self._skipped[key]

    def forget_all_skipped(self) -> None:
        self._skipped.clear()

    def skipped_count(self, kb: str) -> int:
        return sum(1 for name, _ in self._skipped if name == kb)

    async def skipped(self, kb: str) -> list[dict[str, str]]:
        """The files of `kb` that are not indexed, and why, by relative path."""
        found = [
            (path, reason) for (name, path), (_, reason) in self._skipped.items() if name == kb
        ]
        return await asyncio.to_thread(self._described, kb, found)

    def _described(self, kb: str, skipped: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
        return [
            {"relative_path": path, "path": self.tree.absolute(kb, path), "reason": reason}
            for path, reason in sorted(skipped)
        ]

    async def _finish(self, kb: str, result: ReindexResult) -> ReindexResult:
        """Every file this pass skipped, named with its place on disk, by relative path."""
        found = [(s["relative_path"], s["reason"]) for s in result.skipped]
        result.skipped = await asyncio.to_thread(self._described, kb, found)
        return result

    async def reconcile(
        self, kb: KnowledgeBase, *, actor: str = "system", audit: bool = False
    ) -> ReindexResult:
        """Bring the whole index of `kb` in line with its docs tree."""
        async with self.registry.lock(kb.name):
            return await self.reconcile_locked(kb, actor=actor, audit=audit)

    async def reconcile_locked(
        self, kb: KnowledgeBase, *, actor: str = "system", audit: bool = False
    ) -> ReindexResult:
        """`reconcile`, for a caller that holds the KB's lock."""
        # the index is read while the tree is walked: neither waits for the other
        indexed, scan = await asyncio.gather(
            self.store.indexed_files(kb.name), asyncio.to_thread(self.tree.scan, kb.name)
        )
        for key in [k for k, v in self._skipped.items() if k[0] == kb.name and v[0] == RECHECK]:
            del self._skipped[key]  # unreadable files and unusable names: seen afresh
        result = await self._sync(kb, _observed(scan, indexed), indexed, actor)
        self._conflicts[kb.name] = scan.conflicts
        self._forget_gone(kb.name, scan, lambda path: True)
        self._note_unusable(kb.name, scan, result)
        await self._finish(kb.name, result)
        if result.changed or audit:
            await self.activity.audit("kb_reindexed", actor, kb.name, None, result.as_dict())
        return result

    async def sync_paths(
        self, kb: KnowledgeBase, relpaths: Iterable[str], *, actor: str = "system"
    ) -> ReindexResult:
        """Reconcile just these paths (files or folders, present or gone)."""
        async with self.registry.lock(kb.name):
            return await self.sync_paths_locked(kb, relpaths, actor=actor)

    async def sync_paths_locked(
        self, kb: KnowledgeBase, relpaths: Iterable[str], *, actor: str = "system"
    ) -> ReindexResult:
        """`sync_paths`, for a caller that holds the KB's lock."""
        paths = sorted(set(relpaths))
        indexed = await self.store.indexed_files(kb.name, paths)
        scan = await asyncio.to_thread(self._observe, kb.name, paths)
        result = await self._sync(kb, _observed(scan, indexed), indexed, actor)
        self._forget_gone(kb.name, scan, lambda path: _under(path, paths))
        self._note_unusable(kb.name, scan, result)
        return await self._finish(kb.name, result)

    def _forget_gone(self, kb: str, scan: TreeScan, asked: Callable[[str], bool]) -> None:
        """Skipped files the scan (of the paths asked about) proves gone are no longer listed."""
        gone = [
            key
            for key in self._skipped
            if key[0] == kb
            and asked(key[1])
            and key[1] not in scan.files
            and key[1] not in scan.unusable
            and scan.covers(key[1])
        ]
        for key in gone:
            del self._skipped[key]

    def _note_unusable(self, kb: str, scan: TreeScan, result: ReindexResult) -> None:
        """Files the scan saw but cannot index by name are reported, never silently lost."""
        for path, reason in scan.unusable.items():
            self._skipped[(kb, path)] = (RECHECK, reason)
            result.documents_skipped += 1
            result.skipped.append({"relative_path": path, "reason": reason})

    def _observe(self, kb: str, paths: list[str]) -> TreeScan:
        files: dict[str, FileStat] = {}
        failed: list[str] = []
        unusable: dict[str, str] = {}
        for path in paths:
            stat = self.tree.stat(kb, path)
            if stat is not None:
                files[path] = stat
                continue
            sub = self.tree.scan(kb, under=path)
            files.update(sub.files)
            failed.extend(sub.failed_dirs)
            unusable.update(sub.unusable)
        return TreeScan(files=files, failed_dirs=failed, unusable=unusable)

    async def _sync(
        self,
        kb: KnowledgeBase,
        observed: Mapping[str, FileStat | None],
        indexed: Mapping[str, IndexedFile],
        actor: str,
    ) -> ReindexResult:
        result = ReindexResult(scanned=sum(1 for s in observed.values() if s is not None))
        chunking = kb.config.chunking_key()
        removed: list[str] = []
        todo: list[str] = []
        for path, stat in observed.items():
            known = indexed.get(path)
            if stat is None:
                if known is not None:
                    removed.append(known.document_id)
                self._skipped.pop((kb.name, path), None)
            elif known and known.stat == stat and known.chunking == chunking:
                result.documents_unchanged += 1
            elif (skip := self._skipped.get((kb.name, path))) and skip[0] == stat:
                result.documents_skipped += 1
                result.skipped.append({"relative_path": path, "reason": skip[1]})
            else:
                todo.append(path)
                self._skipped.pop((kb.name, path), None)  # read again: skipped again, or fixed
        result.documents_removed = len(removed)
        with self.progress.track(kb.name, "indexing", len(todo)) as progress:
            await self._index(
                kb, todo, observed, indexed, chunking, removed, result, actor, progress
            )
        if self.on_change is not None and (result.documents_added or result.documents_updated):
            self.on_change()
        return result

    async def _index(
        self,
        kb: KnowledgeBase,
        todo: list[str],
        observed: Mapping[str, FileStat | None],
        indexed: Mapping[str, IndexedFile],
        chunking: str,
        removed: list[str],
        result: ReindexResult,
        actor: str,
        progress: Progress,
    ) -> None:
        """Read and parse batch after batch, each written while the next is read."""
        pending: asyncio.Task[None] | None = None
        first = _Batch(removed=removed)
        for paths in _batches(todo, observed):
            batch = await asyncio.to_thread(self._prepare, kb, paths, indexed, chunking, first)
            first = _Batch()
            result.merge(batch.counts)
            for path, skip in batch.skipped.items():
                self._skipped[(kb.name, path)] = skip
            if pending is not None:
                await pending
            if batch.writes or batch.removed or batch.restat:
                pending = asyncio.create_task(self._apply(kb.name, batch, result, actor))
            progress.advance(len(paths))
        if pending is not None:
            await pending

    async def _apply(self, kb: str, batch: _Batch, result: ReindexResult, actor: str) -> None:
        failures = await self.store.apply(kb, batch.writes, batch.removed, batch.restat, actor)
        events = {w.document.path: w.event for w in batch.writes}
        for failure in failures:
            log.warning("%s: %s not indexed: %s", kb, failure.path, failure.reason)
            self._skipped[(kb, failure.path)] = (failure.stat, failure.reason)
            if events[failure.path] == "kb_document_ingested":
                result.documents_added -= 1
            else:
                result.documents_updated -= 1
            result.documents_skipped += 1
            result.skipped.append({"relative_path": failure.path, "reason": failure.reason})

    def _prepare(
        self,
        kb: KnowledgeBase,
        paths: list[str],
        indexed: Mapping[str, IndexedFile],
        chunking: str,
        batch: _Batch,
    ) -> _Batch:
        """Read, hash, parse and chunk (CPU and file work, off the event loop); the counts
        go in the batch, merged on the loop."""
        result = batch.counts
        config = kb.config
        stamp = utc_now()
        read = self.tree.reader(kb.name)
        for path in paths:
            known = indexed.get(path)
            try:
                content = read(path)
            except OSError as exc:
                unreadable = f"unreadable: {exc.strerror}"
                batch.skipped[path] = (RECHECK, unreadable)
                result.documents_skipped += 1
                result.skipped.append({"relative_path": path, "reason": unreadable})
                continue  # its rows (if any) stay until the file can be read again
            if content is None:
                if known is not None:
                    batch.removed.append(known.document_id)
                    result.documents_removed += 1
                continue
            digest = markdown.content_hash(content.data)
            if known and known.content_sha256 == digest and known.chunking == chunking:
                batch.restat.append((known.document_id, content.stat))
                result.documents_unchanged += 1
                continue
            reason = None
            if len(content.data) > config.max_document_bytes * MARKDOWN_LIMIT_FACTOR:
                reason = "too_large"
            else:
                try:
                    parsed = markdown.parse(content.data, path)
                except markdown.NotText as exc:
                    reason = str(exc)
            if reason is not None:
                batch.skipped[path] = (content.stat, reason)
                result.documents_skipped += 1
                result.skipped.append({"relative_path": path, "reason": reason})
                if known is not None:
                    batch.removed.append(known.document_id)
                    result.documents_removed += 1
                continue
            doc_id = known.document_id if known else markdown.document_id(path)
            document = Document(
                id=doc_id,
                resource_name=kb.name,
                path=path,
                title=parsed.title,
                description=parsed.description,
                content_sha256=digest,
                source_mode=parsed.source_mode,
                metadata=parsed.metadata,
                created_at=stamp,
                updated_at=utc_from_ns(content.stat.mtime_ns),  # the file's, as people see it
                embed_pending=config.vector_enabled,
                tags=parsed.tags,
                aliases=parsed.aliases,
            )
            chunks = chunk_markdown(
                parsed.body,
                parsed.title,
                config.chunk_size,
                config.chunk_overlap,
                first_line=parsed.body_line,
            )
            event = "kb_document_updated" if known else "kb_document_ingested"
            batch.writes.append(
                DocumentWrite(document, content.stat, chunking, chunks, event, parsed.links)
            )
            if known:
                result.documents_updated += 1
            else:
                result.documents_added += 1
        return batch


def _batches(todo: list[str], observed: Mapping[str, FileStat | None]) -> Iterator[list[str]]:
    """`todo` in batches of at most BATCH files and about BATCH_BYTES; at least one batch."""
    batch: list[str] = []
    size = 0
    for path in todo:
        stat = observed.get(path)
        size += stat.size if stat else 0
        batch.append(path)
        if len(batch) >= BATCH or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch or not todo:
        yield batch


def _under(path: str, paths: Iterable[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in paths)


def _observed(scan: TreeScan, indexed: Mapping[str, IndexedFile]) -> dict[str, FileStat | None]:
    """Files found, plus indexed files the scan proves gone (None). A file under a folder
    that could not be read is left out: its absence proves nothing."""
    observed: dict[str, FileStat | None] = dict(scan.files)
    for path in indexed:
        if path not in observed and scan.covers(path):
            observed[path] = None
    return observed
