"""Vectors of chunks and the state of the embedding queue: the VectorStore port over SQLite.

The vector rows themselves are vec_index's and the embed flags document_rows'; this module
decides which documents owe vectors, stores them only for the chunking they were computed
from, and answers KNN queries with passages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coffer_kernel.markdown_grammar import heading as heading_of
from cofferd.domain.filters import SearchFilters
from cofferd.domain.index_records import EmbedJob
from cofferd.domain.models import KB_KIND, Passage
from cofferd.domain.pages import MARKS
from cofferd.domain.query_syntax import Query
from cofferd.infrastructure.storage import chunk_rows, document_rows, fts_index, fts_text, vec_index
from cofferd.infrastructure.storage.database import Database
from cofferd.infrastructure.storage.filter_sql import chunks_within
from cofferd.infrastructure.storage.sqlite import Connection


def embedding_text(heading: list[str], text: str) -> str:
    """A chunk as it is embedded: its heading path for context, without repeating the
    heading the chunk itself starts with, and without the marks of pages, slides and sheets
    (domain/pages: where the text is, not what it says; the model reads a few hundred
    tokens)."""
    body = MARKS.sub("", text).strip()
    if heading and body == text.strip():
        starts = heading_of(body.split("\n", 1)[0])  # the kernel's reading of a heading
        if starts is not None and starts[1] == heading[-1]:
            heading = heading[:-1]
    return " / ".join(heading) + "\n\n" + body if heading else body


class SqliteVectors:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def vectors_available(self) -> bool:
        return await self.db.read(vec_index.available)

    async def pending_embeds(self, kb: str, limit: int, now: float) -> list[EmbedJob]:
        """Documents that owe vectors and are due, with their chunks' text."""

        def run(conn: Connection) -> list[EmbedJob]:
            jobs = []
            for doc_id, sha, chunking in document_rows.due_embeds(conn, kb, now, limit):
                chunks = chunk_rows.of_document(conn, kb, doc_id)
                texts = fts_index.texts(conn, kb, [c[0] for c in chunks])
                pieces = [
                    (cid, embedding_text(heading, texts[seq]))
                    for seq, cid, heading in chunks
                    if seq in texts
                ]
                jobs.append(EmbedJob(doc_id, sha, chunking, pieces))
            return jobs

        return await self.db.read(run)

    async def owed_chunks(self, kb: str) -> int:
        return await self.db.read(lambda conn: chunk_rows.owing_vectors(conn, kb))

    async def text_sample(self, kb: str, limit: int) -> list[str]:
        """The text of up to `limit` of the KB's chunks, picked at random."""

        def run(conn: Connection) -> list[str]:
            return list(fts_index.texts(conn, kb, chunk_rows.sample(conn, kb, limit)).values())

        return await self.db.read(run)

    async def store_vectors(
        self,
        kb: str,
        model: str,
        dimensions: int,
        done: Sequence[tuple[EmbedJob, Sequence[Sequence[float]]]],
    ) -> int:
        """Write the vectors of documents whose content did not change meanwhile; only
        vector rows and the embed flags are touched."""

        def run(conn: Connection) -> int:
            stored = 0
            vec_index.ensure(conn, kb, model, dimensions)
            for job, vectors in done:
                current = document_rows.content_of(conn, kb, job.document_id)
                if current != (job.content_sha256, job.chunking):
                    continue  # edited, re-chunked or deleted meanwhile: embedded again
                ids = [cid for cid, _ in job.chunks]
                vec_index.delete(conn, kb, ids)
                vec_index.insert(conn, kb, list(zip(ids, vectors, strict=True)))
                document_rows.embedded(conn, kb, job.document_id)
                stored += 1
            return stored

        return await self.db.transact(run)

    async def embed_failed(
        self, kb: str, doc_ids: Sequence[str], error: str, retry_at: float
    ) -> None:
        await self.db.transact(
            lambda conn: document_rows.embed_failed(conn, kb, doc_ids, error, retry_at)
        )

    async def reset_vectors(
        self, kb: str, pending: bool, model: str | None = None, dims: int | None = None
    ) -> None:
        """Drop the KB's vectors (and make an empty table for `model` at `dims`); every
        document then owes new ones, or, with vectors off, none."""

        def run(conn: Connection) -> None:
            vec_index.drop(conn, kb)
            if model is not None and dims is not None:
                vec_index.ensure(conn, kb, model, dims)
            document_rows.owe_vectors(conn, kb, pending)

        await self.db.transact(run)
        await self.db.reclaim()

    async def retry_embeds_now(self, kb: str) -> None:
        await self.db.transact(lambda conn: document_rows.retry_embeds_now(conn, kb))

    async def vector_model(self, kb: str) -> tuple[str, int] | None:
        return await self.db.read(lambda conn: vec_index.recorded(conn, kb))

    async def vector_search(
        self,
        kb: str,
        vector: Sequence[float],
        top_k: int,
        filters: SearchFilters | None = None,
        min_similarity: float = -1.0,
        syntax: Query | None = None,
    ) -> list[Passage]:
        """The nearest chunks, as passages scored by cosine similarity; none below
        `min_similarity`. With `syntax`, only chunks that keyword search could return for
        it: holding its phrases word for word and nothing it excludes."""
        holds = syntax.holds_phrases if syntax and syntax.phrases else None

        def run(conn: Connection) -> list[Passage]:
            within = _within(conn, kb, filters, syntax)
            k = top_k * fts_text.PHRASE_CANDIDATES if holds else top_k
            hits = vec_index.search(conn, kb, vector, k, within)
            hits = [
                (chunk, distance) for chunk, distance in hits if 1.0 - distance >= min_similarity
            ]
            if not hits:
                return []
            rows = chunk_rows.with_documents(conn, "id", [chunk for chunk, _ in hits])
            texts = fts_index.texts(conn, kb, [r["seq"] for r in rows.values()])
            passages = [
                chunk_rows.passage(row, text, 1.0 - distance, fts_text.snippet(text))
                for chunk, distance in hits
                if (row := rows.get(chunk)) is not None and (text := texts.get(row["seq"]))
            ]
            if holds:  # the index stems: the phrases are checked word for word
                passages = [p for p in passages if holds(p.text)]
            return passages[:top_k]

        return await self.db.read(run)


def _within(
    conn: Connection, kb: str, filters: SearchFilters | None, syntax: Query | None
) -> tuple[str, list[Any]] | None:
    """A subquery (with its arguments) selecting the ids of the chunks a search may return:
    those the filters allow that FTS matches as keyword search does with the query's
    phrases and without what it excludes (in the text, the heading path or the title)."""
    if syntax is None or not syntax.constrains():
        return chunks_within(kb, filters, "id") if filters else None
    conditions: list[str] = []
    args: list[Any] = [KB_KIND, kb]
    if filters:
        subquery, more = chunks_within(kb, filters, "id")
        conditions.append(f"id IN ({subquery})")
        args += more
    if syntax.phrases:
        subquery, more = fts_index.matching(conn, kb, fts_text.all_of(syntax.phrases))
        conditions.append(f"seq IN ({subquery})")
        args += more
    if syntax.excluded:
        subquery, more = fts_index.matching(conn, kb, fts_text.match_expression(syntax.excluded))
        conditions.append(f"seq NOT IN ({subquery})")
        args += more
    where = " AND ".join(conditions)
    return f"SELECT id FROM chunks WHERE kind = ? AND resource_name = ? AND {where}", args
