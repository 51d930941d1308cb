"""Vectors follow keyword rows in the background, so saving never waits on an embedder
(the indexing service runs the queue: `run_once` whenever there may be work).

Documents written to a vector-enabled KB owe vectors (`embed_pending`); this queue embeds
them in batches, each KB's beside the others' (one KB's long batch never holds another's),
in the lane that says what they are (`_lane`: a save's, or bulk work's; a search's query
goes before both). Only the chunks the model reads (`ModelCoverage.reads`); a chunk in a
script it does not read gets no vector (keyword search and grep find it). A failure keeps
the flag, records the error (the document is "degraded": keyword search and grep still
find it) and retries with backoff, touching only vector rows. A change of model or width
empties the KB's vectors and embeds it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from cofferd.application.indexing.knowledge_bases import KnowledgeBases
from cofferd.application.indexing.model_choice import ModelChoice
from cofferd.application.indexing.progress import Progress, ProgressBoard
from cofferd.domain.config import EmbeddingConfig, KnowledgeBaseConfig
from cofferd.domain.errors import CofferError, EngineUnavailable
from cofferd.domain.failures import EmbeddingFailed
from cofferd.domain.index_records import EmbedJob, EmbedLane
from cofferd.domain.models import KnowledgeBase
from cofferd.domain.ports import Embedder, VectorStore

log = logging.getLogger(__name__)

BATCH_DOCUMENTS = 16
LOCAL_PIECE = 8  # texts a bundled model is asked for at once: progress moves by as many
BACKOFF_S = (15.0, 30.0, 60.0, 120.0, 300.0, 600.0)
IDLE_RECHECK_S = 15.0
QUERY_TIMEOUT_S = 10.0
COVERAGE_SAMPLE = 2000  # chunks read to say how much of a KB a model cannot read
SAVE_CHUNKS = 64  # more chunks owed at once than a save writes: bulk work


@dataclass
class KBEmbedState:
    failures: int = 0
    last_error: str | None = None
    embedded: int = 0


class Embeddings:
    def __init__(
        self,
        kbs: KnowledgeBases,
        store: VectorStore,
        make_embedder: Callable[[EmbeddingConfig], Embedder],
        progress: ProgressBoard | None = None,
    ) -> None:
        self.progress = progress or ProgressBoard()
        self._catching_up: dict[str, Progress] = {}  # KB -> its embedding catch-up
        self.kbs = kbs
        self.store = store
        self.choice = ModelChoice(kbs, store)  # the model of a KB whose settings name none
        self.make_embedder = make_embedder
        self._embedders: dict[str, tuple[str, Embedder]] = {}
        self._retired: list[Embedder] = []  # replaced by a model switch: closed at the end
        self._batches: dict[str, asyncio.Task[bool]] = {}  # KB -> its batch under way
        self._bulk: set[str] = set()  # KBs catching up (bulk work) until caught up
        self._state: dict[str, KBEmbedState] = {}
        self._wake = asyncio.Event()
        self.unavailable: str | None = None  # why vectors cannot work here at all
        self._available: bool | None = None

    async def close(self) -> None:
        await self._stop_batches()
        for embedder in [*self._retired, *(e for _, e in self._embedders.values())]:
            await embedder.close()
        self._embedders.clear()
        self._retired.clear()

    def wake(self) -> None:
        """There is work: new documents, a new model, retries asked for."""
        self._wake.set()

    async def wanted(self, timeout_s: float) -> None:
        """Until woken, or `timeout_s` (retries may have come due meanwhile)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout_s)
        self._wake.clear()

    async def retry_now(self, kb: str) -> None:
        """A reconcile asks for another try of failed embeds, without waiting out backoff."""
        state = self._state.get(kb)
        if state is not None:  # what was embedded since the start stays counted
            state.failures, state.last_error = 0, None
        async with self.kbs.registry.lock(kb):
            await self.store.retry_embeds_now(kb)
        self.wake()

    # -- the work -------------------------------------------------------------------------

    async def available(self) -> bool:
        """Whether vectors can work at all here (sqlite-vec loaded); checked once."""
        if self._available is None:
            self._available = await self.store.vectors_available()
            if not self._available:
                self.unavailable = "sqlite-vec is not loaded; keyword search and grep still work"
                log.warning(self.unavailable)
        return self._available

    async def run_once(self) -> bool:
        """A batch for each KB that owes vectors, side by side, until one of them has
        ended or work may have come (woken; the others go on meanwhile): True when
        something was attempted (or new work may be owed)."""
        if not await self.available():
            return False
        self._wake.clear()  # what comes from now on is seen by the batches started below
        embedding = {kb.name for kb in self.kbs.list() if kb.enabled and kb.config.vector_enabled}
        for name in set(self._catching_up) - embedding:
            self._caught_up(name)  # deleted, disabled or without vectors meanwhile
        for kb in self.kbs.list():
            if not kb.enabled or kb.name in self._batches:
                continue
            kb = await self.choice.follow(kb)
            await self._follow_model(kb)
            if kb.config.vector_enabled:
                batch = asyncio.create_task(self._embed_batch(kb), name=f"embedding {kb.name}")
                self._batches[kb.name] = batch
        try:
            return await self._one_ended()
        except asyncio.CancelledError:
            await self._stop_batches()
            raise

    async def _one_ended(self) -> bool:
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            while self._batches:
                await asyncio.wait(
                    [*self._batches.values(), woken], return_when=asyncio.FIRST_COMPLETED
                )
                ended = [self._batches.pop(kb) for kb, t in list(self._batches.items()) if t.done()]
                failed = [exc for task in ended if (exc := task.exception()) is not None]
                if failed:
                    raise failed[0]  # (the queue logs it; any other is the same kind of thing)
                if any(task.result() for task in ended) or woken.done():
                    return True
            return False
        finally:
            woken.cancel()

    async def _stop_batches(self) -> None:
        batches = list(self._batches.values())
        self._batches.clear()
        for task in batches:
            task.cancel()
        await asyncio.gather(*batches, return_exceptions=True)

    async def drain(self, kb_name: str) -> None:
        """Embed everything a KB owes now (tests and benchmarks; the daemon uses the loop)."""
        kb = self.kbs.get(kb_name)
        if not await self.available():
            return
        kb = await self.choice.follow(kb)
        await self._follow_model(kb)
        while kb.config.vector_enabled and await self._embed_batch(kb):
            pass

    async def _follow_model(self, kb: KnowledgeBase) -> None:
        recorded = await self.store.vector_model(kb.name)
        embedding = kb.config.embedding
        if kb.config.vector_enabled and embedding is not None:
            if recorded != (embedding.identity(), embedding.dimensions):
                if recorded is not None:
                    log.info("%s: embedding model changed; embedding it again", kb.name)
                async with self.kbs.registry.lock(kb.name):
                    await self.store.reset_vectors(
                        kb.name, True, model=embedding.identity(), dims=embedding.dimensions
                    )
        elif recorded is not None:
            async with self.kbs.registry.lock(kb.name):
                await self.store.reset_vectors(kb.name, pending=False)

    def _embedder(self, kb: KnowledgeBase) -> Embedder:
        config = kb.config.embedding
        assert config is not None
        cached = self._embedders.get(kb.name)
        if cached is None or cached[0] != config.identity():
            if cached is not None:  # a model switch: the old one lets go of what it holds
                self._retired.append(cached[1])
            self._embedders[kb.name] = (config.identity(), self.make_embedder(config))
        return self._embedders[kb.name][1]

    async def _embed_batch(self, kb: KnowledgeBase) -> bool:
        config = kb.config.embedding
        assert config is not None
        jobs = await self.store.pending_embeds(kb.name, BATCH_DOCUMENTS, time.time())
        if not jobs:
            self._caught_up(kb.name)
            return False
        owed = await self.store.owed_chunks(kb.name)
        progress = self._catching_up.get(kb.name)
        if progress is None:
            progress = self._catching_up[kb.name] = self.progress.start(kb.name, "embedding", owed)
        progress.total = max(progress.total, progress.done + owed)  # saves meanwhile add work
        state = self._state.setdefault(kb.name, KBEmbedState())
        chunks = sum(len(job.chunks) for job in jobs)
        jobs = _readable_chunks(jobs, config)
        texts = [text for job in jobs for _, text in job.chunks]
        lane = self._lane(kb.name, full=len(jobs) == BATCH_DOCUMENTS or len(texts) > SAVE_CHUNKS)
        try:
            vectors = await self._vectors(kb, texts, lane, progress)
        except (EmbeddingFailed, CofferError) as exc:
            message = failure_reason(exc)
            delay = BACKOFF_S[min(state.failures, len(BACKOFF_S) - 1)]
            state.failures += 1
            state.last_error = message
            log.warning("%s: embedding failed (%s); retrying in %.0f s", kb.name, message, delay)
            async with self.kbs.registry.lock(kb.name):
                await self.store.embed_failed(
                    kb.name, [j.document_id for j in jobs], message, time.time() + delay
                )
            self._caught_up(kb.name)  # until the retry: nothing is under way
            return False
        done, start = [], 0
        for job in jobs:
            done.append((job, vectors[start : start + len(job.chunks)]))
            start += len(job.chunks)
        async with self.kbs.registry.lock(kb.name):  # like every change to a KB's index
            state.embedded += await self.store.store_vectors(
                kb.name, config.identity(), config.dimensions, done
            )
        state.failures, state.last_error = 0, None
        progress.advance(chunks - len(texts))  # the chunks left without a vector are done too
        return True

    def _lane(self, kb: str, full: bool) -> EmbedLane:
        """A KB's live changes (a save, an API write: fewer documents than a batch, few
        chunks) go in the save lane; from a `full` batch on (a pass over many files, a
        model switch, a catch-up at start) the KB's work is bulk until it is caught up."""
        if full:
            self._bulk.add(kb)
        return EmbedLane.BULK if kb in self._bulk else EmbedLane.SAVE

    async def _vectors(
        self, kb: KnowledgeBase, texts: list[str], lane: EmbedLane, progress: Progress
    ) -> list[list[float]]:
        """The texts' vectors, asked for a few at a time so that progress moves by chunks
        (a remote provider gets its own batch size; a local model a few texts)."""
        config = kb.config.embedding
        assert config is not None
        local = config.provider == "local"
        step = min(config.batch_size, LOCAL_PIECE) if local else config.batch_size
        vectors: list[list[float]] = []
        for start in range(0, len(texts), step):
            piece = texts[start : start + step]
            vectors += await self._embedder(kb).embed(piece, lane=lane)
            progress.advance(len(piece))
        return vectors

    def _caught_up(self, kb: str) -> None:
        self._bulk.discard(kb)
        progress = self._catching_up.pop(kb, None)
        if progress is not None:
            self.progress.finish(progress)

    async def embed_query(self, kb: KnowledgeBase, text: str) -> list[float] | None:
        """The query's vector, or None when the embedder is down (search degrades)."""
        assert kb.config.embedding is not None
        limit = min(QUERY_TIMEOUT_S, kb.config.embedding.timeout_s)
        try:
            async with asyncio.timeout(limit):
                (vector,) = await self._embedder(kb).embed([text], lane=EmbedLane.QUERY)
        except (EmbeddingFailed, CofferError, TimeoutError) as exc:
            why = f"no answer within {limit:g} s" if isinstance(exc, TimeoutError) else None
            log.warning(
                "%s: query embedding failed (%s); keyword search only",
                kb.name, why or failure_reason(exc),
            )  # fmt: skip
            return None
        return vector

    async def coverage(self, kb: KnowledgeBase) -> dict[str, Any] | None:
        """What `kb set` says of the chosen model: the languages it reads, and the share of
        the KB's text (in words, over a sample of its chunks) in scripts it does not read,
        which is not embedded. None without vectors."""
        config = kb.config.embedding
        if not kb.config.vector_enabled or config is None:
            return None
        coverage = config.coverage()
        unread = total = 0
        sample = await self.store.text_sample(kb.name, COVERAGE_SAMPLE)
        for text in sample:
            words_unread, words = coverage.words(text)
            unread, total = unread + words_unread, total + words
        return {
            "model": config.model,
            "languages": coverage.languages,
            "not_read_share": round(unread / total, 4) if total else 0.0,
            "chunks_sampled": len(sample),
        }

    def status(self, kb: str) -> dict[str, Any]:
        state = self._state.get(kb, KBEmbedState())
        return {
            "embedded_this_run": state.embedded,
            "consecutive_failures": state.failures,
            "last_error": state.last_error,
            "unavailable": self.unavailable,
        }


def failure_reason(exc: BaseException) -> str:
    """Why an embedding failed, never empty (a timeout's own text is)."""
    text = exc.message if isinstance(exc, CofferError) else str(exc)
    return text or type(exc).__name__


def _readable_chunks(jobs: list[EmbedJob], config: EmbeddingConfig) -> list[EmbedJob]:
    """The jobs with only the chunks the model reads (a document may keep none)."""
    coverage = config.coverage()
    return [replace(job, chunks=[c for c in job.chunks if coverage.reads(c[1])]) for job in jobs]


class ModelCheck:
    """Refuses a local model that cannot load here (a hub name offline, a bad folder)
    when settings name it, rather than degrading every document later (the knowledge
    bases' `vet`)."""

    def __init__(self, make_embedder: Callable[[EmbeddingConfig], Embedder]) -> None:
        self.make_embedder = make_embedder

    async def __call__(self, kb_config: KnowledgeBaseConfig) -> None:
        config = kb_config.embedding
        if not kb_config.vector_enabled or config is None or config.provider != "local":
            return  # a remote provider may be down now and back later: that degrades
        embedder = self.make_embedder(config)
        try:
            await embedder.embed(["ready"], lane=EmbedLane.SAVE)  # someone waits for it
        except EmbeddingFailed as exc:
            raise EngineUnavailable(failure_reason(exc), model=config.model) from None
        finally:
            await embedder.close()
