"""Vectors of chunks and the state of the embedding queue: the VectorStore port over SQLite.

The vector rows themselves are vec_index's; this module decides which documents owe
vectors, stores them only for the chunking they were computed from, and answers KNN
queries with passages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from cofferd.domain.filters import SearchFilters
from cofferd.domain.models import KB_KIND, Passage
from cofferd.domain.ports import EmbedJob
from cofferd.infrastructure import keyword_index, vec_index
from cofferd.infrastructure.database import Database
from cofferd.infrastructure.document_store import SCOPE, chunk_rows, passage_from_row
from cofferd.infrastructure.search_filter import chunks_within
from cofferd.infrastructure.sqlite import Connection

SNIPPET_CHARS = 300


def embedding_text(heading: list[str], text: str) -> str:
    """A chunk as it is embedded: its heading path for context, without repeating the
    heading the chunk itself starts with."""
    first_line = text.lstrip().split("\n", 1)[0]
    if heading and first_line.lstrip("#").strip() == heading[-1]:
        heading = heading[:-1]
    return " / ".join(heading) + "\n\n" + text if heading else text


class SqliteVectors:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def vectors_available(self) -> bool:
        return await self.db.read(vec_index.available)

    async def pending_embeds(self, kb: str, limit: int, now: float) -> list[EmbedJob]:
        """Documents that owe vectors and are due, with their chunks' text."""

        def run(conn: Connection) -> list[EmbedJob]:
            docs = conn.execute(
                f"SELECT id, content_sha256, chunking FROM documents WHERE {SCOPE}"
                " AND embed_pending = 1 AND embed_retry_at <= ? ORDER BY embed_retry_at, id"
                " LIMIT ?",
                (KB_KIND, kb, now, limit),
            ).fetchall()
            jobs = []
            for doc_id, sha, chunking in docs:
                chunks = conn.execute(
                    f"SELECT seq, id, heading FROM chunks WHERE {SCOPE} AND document_id = ?"
                    " ORDER BY position",
                    (KB_KIND, kb, doc_id),
                ).fetchall()
                texts = keyword_index.texts(conn, kb, [c[0] for c in chunks])
                pieces = [
                    (cid, embedding_text(json.loads(heading), texts[seq]))
                    for seq, cid, heading in chunks
                    if seq in texts
                ]
                jobs.append(EmbedJob(doc_id, sha, chunking, pieces))
            return jobs

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
                current = conn.execute(
                    f"SELECT content_sha256, chunking FROM documents WHERE {SCOPE} AND id = ?",
                    (KB_KIND, kb, job.document_id),
                ).fetchone()
                if current is None or tuple(current) != (job.content_sha256, job.chunking):
                    continue  # edited, re-chunked or deleted meanwhile: embedded again
                ids = [cid for cid, _ in job.chunks]
                vec_index.delete(conn, kb, ids)
                vec_index.insert(conn, kb, list(zip(ids, vectors, strict=True)))
                conn.execute(
                    "UPDATE documents SET embed_pending = 0, embed_error = NULL,"
                    f" embed_retry_at = 0 WHERE {SCOPE} AND id = ?",
                    (KB_KIND, kb, job.document_id),
                )
                stored += 1
            return stored

        return await self.db.transact(run)

    async def embed_failed(
        self, kb: str, doc_ids: Sequence[str], error: str, retry_at: float
    ) -> None:
        await self.db.transact(
            lambda conn: conn.executemany(
                f"UPDATE documents SET embed_error = ?, embed_retry_at = ? WHERE {SCOPE}"
                " AND id = ?",
                [(error[:500], retry_at, KB_KIND, kb, d) for d in doc_ids],
            )
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
            conn.execute(
                "UPDATE documents SET embed_pending = ?, embed_error = NULL,"
                f" embed_retry_at = 0 WHERE {SCOPE}",
                (int(pending), KB_KIND, kb),
            )

        await self.db.transact(run)

    async def retry_embeds_now(self, kb: str) -> None:
        await self.db.transact(
            lambda conn: conn.execute(
                f"UPDATE documents SET embed_retry_at = 0 WHERE {SCOPE}"
                " AND embed_pending = 1 AND embed_retry_at > 0",
                (KB_KIND, kb),
            )
        )

    async def vector_model(self, kb: str) -> tuple[str, int] | None:
        return await self.db.read(lambda conn: vec_index.recorded(conn, kb))

    async def vector_search(
        self,
        kb: str,
        vector: Sequence[float],
        top_k: int,
        filters: SearchFilters | None = None,
        min_similarity: float = -1.0,
    ) -> list[Passage]:
        """The nearest chunks, as passages scored by cosine similarity; none below
        `min_similarity`."""
        within = chunks_within(kb, filters, "id") if filters else None

        def run(conn: Connection) -> list[Passage]:
            hits = vec_index.search(conn, kb, vector, top_k, within)
            hits = [
                (chunk, distance) for chunk, distance in hits if 1.0 - distance >= min_similarity
            ]
            if not hits:
                return []
            rows = chunk_rows(conn, "id", [chunk for chunk, _ in hits])
            texts = keyword_index.texts(conn, kb, [r["seq"] for r in rows.values()])
            return [
                passage_from_row(row, text, 1.0 - distance, text[:SNIPPET_CHARS])
                for chunk, distance in hits
                if (row := rows.get(chunk)) is not None and (text := texts.get(row["seq"]))
            ]

        return await self.db.read(run)
