"""The pages of a PDF that have no text layer, read by OCR (ocr_engine) in the converter's
process: each is rendered by PDFium (pypdfium2) at RENDER_DPI, within image_pixels'
working size, and its label says so ("3 (OCR)": search and grep say "page 3 (OCR)").

A blank page costs a render and no OCR. OCR's time grows with the pages it has to read:
OCR_BASE_S, and OCR_PAGE_S more for each such page, up to OCR_CEILING_S (the converter
gives a PDF that much more than its TIMEOUT_S when OCR is installed: converter.py). The
pages past it are not read, and the document says which (`Scanned.unread`: "pages 41-100
not read: OCR time budget"); the rest of the document is indexed, not timed out.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cofferd.infrastructure.conversion import image_pixels, ocr_engine
from cofferd.infrastructure.conversion.pdf_pages import PdfPage

if TYPE_CHECKING:
    from PIL.Image import Image

log = logging.getLogger(__name__)

OCR_MARK = "(OCR)"
RENDER_DPI = 200
OCR_BASE_S = 40.0  # what a scan of one or two pages has, on a loaded machine too
OCR_PAGE_S = 3.0  # and more for each page to read (~1.5-3 CPU-s a page measured)
OCR_CEILING_S = 240.0  # at most, whatever the pages (a 10,000-page scan stays bounded)
SPARE_S = 15.0  # of a PDF's time, kept for a page under way and the text's making
UNREAD = "not read: OCR time budget"
BLANK_RANGE = 24  # a page whose grey levels span less than this holds no text
_LETTER = re.compile(r"[^\W_]")


@dataclass(frozen=True)
class Scanned:
    """A PDF's pages with those OCR read, and which it left unread for time, as a
    sentence ("" when none)."""

    pages: list[PdfPage]
    unread: str = ""


def ocr_label(label: str | None, number: int) -> str:
    """A page's label with the mark that OCR read it."""
    return f"{label or number} {OCR_MARK}"


def budget_s(pages: int) -> float:
    """OCR's time for a PDF with `pages` pages to read."""
    return min(OCR_CEILING_S, OCR_BASE_S + OCR_PAGE_S * pages)


def with_ocr(path: Path, pages: list[PdfPage], until: float | None = None) -> Scanned:
    """`pages` with each page that has no letter read by OCR (when it is installed), the
    first one always, the others within budget_s of them and before `until`
    (time.monotonic(): the PDF's own end)."""
    empty = [n for n, page in enumerate(pages) if not _LETTER.search(page.text)]
    if not empty or not ocr_engine.available():
        return Scanned(pages)
    import pypdfium2

    read = list(pages)
    deadline = time.monotonic() + budget_s(len(empty))
    if until is not None:
        deadline = min(deadline, until)
    document = pypdfium2.PdfDocument(str(path))
    try:
        for done, n in enumerate(empty):
            if n >= len(document):
                break
            if done and time.monotonic() > deadline:  # (the first page is always read)
                log.info("%s: OCR stopped at page %d of %d (time)", path.name, n + 1, len(pages))
                return Scanned(read, f"{numbered(empty[done:])} {UNREAD}")
            text = ocr_engine.ocr_page(image) if (image := _rendered(document[n])) else ""
            if _LETTER.search(text):
                read[n] = PdfPage(ocr_label(pages[n].label, n + 1), text)
    finally:
        document.close()
    return Scanned(read)


def numbered(indexes: list[int], most: int = 8) -> str:
    """Pages by their 0-based indexes as a reader counts them: "page 3", "pages 41-100",
    "pages 2, 5-9" (the first `most` runs, then "..." for the rest)."""
    runs: list[list[int]] = []
    for n in indexes:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    said = [f"{a + 1}" if a == b else f"{a + 1}-{b + 1}" for a, b in runs[:most]]
    more = ", ..." if len(runs) > most else ""
    return f"{'page' if len(indexes) == 1 else 'pages'} {', '.join(said)}{more}"


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
