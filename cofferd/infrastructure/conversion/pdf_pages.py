"""A PDF's text page by page, with each page's own label, the way markitdown reads it.

markitdown (0.1.x) looks at every page with pdfplumber for form-like content (words in
columns); when one page has some, it joins every page's text with blank lines, else it
takes pdfminer's text of the whole document; either way the pages are lost. Here the same
libraries read the same text, one page at a time: a form page is markitdown's Markdown of
its form, any other page pdfminer's text of it (the text markitdown prefers for prose).

Each page is interpreted once: pdfplumber's layout of it (pdfminer's objects, not yet
grouped) is what its form check reads, and a page that is no form has that same layout
grouped into lines and boxes and written as pdfminer's TextConverter writes it, the text
`pdfminer.high_level.extract_text` makes of the page. A PDF pdfplumber cannot read is read
by pdfminer alone, as markitdown does. Runs in the converter's process only.
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
from pdfminer.layout import LAParams, LTChar, LTContainer, LTPage
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
    try:
        return _read_once(path)
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - as markitdown: pdfminer reads it alone
        log.debug("pdfplumber cannot read %s: %s", path.name, exc)
    with path.open("rb") as fh:
        return [PdfPage(label, _merged(text)) for label, text in _pdfminer_pages(fh)]


def _read_once(path: Path) -> list[PdfPage]:
    """Each page interpreted once by pdfplumber: markitdown's Markdown of its form when it
    looks like one, else pdfminer's text of the same layout."""
    import pdfplumber
    from markitdown.converters._pdf_converter import _extract_form_content_from_words

    pages = []
    with pdfplumber.open(path) as pdf, StringIO() as out:
        text_of = _TextOfLayout(pdf.rsrcmgr, out)
        for page in pdf.pages:
            layout = page.layout
            form = _extract_form_content_from_words(_WordsOfPage(page, layout))
            text = form.strip() if form is not None else _merged(text_of(layout))
            pages.append(PdfPage(page.page_obj.label, text))
            page.close()  # its layout goes at once: memory stays flat
    return pages


class _WordsOfPage:
    """What markitdown's form check reads of a pdfplumber page (its width and its words),
    the words made from light characters: each with the keys pdfplumber's word extractor
    reads, valued as pdfplumber's own `page.chars` values them (tests/unit/test_pdf_pages.py
    compares both), without the dozen other keys pdfplumber resolves for every character
    (more than half of a page's time)."""

    def __init__(self, page: Any, layout: LTPage) -> None:
        self.width = page.width
        self.page = page
        self.layout = layout

    def extract_words(self, **settings: Any) -> list[dict[str, Any]]:
        from pdfplumber.utils.text import extract_words

        return list(extract_words(self.chars(), **settings))

    def chars(self) -> list[dict[str, Any]]:
        """As pdfplumber's Page.process_object makes them, in its order (figures' own
        characters where the figure is), before pdfminer groups the layout."""
        page = self.page
        height = page.height
        left, top_edge = page.mediabox[:2]
        doctop = page.initial_doctop
        chars = []
        for item in _layout_items(self.layout):
            if isinstance(item, LTChar):
                x0, x1 = (item.x0 + left, item.x1 + left) if left != 0 else (item.x0, item.x1)
                top = (height - item.y1) + top_edge
                chars.append(
                    {
                        "text": item.get_text(),
                        "x0": x0,
                        "x1": x1,
                        "top": top,
                        "bottom": (height - item.y0) + top_edge,
                        "doctop": doctop + top,
                        "upright": item.upright,
                        "size": item.size,
                    }
                )
        return chars


def _layout_items(layout: LTPage) -> Iterator[Any]:
    """Every item of a layout, a container's own items where it stands, without recursion."""
    stack: list[Iterator[Any]] = [iter(layout)]
    while stack:
        for item in stack[-1]:
            yield item
            if isinstance(item, LTContainer):
                stack.append(iter(item))
                break
        else:
            stack.pop()


class _TextOfLayout:
    """pdfminer's text of a page's layout, grouped with markitdown's (pdfminer's default)
    parameters and written by its TextConverter, as extract_text writes each page."""

    def __init__(self, resources: PDFResourceManager, out: StringIO) -> None:
        self.laparams = LAParams()
        self.out = out
        self.device = TextConverter(resources, out, codec="utf-8", laparams=self.laparams)

    def __call__(self, layout: LTPage) -> str:
        layout.analyze(self.laparams)
        self.device.receive_layout(layout)
        text = self.out.getvalue()
        self.out.seek(0)
        self.out.truncate()
        return text.replace(PAGE_BREAK, "\n")


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
