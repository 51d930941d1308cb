"""A PDF's text page by page, with each page's own label, the way markitdown reads it.

markitdown (0.1.x) looks at every page with pdfplumber for form-like content (words in
columns); when one page has some, it joins every page's text with blank lines, else it
takes pdfminer's text of the whole document; either way the pages are lost. Here the same
libraries read the same text, one page at a time: a form page is markitdown's Markdown of
its form, any other page pdfminer's text of it (the text markitdown prefers for prose).
That is two passes over the document, as markitdown's own (and one text less per page:
pdfplumber's text of a prose page is never made). Runs in the converter's process only.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

from pdfminer.converter import TextConverter
from pdfminer.layout import LAParams
from pdfminer.pdfdocument import PDFDocument, PDFNoPageLabels
from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
from pdfminer.pdfpage import PDFPage
from pdfminer.pdfparser import PDFParser

log = logging.getLogger(__name__)

PAGE_BREAK = "\x0c"  # pdfminer's, after each page


@dataclass(frozen=True, slots=True)
class PdfPage:
    label: str | None  # the document's own label for it ("iv", "A-3"), when it has one
    text: str


def read_pages(path: Path) -> list[PdfPage]:
    """Every page of the PDF at `path`, in order, empty ones included."""
    forms = _form_pages(path)
    pages = []
    with path.open("rb") as fh:
        for n, (label, text) in enumerate(_pdfminer_pages(fh)):
            form = forms.get(n)
            pages.append(PdfPage(label, form if form is not None else _merged(text)))
    return pages


def _form_pages(path: Path) -> dict[int, str]:
    """markitdown's Markdown of each page that looks like a form, by page index. A PDF
    pdfplumber cannot read has none (markitdown then reads it with pdfminer alone)."""
    import pdfplumber
    from markitdown.converters._pdf_converter import _extract_form_content_from_words

    forms: dict[int, str] = {}
    try:
        with pdfplumber.open(path) as pdf:
            for n, page in enumerate(pdf.pages):
                content = _extract_form_content_from_words(page)
                page.close()  # its characters go at once: memory stays flat
                if content is not None:
                    forms[n] = content.strip()
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - as markitdown: pdfminer reads it alone
        log.debug("pdfplumber cannot read %s: %s", path.name, exc)
        return {}
    return forms


def _merged(text: str) -> str:
    from markitdown.converters._pdf_converter import _merge_partial_numbering_lines

    return str(_merge_partial_numbering_lines(text.strip()))


class _Document(PDFDocument):
    """A PDFDocument whose broken page labels (a roman numeral past 3999, a style that
    is no style, a tree that lies) end its labels, not the reading of its pages."""

    def get_page_labels(self) -> Iterator[str]:
        try:
            labels = super().get_page_labels()
        except PDFNoPageLabels:
            raise
        except Exception as exc:  # noqa: BLE001 - a hostile /PageLabels: numbers instead
            log.debug("unreadable page labels: %s", exc)
            return itertools.repeat("")
        return _until_broken(labels)


def _until_broken(labels: Iterator[str]) -> Iterator[str]:
    """The labels up to the first that cannot be made, then none ("": the page's number)."""
    try:
        yield from labels
    except Exception as exc:  # noqa: BLE001 - as above
        log.debug("page labels end early: %s", exc)
    yield from itertools.repeat("")


def _pdfminer_pages(fh: Any) -> Iterator[tuple[str | None, str]]:
    """(label, text) of each page: what pdfminer.high_level.extract_text writes of it."""
    document = _Document(PDFParser(fh))
    resources = PDFResourceManager(caching=True)
    with StringIO() as out:
        device = TextConverter(resources, out, codec="utf-8", laparams=LAParams())
        interpreter = PDFPageInterpreter(resources, device)
        for page in PDFPage.create_pages(document):
            interpreter.process_page(page)
            text = out.getvalue()
            out.seek(0)
            out.truncate()
            yield page.label, text.replace(PAGE_BREAK, "\n")
