"""The retrieval facade: one query, one answer; the mode is decided here, never by callers."""

from __future__ import annotations

from cofferd.application.knowledge_bases import KnowledgeBases
from cofferd.domain.errors import ValidationFailed
from cofferd.domain.models import SearchResult
from cofferd.domain.ports import IndexStore

TOP_K_DEFAULT = 10
TOP_K_MAX = 100
QUERY_MAX_CHARS = 2000


class Retrieval:
    def __init__(self, kbs: KnowledgeBases, store: IndexStore) -> None:
        self.kbs = kbs
        self.store = store

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
