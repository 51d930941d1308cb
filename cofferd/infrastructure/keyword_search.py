"""Keyword search, the KeywordSearch port: the query parsed (query_syntax) and put in FTS5's
terms (fts), BM25 over the KB's FTS table (keyword_index), the hits as passages
(chunk_rows) with their snippets (fts)."""

from __future__ import annotations

from typing import Any

from cofferd.domain.filters import SearchFilters
from cofferd.domain.models import Passage
from cofferd.domain.query_syntax import parse_query
from cofferd.infrastructure import chunk_rows, fts, keyword_index
from cofferd.infrastructure.database import Database
from cofferd.infrastructure.search_filter import chunks_within
from cofferd.infrastructure.sqlite import Connection


def _hits(
    conn: Connection, kb: str, match: str, top_k: int, within: tuple[str, list[Any]] | None
) -> list[Passage]:
    found = keyword_index.search(conn, kb, match, top_k, within)
    if not found:
        return []
    rows = chunk_rows.with_documents(conn, "seq", [h["seq"] for h in found])
    return [
        chunk_rows.passage(
            rows[h["seq"]],
            fts.display_text(h["text"]),
            float(h["score"]),
            fts.snippet(fts.display_text(h["snip"])),
        )
        for h in found
        if h["seq"] in rows
    ]


class SqliteKeywordSearch:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def keyword_search(
        self, kb: str, query: str, top_k: int, filters: SearchFilters | None = None
    ) -> list[Passage]:
        """BM25 over words; when nothing matches, the words are tried again as prefixes."""
        parsed = parse_query(query)
        match = fts.match(parsed)
        if match is None:
            return []
        within = chunks_within(kb, filters, "seq") if filters else None

        def run(conn: Connection) -> list[Passage]:
            if parsed.phrases:  # stemmed matches are checked word for word
                hits = _hits(conn, kb, match, top_k * fts.PHRASE_CANDIDATES, within)
                return [h for h in hits if parsed.holds_phrases(h.text)][:top_k]
            hits = _hits(conn, kb, match, top_k, within)
            if not hits:
                hits = _hits(conn, kb, fts.match(parsed, prefix=True) or match, top_k, within)
            return hits

        return await self.db.read(run)
