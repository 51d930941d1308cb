"""The local model's process: requests (EncoderSettings, (query?, [texts])) answered by
("vectors", dimensions, float32 bytes) or ("failed", why) (models.model_process is the
daemon's side). The model of the last settings stays loaded: the batch size is each
request's own (knowledge bases on one model may differ), and a change of threads loads
the model again.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from cofferd.domain.errors import EngineUnavailable
from cofferd.infrastructure.models.encoder_settings import (
    E5_ONNX,
    FASTEMBED,
    NO_FASTEMBED,
    NO_ONNXRUNTIME,
    EncoderSettings,
)
from cofferd.infrastructure.workers.frames import serve_items

_encoders: dict[EncoderSettings, Any] = {}  # the last settings' encoder (batch size apart)


def handle(settings: EncoderSettings, item: tuple[bool, list[str]]) -> Any:
    query, texts = item
    loaded = replace(settings, batch_size=0)
    try:
        if loaded not in _encoders:
            _encoders.clear()
            _encoders[loaded] = _load(settings)
        encoder = _encoders[loaded]
        encoder.batch_size = settings.batch_size
        vectors = (
            encoder.embed_array(texts, query)
            if settings.engine == E5_ONNX
            else encoder.embed_array(texts)  # MiniLM reads a query as any text
        )
    except EngineUnavailable as exc:
        return ("failed", exc.message)
    return ("vectors", vectors.shape[1], vectors.tobytes())


def _load(settings: EncoderSettings) -> Any:
    if settings.engine == E5_ONNX:
        return _load_e5(settings)
    if settings.engine == FASTEMBED:
        try:  # fastembed and numpy: the local extra
            from cofferd.infrastructure.models.fastembed_encoder import FastembedEncoder
        except ImportError:
            raise EngineUnavailable(NO_FASTEMBED) from None
        return FastembedEncoder(
            settings.model,
            settings.model_path,
            threads=settings.threads,
            batch_size=settings.batch_size,
        )
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


def _load_e5(settings: EncoderSettings) -> Any:
    try:  # onnxruntime, numpy and sentencepiece: the local extra
        from cofferd.infrastructure.models.e5_encoder import E5Encoder
    except ImportError:
        raise EngineUnavailable(NO_ONNXRUNTIME) from None
    try:
        return E5Encoder(
            Path(settings.model), threads=settings.threads, batch_size=settings.batch_size
        )
    except Exception as exc:  # noqa: BLE001 - the file, onnxruntime and sentencepiece raise many kinds
        raise EngineUnavailable(f"the multilingual model cannot be loaded: {exc}") from None


def main() -> None:
    serve_items(handle)


if __name__ == "__main__":
    main()
