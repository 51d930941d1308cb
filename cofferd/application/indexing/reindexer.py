"""The one write path: every change to a knowledge base's files ends in `Reindexer`.

Per file: the content hash is the gate (unchanged content is a true no-op); changed
content is prepared (read, parsed, chunked: in worker processes, within its budgets) and
written with its chunks in one atomic unit. A full reconcile first compares size and
mtime with what was indexed, so an unchanged corpus is re-checked without reading a
single file. Documents are written in batches while the next ones are prepared.

Long on purpose: it is the one write path, and a reader checking that a change is
idempotent reads every step of it here, in order, rather than across modules.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cofferd.application.indexing.other_files import OtherFiles
from cofferd.application.indexing.progress import Progress, ProgressBoard
from cofferd.application.indexing.registry import KBRegistry
from cofferd.application.reading import preparation
from cofferd.domain.budgets import DEFAULT, Budget
from cofferd.domain.conflicts import ConflictCopy
from cofferd.domain.errors import CofferError
from cofferd.domain.events import ConvertiblesAhead, DocumentsChanged, Events, UnconvertedFound
from cofferd.domain.file_records import FileStat, TreeScan
from cofferd.domain.formats import is_converted
from cofferd.domain.index_records import DocumentWrite, IndexedFile, IndexedFiles
from cofferd.domain.models import KnowledgeBase, ReindexResult
from cofferd.domain.ports import ActivityLog, DocsTree, DocumentIndex
from cofferd.domain.prepare_jobs import (
    Failed,
    Gone,
    Outcome,
    PrepareItem,
    Preparer,
    PrepareSettings,
    Skipped,
    Unchanged,
    Unconverted,
)

log = logging.getLogger(__name__)

# A write batch ends at whichever comes first. Small batches keep the one writer free for
# the other knowledge bases (a save waits for at most one batch), large enough that each
# commit carries many documents.
BATCH = 100
BATCH_BYTES = 512 * 1024
# ... and while the writer has nothing to do, a batch is written once it holds this much:
# the writer starts on the first files prepared rather than waiting for a full batch.
IDLE_BATCH_BYTES = 64 * 1024
# A path sync of at most this many files to prepare goes before bulk work (a save, an
# API write, a few files synced in); a larger one is bulk work itself.
INTERACTIVE_FILES = 64
# After this much text is indexed in one pass, memory is given back (Database.reclaim).
LARGE_WORK = 4 * 1024 * 1024
# After a pass that wrote this many documents, the KB's keyword index is merged (once the
# pass has answered: Reindexer._upkeep_later).
MERGE_AFTER_DOCUMENTS = 1_000
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
    bytes: int = 0

    def full(self, writer_idle: bool = False) -> bool:
        return len(self.writes) + len(self.removed) + len(self.restat) >= BATCH or self.bytes >= (
            IDLE_BATCH_BYTES if writer_idle else BATCH_BYTES
        )

    def __bool__(self) -> bool:
        return bool(self.writes or self.removed or self.restat)


@dataclass
class _Plan:
    observed: Mapping[str, tuple[int, int]]  # the files found: (size, mtime_ns)
    result: ReindexResult
    to_read: list[tuple[str, int]] = field(default_factory=list)  # (path, size)
    gone: list[str] = field(default_factory=list)  # indexed paths whose files are gone
    # what the index remembers of those (read after the plan: a pass needs few of them)
    todo: list[PrepareItem] = field(default_factory=list)
    known: dict[str, IndexedFile] = field(default_factory=dict)  # of those to prepare
    removed: list[str] = field(default_factory=list)  # documents whose files are gone
    forget: list[tuple[str, str]] = field(default_factory=list)  # skipped files now gone
    converts: bool = False  # a file to read is converted (its text may need converting)


class Reindexer:
    def __init__(
        self,
        store: DocumentIndex,
        activity: ActivityLog,
        tree: DocsTree,
        registry: KBRegistry,
        preparer: Preparer,
        progress: ProgressBoard | None = None,
        budget: Budget = DEFAULT,
        *,
        events: Events,
    ) -> None:
        self.progress = progress or ProgressBoard()
        self.store = store
        self.activity = activity
        self.tree = tree
        self.registry = registry
        self.preparer = preparer
        self.budget = budget
        # DocumentsChanged (vectors owed), ConvertiblesAhead (a converter may start while
        # the pass prepares its files), UnconvertedFound (a text to convert)
        self.events = events
        # Documents waiting for their text to be converted, with the stat they had: not
        # read again meanwhile (their rows, if any, stay until the new text is indexed).
        self._converting: dict[tuple[str, str], FileStat] = {}
        # Files skipped for a reason (binary, too large, refused by the index), with the
        # stat they had, so they are not read again until they change.
        self._skipped: dict[tuple[str, str], tuple[FileStat, str]] = {}
        # Sync tools' conflict copies each KB held at its last full scan.
        self._conflicts: dict[str, Mapping[str, ConflictCopy]] = {}
        # The files that are not documents (images...), as scanned: links lead to them too.
        self.other_files = OtherFiles()
        # KBs whose pass in flight is to stop at its next document (a settings change
        # waits for the lock it holds; the pass the change asks for follows).
        self._halted: set[str] = set()
        # The merge (and reclaim) after a bulk pass, by KB: run once the pass has answered.
        self._upkeep: dict[str, asyncio.Task[None]] = {}

    def halt(self, kb: str) -> None:
        """Make a pass over `kb` in flight stop at its next document and let go of its
        lock; what it had not indexed yet is left to the next pass."""
        self._halted.add(kb)

    def resume(self, kb: str) -> None:
        self._halted.discard(kb)

    def settings(self, kb: KnowledgeBase) -> PrepareSettings:
        config = kb.config
        return PrepareSettings(
            kb=kb.name,
            chunk_size=config.chunk_size,
            chunk_overlap=config.chunk_overlap,
            chunking=config.chunking_key(),
            max_markdown_bytes=config.max_document_bytes * MARKDOWN_LIMIT_FACTOR,
            vector_enabled=config.vector_enabled,
            budget=self.budget,
            max_document_bytes=config.max_document_bytes,
        )

    def conflicts(self, kb: str) -> Mapping[str, ConflictCopy]:
        return self._conflicts.get(kb, {})

    def forget_skipped(self, kb: str) -> None:
        """Read skipped files again (after the rules that skipped them changed)."""
        self._conflicts.pop(kb, None)
        for held in (self._skipped, self._converting):
            for key in [key for key in held if key[0] == kb]:
                del held[key]

    def forget_all_skipped(self) -> None:
        self._skipped.clear()
        self._converting.clear()

    def converted(self, kb: str, path: str) -> None:
        """The document's text was converted (or could not be): read it again."""
        self._converting.pop((kb, path), None)

    def skipped_count(self, kb: str) -> int:
        return sum(1 for name, _ in self._skipped if name == kb)

    async def skipped(self, kb: str, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
        """A page of the files of `kb` that are not indexed, and why, by relative path; with
        those indexed in a bounded form (`degraded`: over a budget, and which); and how many
        there are. The bounded ones are read from the index up to the page's end only."""
        mine = {p: why for (name, p), (_, why) in self._skipped.items() if name == kb}
        end = offset + limit
        rows, count, shared = await self.store.degraded(kb, end, sorted(mine))
        bounded = {path: "; ".join(why) for path, why in rows}
        reasons = sorted({**bounded, **mine}.items())[offset:end]
        listed = await asyncio.to_thread(self._described, kb, reasons)
        for entry in listed:
            if bounded.get(entry["relative_path"]) == entry["reason"]:
                entry["degraded"] = True
        return listed, count - shared + len(mine)

    def _described(self, kb: str, skipped: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
        ordered = sorted(skipped)
        where = self.tree.places(kb, [path for path, _ in ordered])
        return [
            {"relative_path": path, "path": where[path], "reason": reason}
            for path, reason in ordered
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
            return await self.reconcile_locked(self._current(kb), actor=actor, audit=audit)

    async def reconcile_locked(
        self, kb: KnowledgeBase, *, actor: str = "system", audit: bool = False
    ) -> ReindexResult:
        """`reconcile`, for a caller that holds the KB's lock."""
        # One after the other: side by side, the walk (a system call per file, each giving
        # up the GIL) waits for the GIL behind the read of the rows, and both take longer.
        scan = await asyncio.to_thread(self.tree.scan, kb.name)
        indexed = await self.store.indexed_files(kb.name, kb.config.chunking_key())
        for key in [k for k, v in self._skipped.items() if k[0] == kb.name and v[0] == RECHECK]:
            del self._skipped[key]  # unreadable files and unusable names: seen afresh
        result = await self._sync(kb, scan, indexed, actor, interactive=False)
        self._conflicts[kb.name] = scan.conflicts
        others = (kb.name, scan.other_files, scan.other_files_left_out)
        await asyncio.to_thread(self.other_files.replace, *others)
        self._forget_gone(kb.name, scan, lambda path: True)
        self._note_unusable(kb.name, scan, result)
        # An entry per file in each: freed in a thread, not in a pause of the serving loop.
        large = [scan, indexed]
        del scan, indexed
        await asyncio.to_thread(large.clear)
        await self._finish(kb.name, result)
        if result.changed or audit:
            await self.activity.audit("kb_reindexed", actor, kb.name, None, result.as_dict())
        return result

    async def sync_paths(
        self, kb: KnowledgeBase, relpaths: Iterable[str], *, actor: str = "system"
    ) -> ReindexResult:
        """Reconcile just these paths (files or folders, present or gone)."""
        async with self.registry.lock(kb.name):
            return await self.sync_paths_locked(self._current(kb), relpaths, actor=actor)

    def _current(self, kb: KnowledgeBase) -> KnowledgeBase:
        """The KB as it is now that its lock is held: its settings may have changed while
        the caller waited for it (a pass asked for before a settings change must read the
        files with the new ones: a document over a new size limit was indexed, and later
        passes, finding it unchanged, kept it)."""
        return self.registry.get(kb.name) or kb

    async def sync_paths_locked(
        self, kb: KnowledgeBase, relpaths: Iterable[str], *, actor: str = "system"
    ) -> ReindexResult:
        """`sync_paths`, for a caller that holds the KB's lock."""
        paths = sorted(set(relpaths))
        indexed = await self.store.indexed_files(kb.name, kb.config.chunking_key(), paths)
        scan = await asyncio.to_thread(self._observe, kb.name, paths)
        result = await self._sync(kb, scan, indexed, actor, interactive=True)
        looked = [path for path in paths if path not in scan.files]  # not a document's save
        if looked:
            await asyncio.to_thread(self.other_files.update, kb.name, looked, scan.other_files)
        self._forget_gone(kb.name, scan, lambda path: _under(path, paths))
        self._note_unusable(kb.name, scan, result)
        return await self._finish(kb.name, result)

    def _forget_gone(self, kb: str, scan: TreeScan, asked: Callable[[str], bool]) -> None:
        """Skipped files the scan (of the paths asked about) proves gone are no longer
        listed, nor waited for."""
        for held in (self._skipped, self._converting):
            gone = [
                key
                for key in held
                if key[0] == kb
                and asked(key[1])
                and key[1] not in scan.files
                and key[1] not in scan.unusable
                and scan.covers(key[1])
            ]
            for key in gone:
                del held[key]

    def _note_unusable(self, kb: str, scan: TreeScan, result: ReindexResult) -> None:
        """Files the scan saw but cannot index by name are reported, never silently lost."""
        for path, reason in scan.unusable.items():
            self._skipped[(kb, path)] = (RECHECK, reason)
            result.documents_skipped += 1
            result.skipped.append({"relative_path": path, "reason": reason})

    def _observe(self, kb: str, paths: list[str]) -> TreeScan:
        files: dict[str, tuple[int, int]] = {}
        failed: list[str] = []
        unusable: dict[str, str] = {}
        others: list[str] = []
        for path in paths:
            stat = self.tree.stat(kb, path)
            if stat is not None:
                files[path] = stat
                continue
            sub = self.tree.scan(kb, under=path)
            files.update(sub.files)
            failed.extend(sub.failed_dirs)
            unusable.update(sub.unusable)
            others += sub.other_files
        return TreeScan(files=files, failed_dirs=failed, unusable=unusable, other_files=others)

    async def _sync(
        self,
        kb: KnowledgeBase,
        scan: TreeScan,
        indexed: IndexedFiles,
        actor: str,
        *,
        interactive: bool,
    ) -> ReindexResult:
        # a full pass plans over every file of the KB: off the serving loop
        plan = await asyncio.to_thread(self._plan, kb, scan, indexed)
        if plan.converts:
            self.events.publish(ConvertiblesAhead(kb.name))
        await self._look_closer(kb.name, plan, indexed)
        for key in plan.forget:
            self._skipped.pop(key, None)
        result = plan.result
        todo = plan.todo
        todo_bytes = sum(item.size for item in todo)
        # a folder moved in or a checkout brings thousands of files: that is bulk work
        interactive = interactive and len(todo) <= INTERACTIVE_FILES
        # as many to write as merit a merge after: the keyword index merges only then
        bulk = not interactive and len(todo) >= MERGE_AFTER_DOCUMENTS
        if bulk:
            await self.store.bulk_load(kb.name)
        try:
            with self.progress.track(kb.name, "indexing", len(todo)) as progress:
                await self._index(kb, plan, result, actor, progress, interactive)
        except Exception:  # (a pass cut short by a stop: the next start restores it)
            if bulk:
                self._upkeep_later(kb.name, large=False)
            raise
        if result.documents_added or result.documents_updated:
            self.events.publish(DocumentsChanged(kb.name))
        written = result.documents_added + result.documents_updated + result.documents_removed
        large = todo_bytes >= LARGE_WORK
        if bulk or written >= MERGE_AFTER_DOCUMENTS:
            self._upkeep_later(kb.name, large)
        # Removed and replaced rows leave free pages, large work memory: looked at after a
        # removal, large work or a bulk pass; a save or an API edit waits for no such look.
        elif result.documents_removed or large or not interactive:
            await self.store.reclaim(large_work=large)
        return result

    def _upkeep_later(self, kb: str, large: bool) -> None:
        """After the pass has answered: its KB's keyword index merged into one piece, then
        the space and memory the pass left given back. Search is right meanwhile (it reads
        every piece, a little slower); a second bulk pass's upkeep follows the first's."""
        before = self._upkeep.get(kb)
        task = asyncio.create_task(self._upkeep_after(kb, large, before), name=f"upkeep-{kb}")
        self._upkeep[kb] = task

        def ended(done: asyncio.Task[None]) -> None:
            if self._upkeep.get(kb) is done:
                del self._upkeep[kb]
            if not done.cancelled() and (exc := done.exception()) is not None:
                log.error("%s: merging the keyword index failed", kb, exc_info=exc)

        task.add_done_callback(ended)

    async def _upkeep_after(self, kb: str, large: bool, before: asyncio.Task[None] | None) -> None:
        if before is not None:
            await asyncio.wait([before])
        async with self.registry.lock(kb):
            pass  # the pass has answered (its last writes do not wait behind a merge step)
        try:
            await self.store.merge_keyword_index(kb)
            await self.store.reclaim(large_work=large, whole=True)
        except CofferError as exc:  # the disk refused, or the index is being rebuilt: the
            # next bulk pass merges again (queries are right with the pieces as they are)
            log.warning("%s: the keyword index was left in pieces: %s", kb, exc.message)

    async def upkeep_done(self, timeout_s: float | None = None) -> None:
        """Wait for the upkeep after bulk passes (`timeout_s` at most; what is left then is
        cancelled: the index is right without it)."""
        tasks = list(self._upkeep.values())
        if not tasks:
            return
        _, cut = await asyncio.wait(tasks, timeout=timeout_s)
        for task in cut:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _plan(self, kb: KnowledgeBase, scan: TreeScan, indexed: IndexedFiles) -> _Plan:
        """What a pass must do: the files to prepare, the documents whose files are gone,
        the counts of those left as they are."""
        files = scan.files
        plan = _Plan(files, ReindexResult(len(files)))
        for path in indexed.gone(files):
            # a file under a folder that could not be read: its absence proves nothing
            if scan.covers(path):
                plan.gone.append(path)
                plan.forget.append((kb.name, path))
        settings = self.settings(kb)

        def too_large(path: str, size: int) -> bool:  # as preparing the file would find it
            return preparation.too_large(size, settings, converted=is_converted(path))

        changed = indexed.changed(files, too_large)
        plan.result.documents_unchanged = len(files) - len(changed)
        for path in changed:
            stat = FileStat(*files[path])
            if self._converting.get((kb.name, path)) == stat:
                plan.result.documents_converting += 1  # its text is on its way
            elif (skip := self._skipped.get((kb.name, path))) and skip[0] == stat:
                plan.result.documents_skipped += 1
                plan.result.skipped.append({"relative_path": path, "reason": skip[1]})
            else:
                plan.to_read.append((path, stat.size))
        plan.converts = any(is_converted(path) for path, _ in plan.to_read)
        return plan

    async def _look_closer(self, kb: str, plan: _Plan, indexed: IndexedFiles) -> None:
        """What the index remembers of the files a plan reads again or removes."""
        asked = [*plan.gone, *(path for path, _ in plan.to_read if path in indexed)]
        details = await self.store.indexed_details(kb, asked) if asked else {}
        plan.removed = [details[path].document_id for path in plan.gone if path in details]
        for path, size in plan.to_read:
            known = details.get(path)
            if known is not None:
                plan.known[path] = known
            plan.todo.append(PrepareItem(path, size, known))
        plan.to_read = []
        plan.result.documents_removed = len(plan.removed)

    async def _index(
        self,
        kb: KnowledgeBase,
        plan: _Plan,
        result: ReindexResult,
        actor: str,
        progress: Progress,
        interactive: bool,
    ) -> None:
        """Prepare the files in worker processes; write what they answer batch by batch,
        each batch while the next is prepared."""
        batch = _Batch(removed=plan.removed)
        pending: asyncio.Task[None] | None = None

        async def flush() -> None:
            nonlocal batch, pending
            if pending is not None:
                await pending
                pending = None
            if batch:
                pending = asyncio.create_task(self._apply(kb.name, batch, result, actor))
            batch = _Batch()

        try:
            if plan.todo:
                outcomes = self.preparer.prepare(
                    kb.name, self.settings(kb), plan.todo, interactive=interactive
                )
                try:
                    async for outcome in outcomes:
                        self._take(kb.name, outcome, plan.known, plan.observed, batch, result)
                        progress.advance(1)
                        if batch.full(writer_idle=pending is None or pending.done()):
                            await flush()
                        if kb.name in self._halted:
                            break
                finally:
                    await aclose(outcomes)
            await flush()
        finally:
            if pending is not None:
                await pending

    def _take(
        self,
        kb: str,
        outcome: Outcome,
        known: Mapping[str, IndexedFile],
        observed: Mapping[str, tuple[int, int]],
        batch: _Batch,
        result: ReindexResult,
    ) -> None:
        """One prepared file into the batch and the counts. A file skipped before stays
        listed, with its old reason, until its new outcome replaces it here."""
        path = outcome.path
        self._skipped.pop((kb, path), None)
        indexed = known.get(path)
        if isinstance(outcome, DocumentWrite):
            batch.writes.append(outcome)
            batch.bytes += sum(len(c.fts_text) for c in outcome.chunks)
            if indexed:
                result.documents_updated += 1
            else:
                result.documents_added += 1
            if outcome.degraded:
                result.documents_degraded += 1
            return
        if isinstance(outcome, Unchanged):
            if indexed is not None:
                batch.restat.append((indexed.document_id, outcome.stat))
            result.documents_unchanged += 1
            return
        if isinstance(outcome, Unconverted):
            self._converting[(kb, path)] = outcome.stat
            result.documents_converting += 1  # as it was, until its text is converted
            self.events.publish(UnconvertedFound(kb, path, outcome.digest))
            return
        if isinstance(outcome, Gone):
            reason = None
        elif isinstance(outcome, Skipped):
            reason = outcome.reason
            stat = outcome.stat or RECHECK
        else:
            assert isinstance(outcome, Failed)
            log.warning("%s: %s not indexed: %s", kb, path, outcome.reason)
            reason = outcome.reason
            found = observed.get(path)  # tried again once the file changes (or next pass)
            stat = RECHECK if found is None or not outcome.lasting else FileStat(*found)
        if reason is not None:
            self._skipped[(kb, path)] = (stat, reason)
            result.documents_skipped += 1
            result.skipped.append({"relative_path": path, "reason": reason})
            if isinstance(outcome, Failed) or (
                isinstance(outcome, Skipped) and outcome.stat is None
            ):
                # not prepared (or could not be read): the version indexed before stays
                # until a new one is in
                return
        if indexed is not None:
            batch.removed.append(indexed.document_id)
            result.documents_removed += 1

    async def _apply(self, kb: str, batch: _Batch, result: ReindexResult, actor: str) -> None:
        failures = await self.store.apply(kb, batch.writes, batch.removed, batch.restat, actor)
        events = {w.document.path: w for w in batch.writes}
        for failure in failures:
            log.warning("%s: %s not indexed: %s", kb, failure.path, failure.reason)
            self._skipped[(kb, failure.path)] = (failure.stat, failure.reason)
            write = events[failure.path]
            if write.event == "kb_document_ingested":
                result.documents_added -= 1
            else:
                result.documents_updated -= 1
            if write.degraded:
                result.documents_degraded -= 1
            result.documents_skipped += 1
            result.skipped.append({"relative_path": failure.path, "reason": failure.reason})


def _under(path: str, paths: Iterable[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in paths)


async def aclose(outcomes: AsyncIterator[Outcome]) -> None:
    """End a stream of outcomes left before its end: its workers' remaining work is let go."""
    close = getattr(outcomes, "aclose", None)
    if close is not None:
        await close()
