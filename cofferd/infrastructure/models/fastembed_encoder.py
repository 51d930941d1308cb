"""A local model other than the bundled ones (`model_path`, or a model name fastembed has
cached), through fastembed, in the local model's process (models.model_main)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from cofferd.domain.errors import EngineUnavailable
from cofferd.infrastructure import memory
from cofferd.infrastructure.models.encoder_settings import NO_FASTEMBED


class FastembedEncoder:
    """One fastembed model; one caller at a time (`batch_size` texts at once: fastembed's
    batches pad to the longest text)."""

    def __init__(self, name: str, model_path: str, *, threads: int, batch_size: int) -> None:
        try:
            from fastembed import TextEmbedding
            from loguru import logger  # fastembed's, writing to stderr past `logging`
        except ImportError:
            raise EngineUnavailable(NO_FASTEMBED) from None
        if not logging.getLogger().isEnabledFor(logging.DEBUG):
            logger.disable("fastembed")  # heard from at DEBUG only, like other libraries
        try:
            self._model: Any = TextEmbedding(
                name,
                specific_model_path=model_path or None,
                threads=threads,
                local_files_only=True,  # never download here
                enable_cpu_mem_arena=False,  # an arena keeps the largest batch's memory
            )
        except Exception as exc:  # noqa: BLE001 - fastembed raises many kinds
            raise EngineUnavailable(f"local model {name!r} cannot be loaded: {exc}") from None
        self.batch_size = batch_size

    def embed_array(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        """The texts' vectors, one row each (float32)."""
        try:
            rows = list(self._model.embed(list(texts), batch_size=self.batch_size))
        finally:
            memory.trim()  # a batch's buffers, freed, go back to the OS
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)
