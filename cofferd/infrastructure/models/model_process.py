"""A local model in a process of its own, so that the daemon's serving loop (and its
interpreter lock) never shares a core with the model, and the model's libraries
(onnxruntime, numpy, tokenizers: ~40 MB; fastembed's more) leave with it when it is
unloaded.

`ModelProcess` runs it on the one worker pool (workers.pool; the process is
models/model_main): per model, a bulk process at a low priority and an express one at
full priority, each started when texts are to be embedded and stopped after `idle_s`
without any: the pool's idle time is the only one a model has. A request is (settings,
(query?, [texts])); its reply the vectors as float32 bytes, or why there are none. Texts
go in small slices in the order of their lanes (models.model_lanes: a query first, then a
save's texts, then bulk work, each lane's callers in turn), each within its time
(`budget`): queries and saves one slice at a time to the express process, bulk work one
at a time to the bulk process, beside them. A query waits at most for a query's or a
save's slice in flight, never for bulk work (a multilingual search beside another KB's
bulk pass: p95 23 ms, bench.guards.embedding_lanes); the express process runs only while
queries and saves come (~170 MB more for e5 while both run). A process that dies or is stopped from
outside costs the slice it held, which the pool gives to the next process (workers.pool:
a kill or a stop from outside is no text's fault). A process that crashes on the same
slice, alone, twice, or takes too long is an EmbeddingFailed for the texts.

Every knowledge base on one model shares its processes, whatever its settings: the batch
size travels with each request (the process runs each at its own), the threads do not
(onnxruntime fixes them when a model loads), so the processes run with the most any of
its knowledge bases asks for, and says so in the log when they differ. A change loads the
model again in the same process.
"""

from __future__ import annotations

import array
import asyncio
import logging
from collections.abc import Hashable, Sequence
from dataclasses import replace
from typing import Any

from cofferd.domain.errors import EngineUnavailable
from cofferd.domain.failures import EmbeddingFailed
from cofferd.domain.index_records import EmbedLane
from cofferd.infrastructure.models import model_main
from cofferd.infrastructure.models.encoder_settings import (
    E5_ONNX,
    ONNX_BERT,
    EncoderSettings,
)
from cofferd.infrastructure.models.model_lanes import Lanes, Slice, slices
from cofferd.infrastructure.workers.frames import Replies
from cofferd.infrastructure.workers.pool import WorkerEntry, WorkerPool, WorkFailed

log = logging.getLogger(__name__)

# its replies are builtins only: ("vectors", dimensions, bytes) or ("failed", why)
PROCESS = WorkerEntry(model_main.__name__, Replies())
# A slice's time, from the knowledge base's `timeout_s` (30 s unless set): twice that,
# plus a share of it per text: MiniLM ~0.04 s each on one core, e5 ~0.2 s for a CJK
# paragraph (several times that on a loaded machine); at 30 s, 60 s + 2 s (e5: 5 s, any
# other model: 15 s) per text.
TIMEOUT_S = 30.0
PER_TEXT_SHARE = {ONNX_BERT: 1 / 15, E5_ONNX: 1 / 6}
PER_TEXT_SHARE_OTHER = 1 / 2
IDLE_S = 300.0
# the lanes sent one slice at a time, beside each other: to the express process and to
# the bulk one (the pool gives an interactive slice to the bulk process when it is idle)
SENT_TOGETHER = ((EmbedLane.QUERY, EmbedLane.SAVE), (EmbedLane.BULK,))


def budget(texts: int, engine: str, timeout_s: float = TIMEOUT_S) -> float:
    """How long a slice of `texts` texts may take."""
    return timeout_s * (2 + texts * PER_TEXT_SHARE.get(engine, PER_TEXT_SHARE_OTHER))


class ModelProcess:
    """The daemon's side: a pool of one process for bulk work, at a low priority, and
    its express one for queries and saves (started when one comes, stopped after `idle_s`
    without any), each sent one slice at a time by its `_send`, the next taken from its
    lanes when the last is answered: a query waits for the express process's slice in
    flight (a query's or a save's), never for bulk work."""

    def __init__(self, settings: EncoderSettings, *, idle_s: float = IDLE_S) -> None:
        self.settings = settings.model_key()
        self.pool = WorkerPool(PROCESS, 1, idle_s=idle_s, keep_express=False)
        self._threads: list[int] = []  # each user's (a knowledge base's embedder)
        self._lanes = Lanes()
        self._senders: list[asyncio.Task[None]] = []

    @property
    def running(self) -> bool:
        return bool(self.pool.status()["running"])

    @property
    def pid(self) -> int | None:
        pids = self.pool.status()["pids"]
        return pids[0] if pids else None

    @property
    def threads(self) -> int:
        """The threads it runs with: the most any of its users asks for."""
        return max(self._threads, default=1)

    @property
    def users(self) -> int:
        return len(self._threads)

    def join(self, threads: int) -> None:
        """One more user, asking for `threads`."""
        self._threads.append(threads)
        self._said()

    def leave(self, threads: int) -> None:
        """A user gone (one that asked for `threads`)."""
        if threads in self._threads:
            self._threads.remove(threads)
        self._said()

    def _said(self) -> None:
        if len(set(self._threads)) > 1:
            log.info(
                "the local model %s serves %d knowledge bases asking for %s threads: "
                "its one process runs with %d",
                self.settings.model, len(self._threads),
                sorted(set(self._threads)), self.threads,
            )  # fmt: skip

    async def embed(
        self,
        texts: Sequence[str],
        lane: EmbedLane,
        *,
        user: Hashable,
        batch_size: int = 1,
        timeout_s: float = TIMEOUT_S,
    ) -> list[list[float]]:
        """The texts' vectors, in `lane`, taking turns there with its other `user`s. A
        caller that gives up (a query's timeout) leaves the slice in flight to finish (the
        process is neither killed nor left with a reply no one reads) and the rest unsent."""
        if not texts:
            return []
        head = replace(self.settings, threads=self.threads, batch_size=batch_size)
        pieces = [Slice(head, timeout_s, lane, piece) for piece in slices(texts)]
        self._lanes.add(user, pieces)
        if not self._senders:
            self._senders = [
                asyncio.create_task(self._send(lanes), name=f"model lanes: {lanes}")
                for lanes in SENT_TOGETHER
            ]
        try:
            return [vector for piece in pieces for vector in await piece.reply]
        finally:
            for piece in pieces:
                piece.reply.cancel()  # (those answered keep their reply)

    async def _send(self, lanes: tuple[EmbedLane, ...]) -> None:
        """Slice after slice of `lanes` to the pool, in their order, until it closes."""
        engine = self.settings.engine
        while True:
            piece = self._lanes.next(lanes)
            if piece is None:
                self._lanes.ready.clear()
                await self._lanes.ready.wait()
                continue
            try:
                reply = await self.pool.ask(
                    piece.head,
                    (piece.lane is EmbedLane.QUERY, piece.texts),
                    interactive=piece.lane is not EmbedLane.BULK,
                    timeout_s=budget(len(piece.texts), engine, piece.timeout_s),
                )
                vectors = _vectors(reply, len(piece.texts))
            except EngineUnavailable as exc:
                failed: EmbeddingFailed | None = EmbeddingFailed(exc.message, exc.code)
            except EmbeddingFailed as exc:
                failed = exc
            except Exception as exc:  # a bug: its caller told, the next slices still sent
                log.exception("sending a slice to the local model failed")
                failed = EmbeddingFailed(f"the local model's lanes failed: {type(exc).__name__}")
            else:
                failed = None
            if not piece.reply.done():
                if failed is None:
                    piece.reply.set_result(vectors)
                else:
                    piece.reply.set_exception(failed)

    async def close(self) -> None:
        senders, self._senders = self._senders, []
        for sender in senders:
            sender.cancel()
        await asyncio.gather(*senders, return_exceptions=True)
        for piece in self._lanes.waiting():
            if not piece.reply.done():
                piece.reply.set_exception(EmbeddingFailed("cofferd is stopping"))
        self._lanes.clear()
        await self.pool.close()


def _vectors(reply: Any, count: int) -> list[list[float]]:
    match reply:
        case WorkFailed(cause="outside", reason=reason):
            raise EmbeddingFailed(f"the local model's process was stopped or killed: {reason}")
        case WorkFailed(cause="time", reason=reason):
            raise EmbeddingFailed(f"the local model {reason}; stopped")
        case WorkFailed(reason=reason):
            raise EmbeddingFailed(f"the local model's process failed: {reason}")
        case ("vectors", int(dimensions), bytes(data)) if len(data) == 4 * dimensions * count:
            flat = array.array("f", data).tolist()
            return [flat[i : i + dimensions] for i in range(0, len(flat), dimensions)]
        case ("failed", str(reason)):
            raise EmbeddingFailed(reason, "the local model failed and said nothing of why")
    raise EmbeddingFailed("the local model's process answered something else")
