"""Converting the documents a KB indexes where they lie (PDF, Word, slides, e-books...) to
the Markdown text that is indexed of them.

The Reindexer meets such a document's bytes with no text kept for them (`Unconverted`) and
hands it here. Conversions run off the index's way, one at a time, in a converter process
of their own at a low priority (an `add` never waits behind them), so a note saved
meanwhile is indexed as fast as ever; the process goes when there is nothing to convert. Each
original is copied out of the folder first (confined, never through a link) and converted
from the copy; its text (or why there is none: encrypted, damaged, scanned, too slow) is
kept by the digest of the bytes converted, and the document is then indexed again from it.
The folder is never written.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from functools import lru_cache
from pathlib import Path

from cofferd.application.indexing.knowledge_bases import KnowledgeBases
from cofferd.application.indexing.progress import Progress, ProgressBoard
from cofferd.application.indexing.reindexer import Reindexer
from cofferd.domain.errors import CofferError
from cofferd.domain.events import Converted, Events
from cofferd.domain.failures import ConversionFailed
from cofferd.domain.formats import format_of
from cofferd.domain.pages import PageStart, page_starts
from cofferd.domain.ports import (
    DerivedTextStore,
    DocsTree,
    KBIndex,
    MarkdownConverter,
    ScratchFolder,
    TrashBin,
)

log = logging.getLogger(__name__)

# A file that could not be converted is tried again once its bytes change, or after this
# long (its failure is forgotten; no digest of a skipped file is kept to tell it is there).
# A conversion stopped for its time or a crash (which load may cause) is tried again at
# the first full pass a day later.
FAILURES_KEPT_S = 30 * 24 * 3600.0
TEXTS_GRACE_S = 3600.0  # a text this new is kept: its document may be on its way in
PAGES_KEPT = 256  # converted texts whose page starts are kept
PAGE_TEXT_LIMIT = 400 * 1024 * 1024  # read whole: the pages of the longest text

Key = tuple[str, str]  # (kb, path)


class Conversions:
    def __init__(
        self,
        kbs: KnowledgeBases,
        index: KBIndex,
        tree: DocsTree,
        converter: MarkdownConverter,
        texts: DerivedTextStore,
        reindexer: Reindexer,
        progress: ProgressBoard,
        scratch: ScratchFolder,
        trash: TrashBin,
        events: Events,
    ) -> None:
        self.kbs = kbs
        self.index = index
        self.tree = tree
        self.converter = converter
        self.texts = texts
        self.reindexer = reindexer
        self.progress = progress
        self.scratch = scratch  # private copies of the originals while they convert
        self.trash = trash  # a document there keeps its text, to come back as it was
        self.events = events  # Converted: the document is indexed again
        self._queue: dict[Key, str] = {}  # -> the digest the reindexer saw, oldest first
        self._current: Key | None = None
        self._progress: dict[str, Progress] = {}
        self._wake = asyncio.Event()
        self.converted = 0
        self.failed = 0

    def submit(self, kb: str, path: str, digest: str) -> None:
        """Convert the document at `path` (its bytes had `digest`) when its turn comes."""
        key = (kb, path)
        if key not in self._queue and key != self._current:
            progress = self._progress.get(kb)
            if progress is None:
                progress = self._progress[kb] = self.progress.start(kb, "converting", 0)
            progress.total += 1
        self._queue[key] = digest
        self._wake.set()

    async def forget(self, kb: str) -> None:
        """A KB deleted (gone from the registry): nothing of it is converted any more, and
        its texts go."""
        for key in [key for key in self._queue if key[0] == kb]:
            del self._queue[key]
        self._finish(kb)
        await asyncio.to_thread(self.texts.remove_kb, kb)

    def expect(self, kb: str) -> None:
        """A pass over `kb` is to read files it converts: the converter starts while the
        pass prepares them, not once it meets the first whose text is to be converted."""
        if not self._queue and self._current is None:
            self.converter.warm()

    def status(self) -> dict[str, object]:
        return {
            "queued": len(self._queue),
            "converting": self._current[1] if self._current else None,
            "converted": self.converted,
            "failed": self.failed,
            "converter": self.converter.status(),
        }

    def waiting(self, kb: str) -> int:
        return sum(1 for key in self._queue if key[0] == kb) + (
            1 if self._current and self._current[0] == kb else 0
        )

    async def run(self) -> None:
        """Convert what is submitted, for as long as the daemon runs. One document that
        breaks something unforeseen costs that document, logged, never the queue."""
        await asyncio.to_thread(self.scratch.clear)  # copies a kill left
        while True:
            if not self._queue:  # (the converter lets its process go by itself when idle)
                self._wake.clear()
                await self._wake.wait()
                continue
            key = next(iter(self._queue))
            del self._queue[key]
            self._current = key
            try:
                settled = await self._convert(*key)
            except asyncio.CancelledError:
                self._current = None
                raise  # the daemon is stopping: the next start finds it unconverted
            except Exception:
                log.exception("%s: converting %s failed", *key)
                settled = False  # the next full pass tries it again
            self._current = None
            self._done(key, settled)

    async def prune(self, kb: str) -> int:
        """After a full reconcile (a rename has found its text by then): forget the texts
        no document of the KB comes from any more, and old failures; convert again the
        documents whose text went missing (`derived/` deleted: it only costs time).
        Bytes freed."""
        async with self.kbs.registry.lock(kb):  # no document indexed meanwhile
            files = await self.index.converted_files(kb)
            wanted = set(files) | {d for (name, _), d in self._queue.items() if name == kb}
            trashed = await asyncio.to_thread(self.trash.entries, kb)
            wanted |= {entry.content_sha256 for entry in trashed if entry.content_sha256}
            now = time.time()
            freed, present = await asyncio.to_thread(
                self.texts.prune, kb, wanted, now - TEXTS_GRACE_S, now - FAILURES_KEPT_S
            )
        for digest in set(files) - present:
            for path in files[digest]:
                self.submit(kb, path, digest)
        return freed

    async def _convert(self, kb: str, path: str) -> bool:
        """Convert one document and keep its text (or why there is none). False when that
        could not be decided now (its folder or the data home failed, the converter was
        too slow or died, maybe for the load): the next full pass tries again, not at
        once, over and over."""
        known = self.kbs.registry.get(kb)
        if known is None or not known.enabled:
            return True
        fmt = format_of(path)
        copy: Path | None = None
        try:
            if await asyncio.to_thread(self.tree.stat, kb, path) is None:
                return True  # gone, or no document any more (its format, an ignore file)
            fd, made_copy = await asyncio.to_thread(self.scratch.new_file, f".{fmt}")
            copy = made_copy
            with os.fdopen(fd, "wb") as sink:
                content = await asyncio.to_thread(self.tree.read, kb, path, sink)
            if content is None:
                return True  # gone (or now a link): indexing again removes it
            if await asyncio.to_thread(self._kept, kb, content.digest):
                return True  # a copy of it came first
            made: str | ConversionFailed
            try:  # made final in the converter's process: kept here as it is
                made = (await self.converter.convert(made_copy, fmt)).markdown
            except ConversionFailed as exc:
                made = exc
            await asyncio.to_thread(self._keep, kb, path, content.digest, made)
            # settled either way: a failure is listed in `skipped` at once with its reason
            # (one that load may cause, a timeout or a crash, is tried again a day later)
            return True
        except (OSError, CofferError) as exc:  # the folder or the data home: next pass
            log.warning("%s: %s not converted now: %s", kb, path, exc)
            return False
        finally:
            if copy is not None:
                copy.unlink(missing_ok=True)

    def _kept(self, kb: str, digest: str) -> bool:
        return (
            self.texts.failure(kb, digest) is not None or self.texts.text(kb, digest, 1) is not None
        )

    def _keep(self, kb: str, path: str, digest: str, made: str | ConversionFailed) -> None:
        if self.kbs.registry.get(kb) is None:
            return  # deleted meanwhile: keep nothing of it
        if isinstance(made, ConversionFailed):
            self.failed += 1
            log.info("%s: %s cannot be converted: %s", kb, path, made)
            self.texts.put_failure(kb, digest, str(made), transient=made.transient)
        else:
            self.texts.put(kb, digest, made)
            self.converted += 1

    def _done(self, key: Key, settled: bool) -> None:
        kb, path = key
        self.reindexer.converted(kb, path)
        if settled:
            self.events.publish(Converted(kb, path))
        progress = self._progress.get(kb)
        if progress is not None:
            progress.advance(1)
        if not any(name == kb for name, _ in self._queue):
            self._finish(kb)

    def _finish(self, kb: str) -> None:
        progress = self._progress.pop(kb, None)
        if progress is not None:
            self.progress.finish(progress)


class Pages:
    """The page (slide, sheet) a line of a converted document is on, its page starts read
    once per text (the last few hundred texts asked about are kept; lru_cache is safe
    across the threads searches ask from)."""

    def __init__(self, texts: DerivedTextStore, limit: int = PAGE_TEXT_LIMIT) -> None:
        self.texts = texts
        self.limit = limit
        self._starts = lru_cache(maxsize=PAGES_KEPT)(self._read_starts)

    def starts(self, kb: str, digest: str) -> list[PageStart]:
        return self._starts(kb, digest)

    def _read_starts(self, kb: str, digest: str) -> list[PageStart]:
        text = self.texts.text(kb, digest, self.limit)
        return page_starts(text) if text else []
