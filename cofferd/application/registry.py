"""The knowledge bases in memory: read from their folders once at start, read again only
when a settings file changes, never per request. It also holds the one lock per KB that
every change to a KB's files or index runs under."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from cofferd.domain.models import KnowledgeBase
from cofferd.domain.ports import KBRepository


class KBRegistry:
    def __init__(self, repo: KBRepository) -> None:
        self.repo = repo
        self._kbs: dict[str, KnowledgeBase] = {}
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def load(self) -> None:
        """Read every KB folder (off the event loop)."""
        self._kbs = await asyncio.to_thread(self._read_all)

    def _read_all(self) -> dict[str, KnowledgeBase]:
        found = {}
        for name in self.repo.names():
            kb = self.repo.load(name)
            if kb is not None:
                found[name] = kb
        return found

    async def reload(self, name: str) -> KnowledgeBase | None:
        """Read one KB's folder again (its settings changed, or it appeared or vanished)."""
        kb = await asyncio.to_thread(self.repo.load, name)
        if kb is None:
            self._kbs.pop(name, None)
        else:
            self._kbs[name] = kb
        return kb

    def get(self, name: str) -> KnowledgeBase | None:
        return self._kbs.get(name)

    def all(self) -> list[KnowledgeBase]:
        return [self._kbs[name] for name in sorted(self._kbs)]

    def put(self, kb: KnowledgeBase) -> None:
        self._kbs[kb.name] = kb

    def drop(self, name: str) -> None:
        self._kbs.pop(name, None)

    def lock(self, name: str) -> asyncio.Lock:
        """Held by whatever changes a KB's files or index: one change at a time per KB;
        different KBs run side by side."""
        return self._locks[name]
