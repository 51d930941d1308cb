"""One document made ready for the index: decoded, its frontmatter, title, tags and links
read, chunked, and its text prepared as FTS5 stores it, all within its budgets (see
domain.budgets). Pure work on bytes already read: it runs in worker processes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import PurePosixPath

from cofferd.application.reading import markdown
from cofferd.application.reading.chunker import TooManyChunks, chunk_markdown, plain_chunks
from cofferd.domain.budgets import size_text
from cofferd.domain.file_records import FileContent
from cofferd.domain.formats import CONVERTED_FORMATS, NAMED_BY_FILE, TEXT_FORMATS
from cofferd.domain.index_records import DocumentWrite, IndexedChunk
from cofferd.domain.models import Chunk, Document, utc_from_ns, utc_now
from cofferd.domain.pages import KIND_OF_FORMAT, first_heading
from cofferd.domain.prepare_jobs import Outcome, PrepareItem, PrepareSettings, Skipped, Unchanged
from cofferd.domain.title_choice import folded

TextForIndex = Callable[[str], str]
HEADING_TITLE_MAX_CHARS = 500  # as much as a title the frontmatter gives


def too_large(size: int, settings: PrepareSettings, *, converted: bool = False) -> bool:
    """Whether a file of `size` bytes is past its KB's limit: a converted document's
    original by `max_document_bytes`, a note or text by `max_markdown_bytes`."""
    if converted:
        return bool(settings.max_document_bytes) and size > settings.max_document_bytes
    return size > settings.max_markdown_bytes


def unchanged(item: PrepareItem, digest: str, settings: PrepareSettings) -> bool:
    """Whether the index holds these bytes already, chunked as the KB chunks now."""
    known = item.known
    return (
        known is not None and known.content_sha256 == digest and known.chunking == settings.chunking
    )


def prepare(
    item: PrepareItem,
    content: FileContent,
    settings: PrepareSettings,
    index_text: TextForIndex,
    in_place: str | None = None,
) -> Outcome:
    """What the index should hold for this file's content. `in_place`: the format of a
    document that is no Markdown file (domain.formats): plain text read as it is, or the
    text converted from a file in another format (its digest is the file's). Neither
    says tags or links the way notes do."""
    known = item.known
    if too_large(content.size, settings):  # first: indexed before its KB's limit was lowered
        return Skipped(item.path, content.stat, "too_large")
    if unchanged(item, content.digest, settings):
        return Unchanged(item.path, content.stat)
    budget = settings.budget
    data = content.data
    degraded: list[str] = []
    if content.cut:  # end on a whole line: never half a character or half a link
        data = data[: data.rfind(b"\n") + 1] or data
        degraded.append(
            f"indexed in part: the first {size_text(len(data))} of {size_text(content.size)}"
        )
    try:
        if in_place in TEXT_FORMATS:
            parsed = markdown.parse_plain(data, item.path)
        else:
            parsed = markdown.parse(data, item.path, budget)
    except markdown.NotText as exc:
        return Skipped(item.path, content.stat, str(exc))
    if in_place in CONVERTED_FORMATS:
        parsed = replace(parsed, source_mode="converted", tags=(), aliases=(), links=())
        if in_place in NAMED_BY_FILE and "title" not in parsed.frontmatter:
            parsed = replace(parsed, title=PurePosixPath(item.path).stem)  # not `Page 1`
    degraded += parsed.degraded
    try:
        chunks = chunk_markdown(
            parsed.body,
            parsed.title,
            settings.chunk_size,
            settings.chunk_overlap,
            first_line=parsed.body_line,
            max_chunks=budget.chunks,
            paged=KIND_OF_FORMAT.get(in_place or ""),
        )
    except TooManyChunks:
        degraded.append(
            f"indexed as plain text: its headings and paragraphs make more than "
            f"{budget.chunks:,} chunks"
        )
        chunks = plain_chunks(
            parsed.body, parsed.title, settings.chunk_size, first_line=parsed.body_line
        )
    heading = _heading_title(parsed)
    metadata = dict(parsed.metadata)
    if degraded:
        metadata["degraded"] = degraded
    document = Document(
        id=known.document_id if known else markdown.document_id(item.path),
        resource_name=settings.kb,
        path=item.path,
        title=parsed.title,
        description=parsed.description,
        content_sha256=content.digest,
        source_mode=parsed.source_mode,
        metadata=metadata,
        created_at=utc_now(),
        updated_at=utc_from_ns(content.stat.mtime_ns),  # the file's, as people see it
        embed_pending=settings.vector_enabled,
        tags=parsed.tags,
        aliases=parsed.aliases,
    )
    return DocumentWrite(
        document,
        content.stat,
        settings.chunking,
        [_indexed(chunk, index_text) for chunk in chunks],
        "kb_document_updated" if known else "kb_document_ingested",
        parsed.links,
        fts_meta=index_text(
            " / ".join(
                [parsed.title, *([heading] if heading else []), *parsed.aliases, *parsed.tags]
            )
        ),
        degraded=tuple(degraded),
        heading_title=heading,
    )


def _heading_title(parsed: markdown.ParsedMarkdown) -> str | None:
    """A converted document's first heading (no page mark: a deck's first slide's title)
    where its title is the one its format gave it and the heading says something else."""
    if parsed.source_mode != "converted" or "title" not in parsed.frontmatter:
        return None
    heading = (first_heading(parsed.body) or "")[:HEADING_TITLE_MAX_CHARS].strip()
    return heading if heading and folded(heading) != folded(parsed.title) else None


def _indexed(chunk: Chunk, index_text: TextForIndex) -> IndexedChunk:
    return IndexedChunk(
        chunk.position,
        json.dumps(chunk.heading, ensure_ascii=False),
        chunk.line_start,
        chunk.line_end,
        index_text(chunk.text),
        index_text(" / ".join(chunk.heading)),
    )
