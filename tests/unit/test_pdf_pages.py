"""A PDF read as its reader reads it (issue 44): PDFium's text of each page, with the
spaces a reader sees, columns in order, words cut at a line's end joined where the
document spells them whole, running headers and footers once, a table only where the page
draws one. Real PDFs made here (by hand, and by fpdf2: tests/support/pdf_layouts), read by
the real converter's code in process (markitdown_run.convert).

Before issue 44 these tests held the pages to the byte to markitdown's two readings
(pdfplumber's form check, pdfminer's text): that reading was the bug (prose made into
tables, words run together), so the expectations now say what a reader sees."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path
from typing import Any

import pytest

from cofferd.infrastructure.conversion import markitdown_run, pdf_pages
from tests.support import pdf_layouts
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


def converted(path: Path) -> str:
    """The Markdown the converter keeps of the PDF, made as its process makes it."""
    made = markitdown_run.convert(markitdown_run.Engine(), str(path), "pdf")
    assert not isinstance(made, tuple), made
    return made.markdown


def page_texts(markdown: str) -> list[str]:
    return re.split(r"^## Page [^\n]*\n", markdown, flags=re.M)[1:]


def test_odd_pages_are_read_and_a_printed_form_is_rows_not_a_table(tmp_path: Path) -> None:
    """Text in a figure, turned, on a box that does not start at 0; a form's fields (text
    in four columns, no lines drawn) read row by row: markitdown's form check made them a
    Markdown table, and did so of justified prose too (the bug of issue 44)."""
    shapes(tmp_path)
    odd = pdf_pages.read_pages(tmp_path / "odd.pdf")
    assert "zqprose" in odd[0].text and "zqfigure" in odd[0].text
    assert "zqturned" in odd[0].text
    assert "Name0 Date0 Amount0 Signed0" in odd[0].text and "|" not in odd[0].text
    assert "zqsecond" in odd[1].text and odd[2].text == ""
    form = pdf_pages.read_pages(tmp_path / "form.pdf")
    assert "Name3 Date3 Amount3 Signed3" in form[1].text and "|" not in form[1].text
    labelled = pdf_pages.read_pages(tmp_path / "labels.pdf")
    assert [p.label for p in labelled] == ["i", "ii", "1", "2", "3"]
    assert [p.text.split()[:2] for p in labelled] == [["Page", f"{n}"] for n in range(5)]


def test_spaces_are_where_the_reader_sees_them(tmp_path: Path) -> None:
    """Justified lines whose words are placed one by one (no space character in the
    page): each word apart, as printed."""
    left, right = pdf_layouts.prose(160, 0), pdf_layouts.prose(160, 7)
    path = write(tmp_path / "justified.pdf", pdf_layouts.two_columns(left, right))
    (page,) = pdf_pages.read_pages(path)
    assert page.text.split() == left.split() + right.split()
    assert max(len(word) for word in page.text.split()) <= max(map(len, pdf_layouts.WORDS))


def test_two_columns_read_one_after_the_other(tmp_path: Path) -> None:
    """Two columns written row by row (left line, right line): the title, the whole left
    column, then the right one."""
    left = "zqleftstart " + pdf_layouts.prose(150, 3) + " zqleftend"
    right = "zqrightstart " + pdf_layouts.prose(150, 9) + " zqrightend"
    path = write(tmp_path / "columns.pdf", pdf_layouts.two_columns(left, right, "Zqtitle Here"))
    words = pdf_pages.read_pages(path)[0].text.split()
    assert words == ["Zqtitle", "Here", *left.split(), *right.split()]


def test_a_word_cut_at_a_lines_end_is_joined_only_where_it_is_whole_elsewhere(
    tmp_path: Path,
) -> None:
    lines = [
        "an example of a zqword that the page cuts: the exam-",
        "ple goes on, and a zqcom-",
        "pound spelled nowhere else keeps its hyphen.",
    ]
    text = converted(write(tmp_path / "cut.pdf", pdf_layouts.lines_as_given(lines)))
    assert "the example goes on" in " ".join(text.split())
    assert "zqcom-\npound" in text and "zqcompound" not in text


def test_running_headers_and_footers_are_kept_once(tmp_path: Path) -> None:
    bodies = [f"Body of page {n}, zqbody{n}. " + pdf_layouts.prose(60, n) for n in range(6)]
    made = pdf_layouts.running_lines(bodies, "Zqjournal of Running Lines, vol. 3", "Page {n} of 6")
    pages = page_texts(converted(write(tmp_path / "running.pdf", made)))
    assert len(pages) == 6
    assert "Zqjournal" in pages[0] and "Page 1 of 6" in pages[0]
    assert all("Zqjournal" not in page and " of 6" not in page for page in pages[1:])
    assert all(f"zqbody{n}" in page for n, page in enumerate(pages))


def test_a_drawn_table_is_a_table_and_prose_in_columns_is_not(tmp_path: Path) -> None:
    rows = [("Name", "Age", "City"), ("Zqalice", "30", "Paris"), ("Bob", "41", "Rome")]
    before = pdf_layouts.prose(80, 1) + " zqbefore"
    after = "zqafter " + pdf_layouts.prose(80, 2)
    table = pdf_pages.read_pages(
        write(tmp_path / "t.pdf", pdf_layouts.drawn_table(rows, before, after))
    )
    text = table[0].text
    assert "| Name | Age | City |\n| --- | --- | --- |\n| Zqalice | 30 | Paris |" in text
    assert text.index("zqbefore") < text.index("| Name") < text.index("zqafter")
    assert text.count("|") == 16  # the table's, nothing else
    columns = pdf_layouts.two_columns(pdf_layouts.prose(150), pdf_layouts.prose(150, 4))
    (prose,) = pdf_pages.read_pages(write(tmp_path / "c.pdf", columns))
    assert "|" not in prose.text


def test_tables_are_looked_for_only_on_pages_that_draw_a_grid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PDFium's page objects say which pages rule a grid; only those go to pdfplumber's
    table finder, given the paths' edges (pdfplumber never parses the PDF: its reading of
    one page cost more than PDFium's of a whole book)."""
    import pdfplumber
    import pdfplumber.table

    found: list[Any] = []
    real = pdfplumber.table.TableFinder

    def counted(page: Any, settings: Any = None) -> Any:
        found.append(page)
        return real(page, settings)

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pdfplumber parsed the PDF")

    monkeypatch.setattr(pdfplumber.table, "TableFinder", counted)
    monkeypatch.setattr(pdfplumber, "open", never)
    for path in shapes(tmp_path):
        pdf_pages.read_pages(path)
    columns = pdf_layouts.two_columns(pdf_layouts.prose(150), pdf_layouts.prose(150, 4))
    pdf_pages.read_pages(write(tmp_path / "c.pdf", columns))
    assert found == []
    rows = [("a", "b"), ("c", "d")]
    (page,) = pdf_pages.read_pages(
        write(tmp_path / "t.pdf", pdf_layouts.drawn_table(rows, "x", "y"))
    )
    assert len(found) == 1 and "| a | b |" in page.text


def test_ten_thousand_pages_are_read_in_bounded_time(tmp_path: Path) -> None:
    """A hostile page count: PDFium reads page after page, one held at a time."""
    path = write(tmp_path / "many.pdf", pdf_layouts.many_pages(10_000))
    started = time.monotonic()
    made = markitdown_run.convert(markitdown_run.Engine(), str(path), "pdf")
    assert time.monotonic() - started < 30  # ~2 s here; the converter stops one at 60 s
    assert not isinstance(made, tuple), made
    assert made.pages == 10_000 and "## Page 10000\n" in made.markdown
    assert made.markdown.count("zqmany") == 1  # the same line on every page: kept once


def test_a_page_of_scattered_words_is_read_in_bounded_time(tmp_path: Path) -> None:
    """Words placed in a staircase (every gap between them a gutter to try) and a page of
    more runs than are ordered: each read at once, every word kept."""
    stairs = "".join(text_at(10 + (n % 120) * 4.5, 780 - n * 0.4, f"w{n}", 4) for n in range(1900))
    crowd = "".join(
        text_at(10 + (n % 60) * 9, 780 - (n // 60) * 5, f"c{n}", 4) for n in range(9000)
    )
    path = write(
        tmp_path / "scattered.pdf", raw_pdf([("0 0 612 792", stairs), ("0 0 612 792", crowd)], b"")
    )
    started = time.monotonic()
    pages = pdf_pages.read_pages(path)
    assert time.monotonic() - started < 10
    assert len(set(re.findall(r"w\d+", pages[0].text))) == 1900  # overlapping: some run on
    assert len(set(re.findall(r"c\d+", pages[1].text))) == 9000


def test_a_pages_text_made_character_by_character_is_pdfiums_own(tmp_path: Path) -> None:
    """What a page whose PDFium text leaves characters out is cut from (one character for
    each of PDFium's): the same text as PDFium's where nothing is left out."""
    import pypdfium2 as pdfium

    from cofferd.infrastructure.conversion import pdf_lines

    lines = ["a first line that ends in a cut word: exam-", "ple, and more words"] * 3
    paths = [*shapes(tmp_path), write(tmp_path / "cut.pdf", pdf_layouts.lines_as_given(lines))]
    for path in paths:
        document = pdfium.PdfDocument(path)
        for number in range(len(document)):
            page = document[number]
            text_page = page.get_textpage()
            made = pdf_lines._character_by_character(text_page, text_page.count_chars())
            assert made == text_page.get_text_range(), (path.name, number)
            text_page.close()
            page.close()
        document.close()
