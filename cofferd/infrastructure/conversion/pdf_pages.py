"""A PDF's text page by page, each page under its own label, as its reader reads it.

PDFium (pypdfium2) reads each page: its text with the spaces a reader sees, its lines in
reading order, columns one after the other (pdf_lines); a table only where the page draws
one (pdf_tables: pdfplumber's table finder, only for a page whose paths rule a grid). A word
PDFium finds cut by a hyphen at a line's end comes out as `cut-` / `word` on two lines,
as printed, for text_cleanup to join where the document spells it whole elsewhere (which
also drops the running headers and footers but once). A page with no text layer (a scan)
is empty here: scanned_pages reads it by OCR. Runs in the converter's process only, one
page held at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cofferd.infrastructure.conversion import pdf_lines, pdf_tables


@dataclass(frozen=True, slots=True)
class PdfPage:
    label: str | None  # the document's own label for it ("iv", "A-3"), when it has one
    text: str


def read_pages(path: Path) -> list[PdfPage]:
    """Every page of the PDF at `path`, in order, empty ones included."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(path)
    try:
        pages = []
        for number in range(len(document)):
            page = document[number]
            try:
                text = _text_of(page)
            finally:
                page.close()
            pages.append(PdfPage(document.get_page_label(number), text))
        return pages
    finally:
        document.close()


def _text_of(page: Any) -> str:
    text_page = page.get_textpage()
    try:
        text = pdf_lines.page_text(text_page, pdf_tables.drawn_tables(page, text_page))
    finally:
        text_page.close()
    return text.replace(pdf_lines.HYPHEN_MARK, "-\n")
