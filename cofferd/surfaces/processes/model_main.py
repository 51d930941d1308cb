"""The bundled model's process: requests (EncoderSettings, [texts]) answered by
("vectors", dimensions, float32 bytes) or ("failed", why) (infrastructure.workers.
model_process is the daemon's side). The model of the last settings stays loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cofferd.domain.errors import EngineUnavailable
from cofferd.infrastructure.workers.frames import serve_items
from cofferd.infrastructure.workers.model_process import NO_ONNXRUNTIME, EncoderSettings

_encoders: dict[EncoderSettings, Any] = {}  # the last settings' SentenceEncoder


def handle(settings: EncoderSettings, texts: list[str]) -> Any:
    try:
        if settings not in _encoders:
            _encoders.clear()
            _encoders[settings] = _load(settings)
        vectors = _encoders[settings].embed_array(texts)
    except EngineUnavailable as exc:
        return ("failed", exc.message)
    return ("vectors", vectors.shape[1], vectors.tobytes())


def _load(settings: EncoderSettings) -> Any:
    try:  # onnxruntime, numpy and tokenizers: the local extra
        from cofferd.infrastructure.models.sentence_encoder import SentenceEncoder
    except ImportError:
        raise EngineUnavailable(NO_ONNXRUNTIME) from None
    try:
        return SentenceEncoder(
            Path(settings.model),
            Path(settings.tokenizer),
            threads=settings.threads,
            max_tokens=settings.max_tokens,
            batch_size=settings.batch_size,
            token_budget=settings.token_budget,
        )
    except Exception as exc:  # noqa: BLE001 - onnxruntime and tokenizers raise many kinds
        raise EngineUnavailable(f"the bundled model cannot be loaded: {exc}") from None


def main() -> None:
    serve_items(handle)


if __name__ == "__main__":
    main()
