"""A PDF's text page by page, each page under its own label, as its reader reads it.

PDFium (pypdfium2) reads each page: its text with the spaces a reader sees, its lines in
reading order, columns one after the other (pdf_lines); a table only where the page draws
one (pdf_tables: pdfplumber is opened only for a page whose paths rule a grid). A word
PDFium finds cut by a hyphen at a line's end comes out as `cut-` / `word` on two lines,
as printed, for text_cleanup to join where the document spells it whole elsewhere (which
also drops the running headers and footers but once). A page with no text layer (a scan)
is read by `text_without_layer`, empty until OCR reads it. Runs in the converter's
process only, one page held at a time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cofferd.infrastructure.conversion import pdf_lines, pdf_tables

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PdfPage:
    label: str | None  # the document's own label for it ("iv", "A-3"), when it has one
    text: str


def read_pages(path: Path) -> list[PdfPage]:
    """Every page of the PDF at `path`, in order, empty ones included."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(path)
    tables = _Tables(path)
    try:
        pages = []
        for number in range(len(document)):
            page = document[number]
            try:
                text = _text_of(page, number, tables)
            finally:
                page.close()
            pages.append(PdfPage(document.get_page_label(number), text))
        return pages
    finally:
        tables.close()
        document.close()


def _text_of(page: Any, number: int, tables: _Tables) -> str:
    text_page = page.get_textpage()
    try:
        drawn = tables.on(page, number, text_page) if pdf_tables.may_hold_table(page) else []
        text = pdf_lines.page_text(text_page, drawn)
    finally:
        text_page.close()
    if not text.strip():
        return text_without_layer(page, number)
    return text.replace(pdf_lines.HYPHEN_MARK, "-\n")


def text_without_layer(page: Any, number: int) -> str:
    """The text of a page that has none to read (a scanned page, a picture of one): none
    for now; OCR, where it is on, reads the page (a pypdfium2 page) here."""
    del page, number
    return ""


class _Tables:
    """pdfplumber on the pages that may hold a table, opened at the first such page."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pdf: Any = None
        self.broken = False

    def on(self, page: Any, number: int, text_page: Any) -> list[tuple[pdf_lines.Box, str]]:
        if self.broken:
            return []
        try:
            if self.pdf is None:
                import pdfplumber

                self.pdf = pdfplumber.open(self.path)
            plumber_page = self.pdf.pages[number]
            try:
                return pdf_tables.drawn_tables(plumber_page, text_page)
            finally:
                plumber_page.close()
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - a PDF pdfplumber cannot read: text only
            log.debug("no tables read in %s: %s", self.path.name, exc)
            self.broken = True
            return []

    def close(self) -> None:
        if self.pdf is not None:
            self.pdf.close()
