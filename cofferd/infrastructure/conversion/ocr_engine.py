"""Text out of pixels (OCR), in the converter's process: RapidOCR on onnxruntime with the
PP-OCRv6 models its wheel ships (one recognizer for Chinese, English, Japanese and the
Latin-script languages; no Korean: docs/benchmarks.md, "OCR (issue 44)").

The models are loaded once per process from the wheel's own files, named by path: RapidOCR
downloads a model only when it is given none, so nothing here ever reaches the network.
OCR is optional (`pip install 'coffer[ocr]'`, ~220 MB with OpenCV): without it an image
is refused with a sentence saying so. Images reach here already bounded in pixels
(image_pixels); the converter's memory cap and per-document time bound the rest.
"""

from __future__ import annotations

import logging
import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from PIL.Image import Image

log = logging.getLogger(__name__)

MISSING = "OCR is not installed: images and scanned pages are read with `pip install 'coffer[ocr]'`"
MODELS = {
    "Det": "PP-OCRv6_det_small.onnx",
    "Rec": "PP-OCRv6_rec_small.onnx",
    "Cls": "ch_ppocr_mobile_v2.0_cls_mobile.onnx",
}
# Where a page's time goes (docs/benchmarks.md, "OCR (issue 44)"): recognition, ~0.1 CPU-s
# a line of text; detection at full size another ~2 CPU-s, which DETECT_SIDE takes to ~0.4.
THREADS = 1  # a second thread saved no CPU and spun against the other process on 2 cores
DETECT_SIDE = 1280  # px: text is found on the page scaled to this longest side (A4: ~110
# dpi), and recognized in crops of the page at its own resolution
REC_BATCH = 1  # lines recognized one by one: a batch pads its lines to the widest, slower
MIN_SCORE = 0.5  # a line recognized with less confidence is noise (RapidOCR's default)


class OcrMissing(Exception):
    """OCR is not installed in this environment (the `ocr` extra); why, as a sentence."""


def available() -> bool:
    """Whether OCR can run here (its package and its bundled models are installed)."""
    try:
        _model_folder()
    except OcrMissing:
        return False
    return True


def _model_folder() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("rapidocr")
    if spec is None or spec.origin is None:
        raise OcrMissing(MISSING)
    folder = Path(spec.origin).parent / "models"
    if not all((folder / name).is_file() for name in MODELS.values()):
        raise OcrMissing(MISSING + " (its models are missing)")
    return folder


@cache
def _engine() -> Any:
    """RapidOCR, made once per process, each model named by its bundled file."""
    folder = _model_folder()
    os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
    from rapidocr import RapidOCR

    params: dict[str, Any] = {
        f"{step}.model_path": str(folder / name) for step, name in MODELS.items()
    }
    params.update(
        {
            "Global.log_level": "error",
            "Global.use_cls": False,  # pages are upright: the angle model costs, finds none
            "Global.text_score": MIN_SCORE,
            "Det.limit_type": "max",
            "Det.limit_side_len": DETECT_SIDE,
            "Rec.rec_batch_num": REC_BATCH,
            "EngineConfig.onnxruntime.intra_op_num_threads": THREADS,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
    )
    return RapidOCR(params=params)


def lines_of(image: Image) -> list[str]:
    """The lines of text in the image, in reading order (top to bottom, left to right)."""
    import numpy as np

    pixels = np.asarray(image.convert("RGB"))
    result = _engine()(pixels)
    texts = getattr(result, "txts", None) or ()
    boxes = getattr(result, "boxes", None)
    found = [str(t).strip() for t in texts]
    if boxes is not None and len(boxes) == len(found):
        found = _in_reading_order(found, boxes)
    return [line for line in found if line]


def ocr_page(image: Image) -> str:
    """A page's text as OCR reads it, a line of text a line."""
    return "\n".join(lines_of(image))


def _in_reading_order(texts: list[str], boxes: Any) -> list[str]:
    """Boxes whose vertical middles are within half a line of each other are one line,
    read left to right, joined by a space; lines top to bottom."""
    placed = []
    for text, box in zip(texts, boxes, strict=True):
        ys = [float(p[1]) for p in box]
        xs = [float(p[0]) for p in box]
        placed.append(((min(ys) + max(ys)) / 2, max(ys) - min(ys), min(xs), text))
    placed.sort()
    lines: list[list[tuple[float, str]]] = []
    last_middle, last_height = -1e9, 0.0
    for middle, height, left, text in placed:
        if lines and abs(middle - last_middle) <= max(height, last_height) / 2:
            lines[-1].append((left, text))
        else:
            lines.append([(left, text)])
            last_middle, last_height = middle, height
    return [" ".join(text for _, text in sorted(line)) for line in lines]
