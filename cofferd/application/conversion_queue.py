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
import re
import sys
import time
from bisect import bisect_right
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from cofferd.application import markdown
from cofferd.application.converted_titles import usable_title
from cofferd.application.knowledge_bases import KnowledgeBases
from cofferd.application.progress import Progress, ProgressBoard
from cofferd.application.reindexer import Reindexer
from cofferd.domain.errors import CofferError
from cofferd.domain.failures import ConversionFailed
from cofferd.domain.formats import format_of
from cofferd.domain.index_records import Converted
from cofferd.domain.models import utc_now
from cofferd.domain.ports import (
    DerivedTextStore,
    DocsTree,
    KBIndex,
    MarkdownConverter,
    ScratchFolder,
    TrashBin,
)

log = logging.getLogger(__name__)

MAX_CONVERTED_CHARS = 32_000_000  # a longer converted text is a bomb, not a document
# A file that could not be converted is tried again once its bytes change, or after this
# long (its failure is forgotten; no digest of a skipped file is kept to tell it is there).
# A conversion stopped for its time or a crash (which load may cause) is tried again at
# the first full pass a day later.
FAILURES_KEPT_S = 30 * 24 * 3600.0
TEXTS_GRACE_S = 3600.0  # a text this new is kept: its document may be on its way in
PAGE_BREAK = "\x0c"  # pdfminer's, between pages
# Each page of a PDF is a section of its converted text: passages never straddle two, and
# each says its page. Slide decks come with their own marks (and a heading per slide).
PAGE_MARK = "## Page {}"
PAGE_MARKS = re.compile(r"^(?:## Page |<!-- Slide number: )(\d{1,6})(?: -->)?$", re.MULTILINE)
PAGES_KEPT = 256  # converted texts whose page starts are kept
EPUB_FIELD = re.compile(r"\*\*([A-Z][a-z]+):\*\* ")
EPUB_NOISE = {"Title", "Language", "Identifier", "Date", "Cover"}
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
        self.on_converted: Callable[[str, str], None] | None = None  # index it again
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

    def status(self) -> dict[str, object]:
        return {
            "queued": len(self._queue),
            "converting": self._current[1] if self._current else None,
            "converted": self.converted,
            "failed": self.failed,
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
            try:
                converted = await self.converter.convert(made_copy, fmt)
                # counted and marked off the loop: a converted text may be tens of MB
                made: str | ConversionFailed = await asyncio.to_thread(
                    derived_text, converted, fmt, self.converter.engine
                )
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
        if settled and self.on_converted is not None:
            self.on_converted(kb, path)
        progress = self._progress.get(kb)
        if progress is not None:
            progress.advance(1)
        if not any(name == kb for name, _ in self._queue):
            self._finish(kb)

    def _finish(self, kb: str) -> None:
        progress = self._progress.pop(kb, None)
        if progress is not None:
            self.progress.finish(progress)


def derived_text(converted: Converted, fmt: str, engine: str) -> str:
    """The Markdown kept for a converted document: what the converter made of it, its
    pages marked where the format has pages, below frontmatter saying where it came from.
    A PDF with (next to) no text is a scan: there is nothing to index without OCR. Its
    title is its own, or its file's name (one text serves every copy, so it names none)."""
    body = converted.markdown
    if len(body) > MAX_CONVERTED_CHARS:
        raise ConversionFailed(
            f"too large: its text is over {MAX_CONVERTED_CHARS // 1_000_000} million characters"
        )
    if fmt == "pdf":
        pages = body.split(PAGE_BREAK)
        if pages and not pages[-1].strip():
            pages.pop()
        letters = sum(1 for ch in body if ch.isalnum())
        if letters < len(pages) or not letters:  # not a letter a page: images of pages
            raise ConversionFailed(
                "a scanned PDF: it has no text layer to index (Coffer does not read images)"
            )
        body = "\n\n".join(
            f"{PAGE_MARK.format(n)}\n\n{page.strip()}" for n, page in enumerate(pages, 1)
        )
    elif not body.strip():
        raise ConversionFailed("no text in it")
    elif fmt == "epub":
        body = _without_bookkeeping(body)
    head: dict[str, str] = {}
    if title := usable_title(converted.title):  # never "untitled", "(anonymous)"...
        head["title"] = title
    head.update(source_format=fmt, converter=engine, converted_at=utc_now())
    return markdown.compose(head, body.strip() + "\n")


def _without_bookkeeping(body: str) -> str:
    """An e-book's text without the lines markitdown writes above it that say nothing to
    search (its title is the document's, its language, identifier, date and cover);
    authors, publisher and description stay."""
    head, sep, rest = body.partition("\n\n")
    lines = head.split("\n")
    fields = [EPUB_FIELD.match(line) for line in lines]
    if not sep or not all(fields):
        return body
    kept = [
        line for line, field in zip(lines, fields, strict=True)
        if field and field.group(1) not in EPUB_NOISE
    ]  # fmt: skip
    return "\n".join(kept) + sep + rest if kept else rest


def page_starts(text: str) -> list[tuple[int, int]]:
    """(line, page) where each page (or slide) of a converted text starts, lines from 1."""
    starts, lines, counted = [], 1, 0
    for mark in PAGE_MARKS.finditer(text):
        lines += text.count("\n", counted, mark.start())
        counted = mark.start()
        starts.append((lines, int(mark.group(1))))
    return starts


class Pages:
    """The page a line of a converted document is on, its page starts read once per text
    (the last few hundred texts asked about are kept; lru_cache is safe across the
    threads searches ask from)."""

    def __init__(self, texts: DerivedTextStore, limit: int = PAGE_TEXT_LIMIT) -> None:
        self.texts = texts
        self.limit = limit
        self._starts = lru_cache(maxsize=PAGES_KEPT)(self._read_starts)

    def page(self, kb: str, digest: str, line: int) -> int | None:
        starts = self._starts(kb, digest)
        at = bisect_right(starts, (line, sys.maxsize)) - 1
        return starts[at][1] if at >= 0 else None

    def _read_starts(self, kb: str, digest: str) -> list[tuple[int, int]]:
        text = self.texts.text(kb, digest, self.limit)
        return page_starts(text) if text else []
