"""Which bundled model embeds a knowledge base whose settings name none: the one its text
calls for (domain.model_by_text), measured over a sample of its chunks, and measured again
only when the KB has grown or shrunk a lot. The choice is a default: it is never written to
its settings, a model the user names always wins, and a switch embeds the KB again as a
switch by `kb set` does (the embedding queue follows the model in use).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from cofferd.application.indexing.knowledge_bases import KnowledgeBases
from cofferd.domain.config import BUNDLED_MODELS, LOCAL_DEFAULT_MODEL, with_text_model
from cofferd.domain.model_by_text import (
    DECIDING_WORDS,
    TextShares,
    measure,
    model_for_text,
    reads_line,
    why,
)
from cofferd.domain.models import KnowledgeBase
from cofferd.domain.ports import VectorStore

log = logging.getLogger(__name__)

SAMPLE_CHUNKS = 300  # chunks read to choose (at random: a KB's share, not its first notes')
RECHECK_S = 5.0  # how often a KB's size is looked at, once its text has chosen
CHANGED_A_LOT = 0.25  # a KB this much larger or smaller (in chunks) is measured again


@dataclass
class Measured:
    chunks: int  # the KB's chunks when it was measured
    shares: TextShares
    looked_at: float  # monotonic: when its size was last looked at


class ModelChoice:
    def __init__(self, kbs: KnowledgeBases, store: VectorStore) -> None:
        self.kbs = kbs
        self.store = store
        self._measured: dict[str, Measured] = {}

    async def follow(self, kb: KnowledgeBase, *, now: bool = False) -> KnowledgeBase:
        """`kb` with the model its text calls for, measured first if it was never, if it
        changed a lot since, or (`now`) if it changed at all (its settings did)."""
        kb = self.kbs.registry.get(kb.name) or kb  # as the registry holds it: with its model
        embedding = kb.config.embedding
        if not kb.config.vector_enabled or embedding is None or not embedding.text_chooses_model():
            self._measured.pop(kb.name, None)
            return kb
        last = self._measured.get(kb.name)
        clock = time.monotonic()
        deciding = last is None or last.shares.words < DECIDING_WORDS
        if last is not None and not (now or deciding) and clock - last.looked_at < RECHECK_S:
            return kb
        chunks = (await self.kbs.counts(kb.name))["chunks"]
        if last is not None and not _changed_a_lot(last.chunks, chunks, now):
            last.looked_at = clock
            return kb
        sample = await self.store.text_sample(kb.name, SAMPLE_CHUNKS)
        shares = await asyncio.to_thread(measure, sample)
        self._measured[kb.name] = Measured(chunks, shares, clock)
        current = self.kbs.registry.text_models.get(kb.name) or await self._embedded_with(kb)
        chosen = model_for_text(shares, current)
        if chosen != embedding.model:
            log.info("%s: %s: embedding it with %s", kb.name, why(shares, chosen), chosen)
        if chosen == self.kbs.registry.text_models.get(kb.name):
            return kb
        return self.kbs.registry.choose_model(kb.name, chosen) or kb

    async def restore(self) -> None:
        """At start: a KB whose text chose its model is on the one its vectors are from
        until it is measured again (a query meanwhile is embedded as they were)."""
        for kb in self.kbs.list():
            embedding = kb.config.embedding
            if kb.config.vector_enabled and embedding and embedding.text_chooses_model():
                model = await self._embedded_with(kb)
                if model != embedding.model:
                    self.kbs.registry.choose_model(kb.name, model)

    async def _embedded_with(self, kb: KnowledgeBase) -> str:
        """The bundled model the KB's vectors are from (the daemon restarted), else MiniLM."""
        recorded = await self.store.vector_model(kb.name)
        for model in BUNDLED_MODELS:
            embedding = with_text_model(kb.config, model).embedding
            if embedding is not None and recorded == (embedding.identity(), embedding.dimensions):
                return model
        return LOCAL_DEFAULT_MODEL

    def describe(self, kb: KnowledgeBase) -> dict[str, Any] | None:
        """How the KB's embedding model was chosen (None without vectors): by the user, by
        its text (why, and what share of its words each bundled model reads), or the
        default while there is too little text to choose by."""
        embedding = kb.config.embedding
        if not kb.config.vector_enabled or embedding is None:
            return None
        found: dict[str, Any] = {
            "model": embedding.model,
            "chosen_by": "user",
            "why": None,
            "reads": None,
            "reads_said": None,
            "words_sampled": 0,
        }
        measured = self._measured.get(kb.name)
        if not embedding.text_chooses_model():
            return found
        if measured is None or measured.shares.words < DECIDING_WORDS:
            return {**found, "chosen_by": "default"}
        shares = measured.shares
        return {
            **found,
            "chosen_by": "text",
            "why": why(shares, embedding.model),
            "reads": shares.as_dict(),
            "reads_said": reads_line(shares),
            "words_sampled": shares.words,
        }


def _changed_a_lot(before: int, after: int, now: bool) -> bool:
    if now:
        return after != before
    return abs(after - before) > CHANGED_A_LOT * max(before, 1)
