"""Keyword search, the KeywordSearch port: the query as parsed (query_syntax) put in FTS5's
terms (fts_text), BM25 over the KB's FTS table (fts_index), the hits as passages
(chunk_rows) with their snippets (fts_text).

FTS5 computes bm25 for every row a query matches before it can sort them (~1 µs a row),
so a query of common words over a large KB would rank most of it. Two things bound that:

* Words are OR-ed, and a query whose words match more than SCORED_MAX rows in all is
  ranked over a bounded set of candidates instead: the documents that hold its rarest
  words (up to SCORED_MAX rows), each scored for the whole query; or, when every word is
  that common, the documents that hold all of them. What only the common words would have
  found is left out: bm25 gives common words little weight.
* A ranking over more than SPLIT_MIN rows is split between the database's readers, each
  ranking the rows whose rowid falls to it (modulo), and the best of each are merged:
  bm25 scores a row the same in either part, so the answer is the same. Hybrid search
  reads its vector list beside the keyword list, so there the ranking keeps to one.

docs/benchmarks.md measures the time, and the quality on SciFact, CMRC 2018 and JSQuAD.
"""

from __future__ import annotations

import asyncio
import heapq
from functools import partial
from typing import Any

from cofferd.domain.filters import SearchFilters
from cofferd.domain.models import Passage
from cofferd.domain.query_syntax import Query
from cofferd.infrastructure.storage import chunk_rows, fts_index, fts_text
from cofferd.infrastructure.storage.database import READERS, Database
from cofferd.infrastructure.storage.filter_sql import chunks_within
from cofferd.infrastructure.storage.sqlite import Connection

SCORED_MAX = 8_000
SPLIT_MIN = 4_000
Within = tuple[str, list[Any]] | None
Ranked = list[tuple[int, float]]  # (seq, score), best first


def _passages(conn: Connection, kb: str, match: str, found: Ranked) -> list[Passage]:
    if not found:
        return []
    seqs = [seq for seq, _ in found]
    rows = chunk_rows.with_documents(conn, "seq", seqs)
    shown = fts_index.marked(conn, kb, match, seqs)
    return [
        chunk_rows.passage(
            rows[seq],
            fts_text.display_text(shown[seq][0]),
            score,
            fts_text.snippet(fts_text.display_text(shown[seq][1])),
        )
        for seq, score in found
        if seq in rows and seq in shown
    ]


def _best(lists: list[Ranked], top_k: int) -> Ranked:
    scores = {seq: score for found in lists for seq, score in found}
    return heapq.nsmallest(top_k, scores.items(), lambda r: (-r[1], r[0]))


def _counts(conn: Connection, kb: str, terms: list[list[str]]) -> list[int]:
    return [fts_index.count(conn, kb, fts_text.match_expression([t])) for t in terms]


class SqliteKeywordSearch:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def keyword_search(
        self,
        kb: str,
        query: Query,
        top_k: int,
        filters: SearchFilters | None = None,
        *,
        beside: bool = False,
    ) -> list[Passage]:
        """BM25 over words; when nothing matches, the words are tried again as prefixes."""
        return await _Search(self.db, kb, 1 if beside else READERS).run(query, top_k, filters)


class _Search:
    """One keyword search, ranking on up to `readers` readers at once."""

    def __init__(self, db: Database, kb: str, readers: int) -> None:
        self.db = db
        self.kb = kb
        self.readers = readers

    async def run(self, parsed: Query, top_k: int, filters: SearchFilters | None) -> list[Passage]:
        match = fts_text.match(parsed)
        if match is None:
            return []
        within = chunks_within(self.kb, filters, "seq") if filters else None
        if parsed.phrases:  # stemmed matches are checked word for word
            wider = top_k * fts_text.PHRASE_CANDIDATES
            found = await self._rank(match, wider, within)
            hits = await self._passages(match, found)
            return [h for h in hits if parsed.holds_phrases(h.text)][:top_k]
        if parsed.excluded:
            found = await self._rank(match, top_k, within)
        else:
            found = await self._words(parsed.words, top_k, within)
        if not found:
            match = fts_text.match(parsed, prefix=True) or match
            found = await self._rank(match, top_k, within)
        return await self._passages(match, found)

    async def _passages(self, match: str, found: Ranked) -> list[Passage]:
        return await self.db.read(lambda conn: _passages(conn, self.kb, match, found))

    async def _rank(
        self, match: str, top_k: int, within: Within, rows: int | None = None
    ) -> Ranked:
        """The best rows `match` matches; `rows` is how many it matches at most (counted
        when not given)."""
        if rows is None:
            rows = await self.db.read(lambda conn: fts_index.count(conn, self.kb, match))
        parts = self.readers if rows > SPLIT_MIN else 1
        rank = partial(fts_index.ranked, kb=self.kb, match=match, top_k=top_k, within=within)
        lists = await asyncio.gather(
            *(self.db.read(partial(rank, part=(i, parts))) for i in range(parts))
        )
        return _best(lists, top_k)

    async def _words(self, terms: list[list[str]], top_k: int, within: Within) -> Ranked:
        """The best rows for the terms OR-ed, ranking at most about SCORED_MAX of them when
        that still fills `top_k` (see above)."""
        counts = await self.db.read(lambda conn: _counts(conn, self.kb, terms))
        if len(terms) > 1 and sum(counts) > SCORED_MAX:
            found = await self._candidates(terms, counts, top_k, within)
            if len(found) >= top_k:
                return found
        return await self._rank(fts_text.match_expression(terms), top_k, within, sum(counts))

    async def _candidates(
        self, terms: list[list[str]], counts: list[int], top_k: int, within: Within
    ) -> Ranked:
        order = sorted(range(len(terms)), key=counts.__getitem__)
        if counts[order[0]] > SCORED_MAX:  # every word common: the rows holding them all
            return await self._rank(fts_text.all_of(terms), top_k, within, counts[order[0]])
        rare, scored = [terms[order[0]]], counts[order[0]]
        for index in order[1:]:
            if scored + counts[index] > SCORED_MAX:
                break
            scored += counts[index]
            rare.append(terms[index])
        common = [terms[i] for i in order[len(rare) :]]
        either = fts_text.match_expression(rare)
        # each term once in each expression: bm25 sums the terms' parts, so rows holding a rare
        # and a common word get their whole score from the first, the others from the second
        both = f"({either}) AND ({fts_text.match_expression(common)})"
        ranks = (partial(self._rank, m, top_k, within, scored) for m in (either, both))
        if self.readers > 1:
            lists = list(await asyncio.gather(*(rank() for rank in ranks)))
        else:
            lists = [await rank() for rank in ranks]
        return _best(lists, top_k)
