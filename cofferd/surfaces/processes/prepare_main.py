"""The process that prepares documents for the index (the composition root of one).

The daemon starts a few of these (infrastructure.workers.prepare_pool, over the one worker
pool) and sends each a batch at a time: a KB's docs folder, its settings and the files to
prepare. For every file, in order, the worker answers one outcome (domain.prepare_jobs):
it reads the file (confined to the folder), and prepares it (application.preparation),
text for FTS5 included. Files are
hostile input: if one makes this process slow or kills it, the daemon replaces the
process and skips that file; nothing else is held up.

It imports no more than preparing needs (no pydantic, no SQLite), so it starts fast and
costs little memory while it waits.
"""

from __future__ import annotations

import contextlib
import logging
import resource
import sys
import traceback
from pathlib import Path
from typing import Any

from cofferd.application.reading import preparation
from cofferd.domain.file_records import FileContent, FileStat
from cofferd.domain.formats import CONVERTED_FORMATS, MARKDOWN, format_of
from cofferd.domain.index_records import DocumentWrite, IndexedChunk
from cofferd.domain.links import Link
from cofferd.domain.models import Document
from cofferd.domain.prepare_jobs import (
    Gone,
    Outcome,
    PrepareItem,
    PrepareSettings,
    Skipped,
    Unchanged,
    Unconverted,
)
from cofferd.infrastructure import memory
from cofferd.infrastructure.files.confined_read import TreeReader
from cofferd.infrastructure.storage import fts_text
from cofferd.infrastructure.workers.frames import DATE_TYPES, Replies, serve_items

log = logging.getLogger("cofferd.processes.prepare")

# what this process answers (domain.prepare_jobs, domain.index_records), and what the
# daemon unpickles of it, nothing else
REPLIES = Replies(
    frozenset(
        {Gone, Unchanged, Skipped, Unconverted, DocumentWrite, IndexedChunk, Document, Link,
         FileStat, *DATE_TYPES}
    )
)  # fmt: skip

MEMORY_MB = 2048  # address space: a document that needs more fails with MemoryError
LARGE_ITEM = 1024 * 1024


def prepare_one(reader: TreeReader, item: PrepareItem, settings: PrepareSettings) -> Outcome:
    fmt = format_of(item.path)
    converted = fmt in CONVERTED_FORMATS
    try:
        # a converted document's file is read only for its digest: its text is kept apart
        content = reader.read(item.path, limit=0 if converted else settings.budget.indexed_bytes)
    except OSError as exc:
        return Skipped(item.path, None, f"unreadable: {exc.strerror or exc}")
    except ValueError as exc:  # a path that cannot name a file in the tree
        return Skipped(item.path, None, f"unreadable: {exc}")
    if content is None:
        return Gone(item.path)
    try:
        if converted:
            return _prepare_converted(item, content, settings, fmt)
        in_place = None if fmt == MARKDOWN else fmt
        return preparation.prepare(item, content, settings, fts_text.index_text, in_place)
    except MemoryError:
        return Skipped(item.path, content.stat, "needs more memory than a document may use")
    except RecursionError:
        return Skipped(item.path, content.stat, "nests too deeply to be read")


def _prepare_converted(
    item: PrepareItem, original: FileContent, settings: PrepareSettings, fmt: str
) -> Outcome:
    """A document in another format, from the text converted out of its bytes: none kept
    yet is Unconverted; a conversion that failed for these bytes stays skipped."""
    # imported by the first such document: a worker of notes alone starts ~20 ms sooner
    from cofferd.infrastructure.conversion import derived_texts

    stat, digest = original.stat, original.digest
    if preparation.too_large(original.size, settings, converted=True):
        return Skipped(item.path, stat, "too_large")  # (first: its KB's limit may be lowered)
    if preparation.unchanged(item, digest, settings):
        return Unchanged(item.path, stat)
    home, folder = Path(settings.data_home), Path(settings.derived)
    try:
        failed = derived_texts.failure(home, folder, digest)
        if failed is not None:
            reason, lasting = failed
            return Skipped(item.path, stat if lasting else None, reason)  # None: each pass
        limit = settings.budget.indexed_bytes
        kept = derived_texts.read(home, folder, digest, derived_texts.TEXT, limit)
    except OSError as exc:  # derived/ is a link (refused), or cannot be read: each pass
        return Skipped(item.path, None, f"its converted text cannot be read: {exc}")
    if kept is None:  # none, or not the text converted from it (edited by hand)
        return Unconverted(item.path, stat, digest)
    text = FileContent(kept[0], stat, digest, kept[1])
    return preparation.prepare(item, text, settings, fts_text.index_text, fmt)


_batch: list[Any] = [None, None]  # the request's head and its reader (one a batch)


def handle(head: tuple[str, PrepareSettings], item: PrepareItem) -> Outcome:
    docs, settings = head
    if _batch[0] is not head:
        _batch[:] = [head, TreeReader(Path(docs))]
    try:
        return prepare_one(_batch[1], item, settings)
    except Exception as exc:  # noqa: BLE001 - a bug must cost one file, not the batch
        traceback.print_exc(file=sys.stderr)
        return Skipped(item.path, None, f"cannot be prepared: {type(exc).__name__}")


def after(item: Any) -> None:
    if item.size >= LARGE_ITEM:
        memory.trim()  # a waiting worker holds no more than it needs


def limit_resources() -> None:
    with contextlib.suppress(ValueError, OSError):  # not every OS has RLIMIT_AS
        limit = MEMORY_MB * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main() -> None:
    limit_resources()
    serve_items(handle, after)


if __name__ == "__main__":
    main()
