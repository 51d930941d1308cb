"""The knowledge bases in memory: read from their folders once at start, read again only
when a settings file changes, never per request. It also holds the one lock per KB that
every change to a KB's files or index runs under, and the model each KB's text chose (where
its settings name none), applied to every KB it holds."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import replace

from cofferd.domain.config import with_text_model
from cofferd.domain.models import KnowledgeBase
from cofferd.domain.ports import KBRepository

log = logging.getLogger(__name__)


class KBRegistry:
    def __init__(self, repo: KBRepository) -> None:
        self.repo = repo
        self._kbs: dict[str, KnowledgeBase] = {}
        self.refused: dict[str, str] = {}  # folder in knowledge/ -> why it is not a KB
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self.text_models: dict[str, str] = {}  # KB -> the bundled model its text chose

    async def load(self) -> None:
        """Read every KB folder (off the event loop)."""
        for kb in (await asyncio.to_thread(self._read_all)).values():
            self.put(kb)

    def _read_all(self) -> dict[str, KnowledgeBase]:
        self.refused = self.repo.refusals()
        found = {}
        for name in self.repo.names():
            kb = self.repo.load(name)
            if kb is not None:
                found[name] = kb
        return found

    async def reload(self, name: str) -> KnowledgeBase | None:
        """Read one KB's folder again (its settings changed, or it appeared or vanished)."""
        kb = await asyncio.to_thread(self.repo.load, name)
        why = await asyncio.to_thread(self.repo.refusal, name)
        if why is None:
            self.refused.pop(name, None)
        else:
            if self.refused.get(name) != why:
                log.warning("%s: not a knowledge base: %s", name, why)
            self.refused[name] = why
        if kb is None:
            self._kbs.pop(name, None)
        else:
            self.put(kb)
        return kb

    def get(self, name: str) -> KnowledgeBase | None:
        return self._kbs.get(name)

    def all(self) -> list[KnowledgeBase]:
        return [self._kbs[name] for name in sorted(self._kbs)]

    def put(self, kb: KnowledgeBase) -> None:
        """Remember a KB; a problem with its settings is logged when it first shows."""
        old = self._kbs.get(kb.name)
        if kb.settings_error and (old is None or old.settings_error != kb.settings_error):
            log.error("%s; using default settings until it is fixed", kb.settings_error)
        if kb.ignored_settings and (old is None or old.ignored_settings != kb.ignored_settings):
            log.warning(
                "%s: ignored %s in its folder: such settings are this machine's own; set "
                "them with `cofferctl kb set`",
                kb.name,
                ", ".join(kb.ignored_settings),
            )
        model = self.text_models.get(kb.name)
        if model is not None:
            kb = replace(kb, config=with_text_model(kb.config, model))
        self._kbs[kb.name] = kb

    def choose_model(self, name: str, model: str) -> KnowledgeBase | None:
        """`model` is the one `name`'s text chose: the KB as it is with it."""
        self.text_models[name] = model
        kb = self._kbs.get(name)
        if kb is not None:
            self.put(kb)
        return self._kbs.get(name)

    def drop(self, name: str) -> None:
        self._kbs.pop(name, None)
        self.text_models.pop(name, None)

    def lock(self, name: str) -> asyncio.Lock:
        """Held by whatever changes a KB's files or index: one change at a time per KB;
        different KBs run side by side."""
        return self._locks[name]
