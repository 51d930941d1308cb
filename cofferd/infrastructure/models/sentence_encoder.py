"""The bundled all-MiniLM-L6-v2 run with onnxruntime directly, within a small memory budget.

The vectors are sentence-transformers' (and fastembed's): the mean of the token vectors
under the attention mask, L2-normalised. What differs is how it runs and what it holds:

* its layers multiply in int8 (`onnx_graph.int8_model`): the weights stay as the file
  has them (12 MB for the word table, 11 MB for the layers), twice as fast as widening them
  to float32, at cosine >= 0.998 of those vectors (0.994 for a text of spaces);
* texts run a few at a time, by tokens (`token_budget`, padding counted: one long text or
  many short ones), shortest first: larger batches were slower (their buffers outgrow the
  CPU caches) and need more memory;
* no memory arena: an arena keeps the buffers of the largest batch ever run for good (1.4 GB
  after a batch of 32 long chunks), and even shrunk after every run it raised the peak by
  ~60 MB; what a call freed is given back to the OS when it ends;
* numpy, onnxruntime and tokenizers are all it imports (fastembed brings ~35 MB more).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from cofferd.infrastructure import memory

PAD_TOKEN = "[PAD]"
OUTPUT = "last_hidden_state"  # (batch, tokens, dimensions)


def session_options(threads: int) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3  # errors only: its warnings are not ours to act on
    options.enable_cpu_mem_arena = False
    return options


def _tokenizer(file: Path, max_tokens: int) -> Tokenizer:
    """The model's tokenizer, cut at `max_tokens`, not padded (batches are, by `_padded`)."""
    tokenizer = Tokenizer.from_file(str(file))
    tokenizer.enable_truncation(max_length=max_tokens, direction="right")
    tokenizer.no_padding()
    return tokenizer


class SentenceEncoder:
    """A BERT-style ONNX model and its `tokenizer.json`; one caller at a time."""

    def __init__(
        self,
        model: Path,
        tokenizer: Path,
        *,
        threads: int,
        max_tokens: int,
        batch_size: int,
        token_budget: int,
    ) -> None:
        self.batch_size = batch_size
        self.token_budget = token_budget
        self._tokenizer = _tokenizer(tokenizer, max_tokens)
        self._pad_id = self._tokenizer.token_to_id(PAD_TOKEN) or 0
        self._session = ort.InferenceSession(
            str(model),
            sess_options=session_options(threads),
            providers=["CPUExecutionProvider"],
        )
        self._inputs = {node.name for node in self._session.get_inputs()}
        self.dimensions = int(self._session.get_outputs()[0].shape[-1])

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed_array(texts).tolist()  # type: ignore[no-any-return]

    def embed_array(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        """The texts' vectors, one row each (float32)."""
        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        try:
            encodings = self._tokenizer.encode_batch(list(texts))
            for batch in self._batches([len(e.ids) for e in encodings]):
                vectors[batch] = self._run(*_padded([encodings[i] for i in batch], self._pad_id))
        finally:
            memory.trim()  # a batch's buffers, freed, go back to the OS
        return vectors

    def _batches(self, lengths: Sequence[int]) -> Iterator[list[int]]:
        """Indexes of the texts, shortest first, in batches of `token_budget` tokens at most
        (padding counted) and `batch_size` texts; a text longer than the budget alone."""
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

    def _run(self, ids: np.ndarray[Any, Any], mask: np.ndarray[Any, Any]) -> Any:
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (tokens,) = self._session.run(
            [OUTPUT],
            {name: value for name, value in feeds.items() if name in self._inputs},
        )
        return _mean_normalized(tokens, mask)


def _padded(
    encodings: list[Encoding], pad_id: int
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Token ids and attention mask, padded to the longest of `encodings`."""
    longest = max(len(e.ids) for e in encodings)
    ids = np.full((len(encodings), longest), pad_id, dtype=np.int64)
    mask = np.zeros((len(encodings), longest), dtype=np.int64)
    for row, encoding in enumerate(encodings):
        ids[row, : len(encoding.ids)] = encoding.ids
        mask[row, : len(encoding.ids)] = 1
    return ids, mask


def _mean_normalized(tokens: np.ndarray[Any, Any], mask: np.ndarray[Any, Any]) -> Any:
    """Mean of the real tokens' vectors, L2-normalised: in float64, as fastembed does, and
    given back in the model's float32."""
    summed = np.sum(tokens, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
    mean = summed / np.maximum(np.sum(mask, axis=1, keepdims=True), 1e-9)
    norms = np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
    return (mean / norms).astype(tokens.dtype, copy=False)
