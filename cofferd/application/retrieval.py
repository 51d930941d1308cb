"""The retrieval facade: one query, one answer; the mode is decided here, never by callers."""

from __future__ import annotations

from cofferd.application.knowledge_bases import KnowledgeBases
from cofferd.domain.errors import ValidationFailed
from cofferd.domain.models import GrepHit, GrepResult, SearchResult
from cofferd.domain.ports import Grepper, IndexStore

TOP_K_DEFAULT = 10
TOP_K_MAX = 100
QUERY_MAX_CHARS = 2000
MAX_MATCHES_DEFAULT = 100
MAX_MATCHES_MAX = 10_000


class Retrieval:
    def __init__(self, kbs: KnowledgeBases, store: IndexStore, grepper: Grepper) -> None:
        self.kbs = kbs
        self.store = store
        self.grepper = grepper

    async def grep(
        self,
        kb_name: str,
        pattern: str,
        max_matches: int = MAX_MATCHES_DEFAULT,
        ignore_case: bool = False,
    ) -> GrepResult:
        kb = self.kbs.get_enabled(kb_name)
        if not isinstance(pattern, str) or not pattern:
            raise ValidationFailed("pattern must not be empty", field="pattern")
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
        ids = await self.store.document_ids(kb.name, [h.path for h in raw])
        hits = [GrepHit(ids.get(h.path), h.path, h.line_number, h.line) for h in raw]
        return GrepResult(hits=hits, truncated=truncated)

    async def search(self, kb_name: str, query: str, top_k: int = TOP_K_DEFAULT) -> SearchResult:
        kb = self.kbs.get_enabled(kb_name)
        if not isinstance(query, str) or not query.strip():
            raise ValidationFailed("query must not be empty", field="query")
        if len(query) > QUERY_MAX_CHARS:
            raise ValidationFailed(
                f"query is longer than {QUERY_MAX_CHARS} characters", field="query"
            )
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= TOP_K_MAX:
            raise ValidationFailed(f"top_k must be between 1 and {TOP_K_MAX}", field="top_k")
        passages = await self.store.keyword_search(kb.name, query, top_k)
        return SearchResult(mode="keyword", passages=passages)
