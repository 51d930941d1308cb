"""A PDF read in one pass (issue 35 §6): each page interpreted once, by pdfplumber, its form
check and its text made from that one layout; the pages the same, to the byte, as the two
readings of markitdown's libraries (pdfplumber's form check, pdfminer's text of each page)
on real PDFs made here: a form page, page labels, text in a figure, turned text, a page
whose box does not start at 0."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pdfplumber
import pytest
from markitdown.converters._pdf_converter import (
    _extract_form_content_from_words,
    _merge_partial_numbering_lines,
)
from pdfminer.high_level import extract_text
from pdfminer.pdfinterp import PDFPageInterpreter

from cofferd.infrastructure.conversion import pdf_pages
from tests.support.helpers import write
from tests.support.samples import paged_pdf

FORM_FIELDS = ("Name", "Date", "Amount", "Signed")


def raw_pdf(pages: list[tuple[str, str]], figure: bytes) -> bytes:
    """A PDF written by hand: each page (its /MediaBox, its content stream), one Form
    XObject (`figure`, named /X1) and Helvetica as /F1 on every page."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    font, form = 3, 4
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    objects.append(
        b"<< /Type /XObject /Subtype /Form /BBox [0 0 400 100] /Resources << /Font << /F1 3 0 R"
        b" >> >> /Length %d >>\nstream\n%s\nendstream" % (len(figure), figure)
    )
    kids = []
    for box, content in pages:
        data = content.encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(data), data))
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [%s] /Contents %d 0 R /Resources << /Font"
            b" << /F1 %d 0 R >> /XObject << /X1 %d 0 R >> >> >>"
            % (box.encode(), len(objects), font, form)
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(kids))
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (n, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.writelines(b"%010d 00000 n \n" % at for at in offsets)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def text_at(x: float, y: float, words: str, size: int = 11) -> str:
    return f"BT /F1 {size} Tf {x} {y} Td ({words}) Tj ET\n"


def odd_pdf() -> bytes:
    """Page 1: prose, a figure holding text, words turned a quarter, a form of four columns,
    on a page whose box starts at (30, 40). Page 2: prose on an ordinary box. Page 3: blank."""
    form = "".join(
        text_at(60 + col * 120, 420 - row * 14, f"{field}{row}")
        for row in range(8)
        for col, field in enumerate(FORM_FIELDS)
    )
    first = (
        text_at(60, 760, "A first page with prose above its form, zqprose.")
        + "q 1 0 0 1 60 600 cm /X1 Do Q\n"
        + "q 0 1 -1 0 560 300 cm "
        + text_at(0, 0, "Turned words zqturned")
        + "Q\n"
        + form
    )
    second = "".join(
        text_at(60, 760 - 14 * n, f"Line {n} of the second page, zqsecond and more words.")
        for n in range(20)
    )
    figure = text_at(5, 50, "Words inside a figure, zqfigure.", 10).encode()
    return raw_pdf([("30 40 642 832", first), ("0 0 612 792", second), ("0 0 612 792", "")], figure)


def shapes(tmp_path: Path) -> list[Path]:
    texts = [f"Page {n} zqpage{n}. " + "Words of prose on this page. " * 12 for n in range(5)]
    return [
        write(tmp_path / "odd.pdf", odd_pdf()),
        write(tmp_path / "form.pdf", paged_pdf(texts, form_on=1)),
        write(tmp_path / "labels.pdf", paged_pdf(texts, form_on=3, labels=True)),
        write(tmp_path / "prose.pdf", paged_pdf(texts)),
    ]


def two_readings(path: Path) -> list[tuple[str | None, str]]:
    """What the converter read before: pdfplumber's form check of every page, then
    pdfminer's text of each page that is no form (as pdfminer.high_level writes it)."""
    with pdfplumber.open(path) as pdf:
        forms = [_extract_form_content_from_words(page) for page in pdf.pages]
        labels = [page.page_obj.label for page in pdf.pages]
    pages = []
    for n, (label, form) in enumerate(zip(labels, forms, strict=True)):
        if form is not None:
            pages.append((label, form.strip()))
        else:
            text = extract_text(path, page_numbers=[n]).replace("\x0c", "\n")
            pages.append((label, _merge_partial_numbering_lines(text.strip())))
    return pages


def test_the_pages_are_the_two_readings_to_the_byte(tmp_path: Path) -> None:
    for path in shapes(tmp_path):
        pages = [(page.label, page.text) for page in pdf_pages.read_pages(path)]
        assert pages == two_readings(path), path.name
    odd = pdf_pages.read_pages(tmp_path / "odd.pdf")
    assert "| Name0 | Date0 |" in odd[0].text  # the form page is markitdown's table
    assert "zqprose" in odd[0].text and "zqfigure" in odd[0].text
    assert "zqsecond" in odd[1].text and odd[2].text == ""
    labelled = pdf_pages.read_pages(tmp_path / "labels.pdf")
    assert [p.label for p in labelled] == ["i", "ii", "1", "2", "3"]
    assert "| Name" in labelled[3].text


def test_each_page_is_interpreted_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    interpreted: list[Any] = []
    real = PDFPageInterpreter.process_page

    def counted(self: PDFPageInterpreter, page: Any) -> None:
        interpreted.append(page)
        real(self, page)

    monkeypatch.setattr(PDFPageInterpreter, "process_page", counted)
    for path in shapes(tmp_path):
        interpreted.clear()
        pages = pdf_pages.read_pages(path)
        assert len(interpreted) == len(pages), path.name


def test_the_form_check_reads_pdfplumbers_own_characters(tmp_path: Path) -> None:
    """The light characters the form check reads hold pdfplumber's values, in its order:
    in a figure, turned, on a box that does not start at 0."""
    keys = ("text", "x0", "x1", "top", "bottom", "doctop", "upright", "size")
    for path in shapes(tmp_path):
        with pdfplumber.open(path) as pdf:
            for page in pdf.pages:
                light = pdf_pages._WordsOfPage(page, page.layout).chars()
                assert all(tuple(c) == keys for c in light)
                assert light == [{k: c[k] for k in keys} for c in page.chars], path.name
    with pdfplumber.open(tmp_path / "odd.pdf") as pdf:
        chars = pdf_pages._WordsOfPage(pdf.pages[0], pdf.pages[0].layout).chars()
    assert {c["upright"] for c in chars} == {True, False}
    assert min(c["x0"] for c in chars) > 30  # the box's left edge is added, as pdfplumber does
