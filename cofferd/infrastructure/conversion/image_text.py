"""An image file (png, jpg, webp) as a document, in the converter's process: its pixels
opened within the budget (image_pixels), read by OCR (ocr_engine), kept as one page whose
mark says OCR read it (`## Page 1 (OCR)`: search says "page 1 (OCR)"). A KB indexes
images only when its `index_formats` lists them (domain.formats).
"""

from __future__ import annotations

from pathlib import Path

from cofferd.domain.index_records import Converted
from cofferd.infrastructure.conversion import derived_markdown, image_pixels, ocr_engine
from cofferd.infrastructure.conversion.scanned_pages import ocr_label

ENGINE = "rapidocr"
TOO_MUCH_MEMORY = "too large: the image needs more memory than allowed"


def convert(path: Path, fmt: str) -> Converted | tuple[str, str]:
    """The image's text as a converted document, or ("refused", why): OCR not installed,
    a bomb, an image too large or damaged, no text in it."""
    try:
        if not ocr_engine.available():
            return ("refused", ocr_engine.MISSING)
        image = image_pixels.open_bounded(path)
        text = ocr_engine.ocr_page(image)
        return derived_markdown.from_image(text, fmt, ocr_label(None, 1), None, ENGINE)
    except (image_pixels.ImageRefused, derived_markdown.Refused, ocr_engine.OcrMissing) as why:
        return ("refused", str(why))
    except MemoryError:
        return ("refused", TOO_MUCH_MEMORY)
