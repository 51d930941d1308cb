"""Keyword search, the KeywordSearch port: the query parsed (query_syntax) and put in FTS5's
terms (fts), BM25 over the KB's FTS table (keyword_index), the hits as passages
(chunk_rows) with their snippets (fts).

FTS5 computes bm25 for every row a query matches before it can sort them (~1 µs a row),
so a query of common words over a large KB would rank most of it. Words are OR-ed, and
a query whose words match more than SCORED_MAX rows in all is ranked over a bounded set
of candidates instead: the documents that hold its rarest words (up to SCORED_MAX rows),
each scored for the whole query; or, when every word is that common, the documents that
hold all of them. What only the common words would have found is left out: bm25 gives
common words little weight. docs/benchmarks.md measures both the time and
the quality on SciFact, CMRC 2018 and JSQuAD.
"""

from __future__ import annotations

from typing import Any

from cofferd.domain.filters import SearchFilters
from cofferd.domain.models import Passage
from cofferd.domain.query_syntax import parse_query
from cofferd.infrastructure import chunk_rows, fts, keyword_index
from cofferd.infrastructure.database import Database
from cofferd.infrastructure.search_filter import chunks_within
from cofferd.infrastructure.sqlite import Connection

SCORED_MAX = 8_000
Within = tuple[str, list[Any]] | None


def _ranked(conn: Connection, kb: str, terms: list[list[str]], top_k: int, within: Within) -> Any:
    """The best rows for the terms OR-ed, ranking at most about SCORED_MAX of them when
    that still fills `top_k` (see above)."""
    every = fts.match_expression(terms)
    if len(terms) > 1:
        counts = [keyword_index.count(conn, kb, fts.match_expression([t])) for t in terms]
        if sum(counts) > SCORED_MAX:
            found = _candidates_ranked(conn, kb, terms, counts, top_k, within)
            if len(found) >= top_k:
                return found
    return keyword_index.search(conn, kb, every, top_k, within)


def _candidates_ranked(
    conn: Connection,
    kb: str,
    terms: list[list[str]],
    counts: list[int],
    top_k: int,
    within: Within,
) -> list[Any]:
    order = sorted(range(len(terms)), key=counts.__getitem__)
    if counts[order[0]] > SCORED_MAX:  # every word common: the rows holding them all
        return list(keyword_index.search(conn, kb, fts.all_of(terms), top_k, within))
    rare, scored = [terms[order[0]]], counts[order[0]]
    for index in order[1:]:
        scored += counts[index]
        if scored > SCORED_MAX:
            break
        rare.append(terms[index])
    common = [terms[i] for i in order[len(rare) :]]
    either = fts.match_expression(rare)
    # each term once in each expression: bm25 sums the terms' parts, so rows holding a rare
    # and a common word get their whole score from the first, the others from the second
    both = f"({either}) AND ({fts.match_expression(common)})"
    best = {row["seq"]: row for row in keyword_index.search(conn, kb, either, top_k, within)}
    best |= {row["seq"]: row for row in keyword_index.search(conn, kb, both, top_k, within)}
    return sorted(best.values(), key=lambda row: (-row["score"], row["seq"]))[:top_k]


def _passages(conn: Connection, found: Any) -> list[Passage]:
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
                found = keyword_index.search(conn, kb, match, top_k * fts.PHRASE_CANDIDATES, within)
                return [h for h in _passages(conn, found) if parsed.holds_phrases(h.text)][:top_k]
            if parsed.excluded:
                hits = _passages(conn, keyword_index.search(conn, kb, match, top_k, within))
            else:
                hits = _passages(conn, _ranked(conn, kb, parsed.words, top_k, within))
            if not hits:
                prefixed = fts.match(parsed, prefix=True) or match
                hits = _passages(conn, keyword_index.search(conn, kb, prefixed, top_k, within))
            return hits

        return await self.db.read(run)
