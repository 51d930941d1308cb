"""The bundled local model in a process of its own, so that the daemon's serving loop (and
its interpreter lock) never shares a core with the model, and the model's libraries
(onnxruntime, numpy, tokenizers: ~40 MB) leave with it when it is unloaded.

The daemon (`ModelProcess`) starts `python -m cofferd.infrastructure.workers.model_process` when
texts are to be embedded, sends it frames (infrastructure.frames) of (settings, texts) and
reads back one reply per request: the vectors as float32 bytes, or why there are none. A
process that dies, or answers out of turn, is an EmbeddingFailed for the texts it held;
the next request starts a new one.
"""

from __future__ import annotations

import array
import asyncio
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import IO, Any

from cofferd.domain.errors import EngineUnavailable
from cofferd.domain.failures import EmbeddingFailed
from cofferd.infrastructure.workers import frames
from cofferd.infrastructure.workers.frames import serve_stdio
from cofferd.infrastructure.workers.pool import READY, Worker, WorkerGone

MODULE = "cofferd.infrastructure.workers.model_process"
# A reply is waited for this long, plus this long per text (~0.04 s each on one core).
TIMEOUT_S = 60.0
TIMEOUT_PER_TEXT_S = 2.0
NO_ONNXRUNTIME = "onnxruntime is not installed: pip install 'coffer[local]'"


@dataclass(frozen=True)
class EncoderSettings:
    """What the process loads: SentenceEncoder's arguments (paths as text)."""

    model: str
    tokenizer: str
    threads: int
    max_tokens: int
    batch_size: int
    token_budget: int


class ModelProcess:
    """The daemon's side: one process, one request at a time, started on demand."""

    def __init__(self, settings: EncoderSettings) -> None:
        self.settings = settings
        self._worker: Worker | None = None
        self._lock = asyncio.Lock()
        self._requests: set[asyncio.Task[list[list[float]]]] = set()

    @property
    def running(self) -> bool:
        return self._worker is not None

    @property
    def pid(self) -> int | None:
        return self._worker.pid if self._worker is not None else None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The texts' vectors. A caller that gives up (a query's timeout) leaves the request
        to finish: the process is neither killed nor left with a reply no one reads."""
        request = asyncio.ensure_future(self._request(list(texts)))
        self._requests.add(request)
        request.add_done_callback(self._finished)
        return await asyncio.shield(request)

    def _finished(self, request: asyncio.Task[list[list[float]]]) -> None:
        self._requests.discard(request)
        if not request.cancelled():
            request.exception()  # retrieved: a caller that gave up never reads it

    async def _request(self, texts: list[str]) -> list[list[float]]:
        async with self._lock:
            worker = self._worker or await self._start()
            try:
                await worker.send((asdict(self.settings), texts))
                replies = await worker.receive(TIMEOUT_S + TIMEOUT_PER_TEXT_S * len(texts))
            except (WorkerGone, frames.BrokenStream, TimeoutError) as exc:
                code = await self._kill()
                if isinstance(exc, TimeoutError):
                    raise EmbeddingFailed("the local model took too long; stopped") from None
                raise EmbeddingFailed(f"the local model's process died (exit {code})") from None
            except BaseException:  # cancelled mid-request (close): the reply is never read
                await self._kill()
                raise
            if len(replies) != 1:
                await self._kill()
                raise EmbeddingFailed("the local model's process answered out of turn")
            return _vectors(replies[0], len(texts))

    async def _start(self) -> Worker:
        try:
            self._worker = await Worker.start(MODULE)
        except EngineUnavailable as exc:
            raise EmbeddingFailed(exc.message) from None
        return self._worker

    async def _kill(self) -> int | None:
        worker, self._worker = self._worker, None
        return await worker.kill() if worker is not None else None

    async def stop(self) -> None:
        """Let the process exit (after the request it is running, if any)."""
        async with self._lock:
            worker, self._worker = self._worker, None
            if worker is not None:
                await worker.stop()

    async def close(self) -> None:
        for request in list(self._requests):
            request.cancel()
        await asyncio.gather(*self._requests, return_exceptions=True)
        await self._kill()


def _vectors(reply: Any, count: int) -> list[list[float]]:
    match reply:
        case ("vectors", int(dimensions), bytes(data)) if len(data) == 4 * dimensions * count:
            flat = array.array("f", data).tolist()
            return [flat[i : i + dimensions] for i in range(0, len(flat), dimensions)]
        case ("failed", str(reason)):
            raise EmbeddingFailed(reason)
    raise EmbeddingFailed("the local model's process answered something else")


# -- the process --------------------------------------------------------------------------


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    frames.write(replies, READY)
    encoders: dict[EncoderSettings, Any] = {}  # the last settings' SentenceEncoder
    while (request := frames.read(requests)) is not None:
        fields, texts = request
        settings = EncoderSettings(**fields)
        try:
            if settings not in encoders:
                encoders.clear()
                encoders[settings] = _load(settings)
            vectors = encoders[settings].embed_array(texts)
        except EngineUnavailable as exc:
            frames.write(replies, ("failed", exc.message))
            continue
        frames.write(replies, ("vectors", vectors.shape[1], vectors.tobytes()))


def _load(settings: EncoderSettings) -> Any:
    from pathlib import Path

    try:  # onnxruntime, numpy and tokenizers: the local extra
        from cofferd.infrastructure.models.sentence_encoder import SentenceEncoder
    except ImportError:
        raise EngineUnavailable(NO_ONNXRUNTIME) from None
    try:
        return SentenceEncoder(
            Path(settings.model),
            Path(settings.tokenizer),
            threads=settings.threads,
            max_tokens=settings.max_tokens,
            batch_size=settings.batch_size,
            token_budget=settings.token_budget,
        )
    except Exception as exc:  # noqa: BLE001 - onnxruntime and tokenizers raise many kinds
        raise EngineUnavailable(f"the bundled model cannot be loaded: {exc}") from None


def main() -> None:
    serve_stdio(serve)


if __name__ == "__main__":
    main()
