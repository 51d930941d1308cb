"""The retrieval facade: one query, one answer; the mode is decided here, never by callers.

Hybrid combines the keyword and vector lists by their scores (`fusion.blend`); several KBs
at once are merged by reciprocal rank fusion (K = 60). A model that
cannot read every word of the query (`ModelCoverage`: MiniLM reads Latin script, the
multilingual e5 about 100 languages) gets no vote: fused with such a model, results on
Chinese fell from 0.82 to 0.53 nDCG@10 when measured.
A chunk only the model found must be similar enough to the query (the model's floor), or
a query about nothing in the knowledge base would always get the nearest chunks; a query
with no letter or digit (`#`, `"`, an emoji) is not embedded at all.

The query syntax holds in every mode: the model embeds the query without its operators,
and the chunks it may return are those keyword search could (holding every quoted phrase
word for word, none of what `-` excludes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import replace

from coffer_kernel.bounds import MAX_MATCHES_MAX, TOP_K_MAX
from cofferd.application.documents.documents import places
from cofferd.application.indexing.conversion_queue import Pages
from cofferd.application.indexing.embeddings import Embeddings
from cofferd.application.indexing.knowledge_bases import KnowledgeBases
from cofferd.application.search import fusion
from cofferd.domain.errors import InvalidPattern, ModeDisabled, ValidationFailed
from cofferd.domain.filters import SearchFilters
from cofferd.domain.formats import PAGED_FORMATS, format_of
from cofferd.domain.models import GrepHit, GrepResult, KnowledgeBase, Passage, SearchResult
from cofferd.domain.pages import PageStart, page_in_passage
from cofferd.domain.ports import DocsTree, DocumentCatalog, Grepper, KeywordSearch, VectorStore
from cofferd.domain.query_syntax import Query, parse_query

log = logging.getLogger(__name__)

TOP_K_DEFAULT = 10
QUERY_MAX_CHARS = 2000
MAX_MATCHES_DEFAULT = 100
RRF_K = 60  # merging several KBs' answers
LATIN_END = 0x24F  # letters above Latin Extended-B are another script...
GREEK = range(0x370, 0x400)  # ...except Greek, which science writes in English (TNF-alpha)


def checked_query(query: str, top_k: int) -> Query:
    """The query parsed, the one time a search parses it, once it and `top_k` are valid."""
    if not isinstance(query, str) or not query.strip():
        raise ValidationFailed("query must not be empty", field="query")
    if len(query) > QUERY_MAX_CHARS:
        raise ValidationFailed(f"query is longer than {QUERY_MAX_CHARS} characters", field="query")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= TOP_K_MAX:
        raise ValidationFailed(f"top_k must be between 1 and {TOP_K_MAX}", field="top_k")
    return parse_query(query)


def require_mode(kb: KnowledgeBase, mode: str) -> None:
    """The one check of a KB's enabled_modes: a mode not in it answers MODE_DISABLED."""
    if mode not in kb.config.enabled_modes:
        raise ModeDisabled(kb.name, mode, list(kb.config.enabled_modes))


def search_mode(kb: KnowledgeBase, asked: str | None = None) -> str:
    """The mode a search of `kb` runs in: the one asked for, else the KB's default (grep is
    not a search mode: keyword stands in)."""
    mode = asked or kb.config.default_mode
    return "keyword" if mode == "grep" else mode


def beyond_latin(text: str) -> bool:
    return any(ch.isalpha() and ord(ch) > LATIN_END and ord(ch) not in GREEK for ch in text)


def has_words(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def fuse(lists: list[tuple[float, list[Passage]]], top_k: int) -> list[Passage]:
    """Weighted reciprocal rank fusion, one entry per (document, position)."""
    scores: dict[tuple[str, str, int], float] = {}
    first: dict[tuple[str, str, int], Passage] = {}
    for weight, passages in lists:
        for rank, passage in enumerate(passages):
            key = (passage.knowledge_base, passage.document_id, passage.position)
            scores[key] = scores.get(key, 0.0) + weight / (RRF_K + rank + 1)
            first.setdefault(key, passage)
    # equal ranks (the best of two KBs) are ordered by their own scores
    ranked = sorted(scores, key=lambda key: (scores[key], first[key].score), reverse=True)
    ranked = ranked[:top_k]
    return [replace(first[key], score=scores[key]) for key in ranked]


def _on_page(passage: Passage, start: PageStart | None) -> Passage:
    if start is None:
        return passage
    return replace(passage, page=start.ordinal, location=start.location)


class Retrieval:
    def __init__(
        self,
        kbs: KnowledgeBases,
        catalog: DocumentCatalog,
        keywords: KeywordSearch,
        vectors: VectorStore,
        grepper: Grepper,
        embeddings: Embeddings,
        tree: DocsTree,
        pages: Pages | None = None,
    ) -> None:
        self.tree = tree
        self.pages = pages
        self.kbs = kbs
        self.catalog = catalog
        self.keywords = keywords
        self.vectors = vectors
        self.grepper = grepper
        self.embeddings = embeddings

    async def grep(
        self,
        kb_name: str,
        pattern: str,
        max_matches: int = MAX_MATCHES_DEFAULT,
        ignore_case: bool = False,
    ) -> GrepResult:
        kb = self.kbs.get_enabled(kb_name)
        require_mode(kb, "grep")
        if not isinstance(pattern, str) or not pattern:
            raise ValidationFailed("pattern must not be empty", field="pattern")
        if "\0" in pattern:
            raise InvalidPattern("a pattern cannot hold a NUL character", field="pattern")
        if len(pattern) > QUERY_MAX_CHARS:
            raise ValidationFailed(
                f"pattern is longer than {QUERY_MAX_CHARS} characters", field="pattern"
            )
        if (
            isinstance(max_matches, bool)
            or not isinstance(max_matches, int)
            or not 1 <= max_matches <= MAX_MATCHES_MAX
        ):
            raise ValidationFailed(
                f"max_matches must be between 1 and {MAX_MATCHES_MAX}", field="max_matches"
            )
        raw, truncated = await self.grepper.grep(kb.name, pattern, max_matches, ignore_case)
        ids = await self.catalog.document_ids(kb.name, [h.path for h in raw])
        where = await places(self.tree, kb.name, [h.path for h in raw])
        hits = [
            GrepHit(
                ids.get(h.path), h.path, h.line_number, h.line, where[h.path], h.page, h.location
            )
            for h in raw
        ]
        return GrepResult(hits=hits, truncated=truncated)

    async def search_all(
        self,
        query: str,
        top_k: int = TOP_K_DEFAULT,
        kb_names: Sequence[str] | None = None,
        filters: SearchFilters | None = None,
        mode: str | None = None,
    ) -> tuple[list[Passage], dict[str, SearchResult]]:
        """Several KBs at once (every enabled one that can be searched in `mode`, else in
        its own, when none are named), merged by rank fusion, since scores of different
        KBs and modes do not compare. Returns the merged passages and each KB's own
        answer."""
        names = (
            list(dict.fromkeys(kb_names))
            if kb_names
            else [  # every KB that can be searched; one named is refused if it cannot
                kb.name
                for kb in self.kbs.list()
                if kb.enabled and search_mode(kb, mode) in kb.config.enabled_modes
            ]
        )
        for name in names:
            require_mode(self.kbs.get_enabled(name), search_mode(self.kbs.get(name), mode))
        syntax = checked_query(query, top_k)  # refused the same with no KB to search
        if not names:
            return [], {}
        answers = await asyncio.gather(
            *(self._answer(name, syntax, top_k, filters, mode) for name in names)
        )
        per_kb = dict(zip(names, answers, strict=True))
        merged = fuse([(1.0, list(a.passages)) for a in answers], top_k)
        return merged, per_kb

    async def search(
        self,
        kb_name: str,
        query: str,
        top_k: int = TOP_K_DEFAULT,
        filters: SearchFilters | None = None,
        mode: str | None = None,
    ) -> SearchResult:
        """`kb_name` searched in `mode` (one of its enabled modes), else in its default."""
        self.kbs.get_enabled(kb_name)  # an unknown KB is said before a bad query
        return await self._answer(kb_name, checked_query(query, top_k), top_k, filters, mode)

    async def _answer(
        self,
        kb_name: str,
        syntax: Query,
        top_k: int,
        filters: SearchFilters | None,
        mode: str | None = None,
    ) -> SearchResult:
        """One KB's answer to a query checked and parsed (once, however many KBs)."""
        result = await self._search(kb_name, syntax, top_k, filters or None, mode)
        where = await places(self.tree, kb_name, [p.path for p in result.passages])
        pages = await self._pages(kb_name, result.passages)
        passages = [
            _on_page(replace(p, knowledge_base=kb_name, file=where[p.path]), page)
            for p, page in zip(result.passages, pages, strict=True)
        ]
        return replace(result, passages=passages, query_cut=syntax.cut)

    async def _pages(self, kb: str, passages: Sequence[Passage]) -> list[PageStart | None]:
        """The page (slide, sheet) of each passage's match in a PDF (slide deck, workbook);
        None for other passages."""
        paged = {p.document_id for p in passages if format_of(p.path) in PAGED_FORMATS}
        if not paged or self.pages is None:
            return [None] * len(passages)
        pages = self.pages
        digests = {}
        for doc_id in paged:
            found = [d for d in await self.catalog.find_documents(kb, doc_id) if d.id == doc_id]
            if found:
                digests[doc_id] = found[0].content_sha256

        def look() -> list[PageStart | None]:
            return [
                page_in_passage(
                    pages.starts(kb, digests[p.document_id]),
                    p.text,
                    p.match_at,
                    p.line_start,
                    p.line_end,
                )
                if p.document_id in digests
                else None
                for p in passages
            ]

        return await asyncio.to_thread(look)

    async def _search(
        self,
        kb_name: str,
        syntax: Query,
        top_k: int,
        filters: SearchFilters | None,
        asked: str | None = None,
    ) -> SearchResult:
        kb = self.kbs.get_enabled(kb_name)
        mode = search_mode(kb, asked)
        require_mode(kb, mode)
        fallback = None
        if mode in ("vector", "hybrid"):
            if not kb.config.vector_enabled:
                fallback = "no_provider"  # vectors asked for, no provider chosen here
            elif not await self.embeddings.available():
                fallback = "vectors_unavailable"
            else:
                return await self._with_vectors(kb, syntax, top_k, filters, mode == "hybrid")
        return await self._keyword(kb, syntax, top_k, filters, fallback)

    async def _keyword(
        self,
        kb: KnowledgeBase,
        syntax: Query,
        top_k: int,
        filters: SearchFilters | None,
        fallback: str | None = None,
    ) -> SearchResult:
        passages = await self.keywords.keyword_search(kb.name, syntax, top_k, filters)
        return SearchResult(mode="keyword", passages=passages, fallback=fallback)

    async def _with_vectors(
        self,
        kb: KnowledgeBase,
        syntax: Query,
        top_k: int,
        filters: SearchFilters | None,
        hybrid: bool,
    ) -> SearchResult:
        embedding = kb.config.embedding
        assert embedding is not None
        current = (embedding.identity(), embedding.dimensions)
        if await self.vectors.vector_model(kb.name) != current:  # a model switch under way
            return await self._keyword(kb, syntax, top_k, filters, "vectors_pending")
        # the model reads the query without its operators (`meaning`); what they say is
        # applied to the chunks it may return, as keyword search applies it
        if hybrid and not embedding.coverage().reads_all(syntax.meaning):
            return await self._keyword(kb, syntax, top_k, filters, "language_not_covered")
        floor = embedding.similarity_floor()
        if not has_words(syntax.meaning):  # nothing a model could mean: only keywords match
            found = await self._keyword(kb, syntax, top_k, filters)
            return replace(found, mode="hybrid" if hybrid else "vector")
        if not hybrid:
            vector = await self.embeddings.embed_query(kb, syntax.meaning)
            if vector is None:
                return await self._keyword(kb, syntax, top_k, filters, "embedder_unavailable")
            passages = await self.vectors.vector_search(
                kb.name, vector, top_k, filters, floor, syntax
            )
            return SearchResult(mode="vector", passages=passages)
        # the keyword list is read while the query is embedded
        keyword_task = asyncio.ensure_future(
            self.keywords.keyword_search(
                kb.name, syntax, max(top_k, fusion.KEYWORD_CANDIDATES), filters, beside=True
            )
        )
        try:
            vector = await self.embeddings.embed_query(kb, syntax.meaning)
        except BaseException:
            keyword_task.cancel()
            raise
        if vector is None:
            keyword = await keyword_task
            return SearchResult(
                mode="keyword", passages=keyword[:top_k], fallback="embedder_unavailable"
            )
        # and the vector list beside it, on another reader (the scan is the longest part)
        keyword, semantic = await asyncio.gather(
            keyword_task,
            self.vectors.vector_search(
                kb.name, vector, max(top_k, fusion.VECTOR_CANDIDATES), filters, syntax=syntax
            ),
        )
        # fused as found, then a chunk only the model found is dropped if it is not similar
        # enough (dropping it before fusion would move the others up: measured worse)
        matched = {(p.document_id, p.position) for p in keyword}
        weak = {
            (p.document_id, p.position)
            for p in semantic
            if p.score < floor and (p.document_id, p.position) not in matched
        }
        fused = fusion.blend(keyword, semantic, top_k + len(weak))
        passages = [p for p in fused if (p.document_id, p.position) not in weak][:top_k]
        return SearchResult(mode="hybrid", passages=passages)
