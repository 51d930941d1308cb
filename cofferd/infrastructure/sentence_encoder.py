"""The bundled all-MiniLM-L6-v2 run with onnxruntime directly, within a small memory budget.

The vectors are sentence-transformers' (and fastembed's): the mean of the token vectors
under the attention mask, L2-normalised. What differs is what it holds in memory:

* its memory arena is given back after every run: an arena keeps the buffers of the
  largest batch ever run for good (1.4 GB after a batch of 32 long chunks);
* texts run a few at a time, each batch with texts of similar length (less padding), and
  what a call freed is given back to the OS when it ends;
* numpy, onnxruntime and tokenizers are all it imports (fastembed brings ~35 MB more).

The int8 weights of its layers are widened to float32 once, when the model loads (~35 MB
more than the file): widening them at every run instead made a one-line query 3 times
slower. Its word-embedding table stays int8 (`onnx_graph`: only the rows a run looks up
are widened).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from cofferd.infrastructure import memory

PAD_TOKEN = "[PAD]"
OUTPUT = "last_hidden_state"  # (batch, tokens, dimensions)


def _session_options(threads: int) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3  # errors only: its warnings are not ours to act on
    return options


def _run_options() -> Any:
    options = ort.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


def _tokenizer(file: Path, max_tokens: int) -> Tokenizer:
    """The model's tokenizer, cut at `max_tokens` and padded to the longest of a batch."""
    tokenizer = Tokenizer.from_file(str(file))
    tokenizer.enable_truncation(max_length=max_tokens, direction="right")
    pad_id = tokenizer.token_to_id(PAD_TOKEN)
    tokenizer.enable_padding(direction="right", pad_id=pad_id, pad_token=PAD_TOKEN)
    return tokenizer


class SentenceEncoder:
    """A BERT-style ONNX model and its `tokenizer.json`; one caller at a time."""

    def __init__(
        self, model: Path, tokenizer: Path, *, threads: int, max_tokens: int, batch_size: int
    ) -> None:
        self.batch_size = batch_size
        self._tokenizer = _tokenizer(tokenizer, max_tokens)
        self._session = ort.InferenceSession(
            str(model),
            sess_options=_session_options(threads),
            providers=["CPUExecutionProvider"],
        )
        self._run_options = _run_options()
        self._inputs = {node.name for node in self._session.get_inputs()}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = [[] for _ in texts]
        try:
            for batch in self._batches(texts):
                for index, vector in zip(batch, self._run([texts[i] for i in batch]), strict=True):
                    vectors[index] = vector
        finally:
            memory.trim()  # a batch's buffers, freed, go back to the OS
        return vectors

    def _batches(self, texts: Sequence[str]) -> Iterator[list[int]]:
        """Indexes of `texts`, shortest first, `batch_size` at a time."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            yield order[start : start + self.batch_size]

    def _run(self, texts: list[str]) -> list[list[float]]:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (tokens,) = self._session.run(
            [OUTPUT],
            {name: value for name, value in feeds.items() if name in self._inputs},
            self._run_options,
        )
        return _mean_normalized(tokens, mask).tolist()  # type: ignore[no-any-return]


def _mean_normalized(tokens: np.ndarray[Any, Any], mask: np.ndarray[Any, Any]) -> Any:
    """Mean of the real tokens' vectors, L2-normalised: in float64, as fastembed does, and
    given back in the model's float32."""
    summed = np.sum(tokens, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
    mean = summed / np.maximum(np.sum(mask, axis=1, keepdims=True), 1e-9)
    norms = np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
    return (mean / norms).astype(tokens.dtype, copy=False)
