"""The pages of a PDF that have no text layer, read by OCR (ocr_engine) in the converter's
process: each is rendered by PDFium (pypdfium2) at RENDER_DPI, within image_pixels'
working size, and its label says so ("3 (OCR)": search and grep say "page 3 (OCR)").

A blank page costs a render and no OCR. OCR has OCR_BUDGET_S of a document's time: the
pages past it stay empty (the rest of the document is indexed, not timed out).
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from cofferd.infrastructure.conversion import image_pixels, ocr_engine
from cofferd.infrastructure.conversion.pdf_pages import PdfPage

if TYPE_CHECKING:
    from PIL.Image import Image

log = logging.getLogger(__name__)

OCR_MARK = "(OCR)"
RENDER_DPI = 200
OCR_BUDGET_S = 40.0  # of the converter's 60 s a document
BLANK_RANGE = 24  # a page whose grey levels span less than this holds no text
_LETTER = re.compile(r"[^\W_]")


def ocr_label(label: str | None, number: int) -> str:
    """A page's label with the mark that OCR read it."""
    return f"{label or number} {OCR_MARK}"


def with_ocr(path: Path, pages: list[PdfPage], budget_s: float = OCR_BUDGET_S) -> list[PdfPage]:
    """`pages` with each page that has no letter read by OCR (when it is installed)."""
    empty = [n for n, page in enumerate(pages) if not _LETTER.search(page.text)]
    if not empty or not ocr_engine.available():
        return pages
    import pypdfium2

    read = list(pages)
    deadline = time.monotonic() + budget_s
    document = pypdfium2.PdfDocument(str(path))
    try:
        for n in empty:
            if n >= len(document):
                break
            if time.monotonic() > deadline:
                log.info("%s: OCR stopped at page %d of %d (time)", path.name, n + 1, len(pages))
                break
            text = ocr_engine.ocr_page(image) if (image := _rendered(document[n])) else ""
            if _LETTER.search(text):
                read[n] = PdfPage(ocr_label(pages[n].label, n + 1), text)
    finally:
        document.close()
    return read


def _rendered(page: object) -> Image | None:
    """The page as pixels at RENDER_DPI (fewer for a page larger than the working size),
    or None when it is blank."""
    width, height = page.get_size()  # type: ignore[attr-defined]  # points
    scale = RENDER_DPI / 72
    if width * height * scale * scale > image_pixels.WORK_PIXELS:
        scale = (image_pixels.WORK_PIXELS / max(1.0, width * height)) ** 0.5
    image: Image = page.render(scale=scale, grayscale=True).to_pil()  # type: ignore[attr-defined]
    low, high = image.getextrema()  # one band: grey
    if float(high) - float(low) < BLANK_RANGE:  # type: ignore[arg-type]
        return None
    return image
