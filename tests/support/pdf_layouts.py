"""PDFs laid out as real ones are (fpdf2), for what a reader sees of them: justified prose
in two columns written row by row (both columns' lines at one height in a row, as some
generators write them), a table drawn with ruled cells among prose, running headers and
footers, words cut by a hyphen at a line's end. Used by tests/unit/test_pdf_pages.py and
bench/studies/pdf_text.py."""

from __future__ import annotations

from fpdf import FPDF

_SENTENCE = (
    "reading order matters when a passage runs down one column and then continues at the"
    " top of the next so search must follow the columns the way a reader does without"
    " mixing their lines together into nonsense that nobody ever wrote"
)
WORDS = tuple(_SENTENCE.split(" "))


def prose(words: int, seed: int = 0) -> str:
    return " ".join(WORDS[(seed + n) % len(WORDS)] for n in range(words))


def _lines(text: str, pdf: FPDF, width: float) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        if lines and pdf.get_string_width(lines[-1] + " " + word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def two_columns(left: str, right: str, title: str = "") -> bytes:
    """One page: a title across it, then `left` and `right` as justified columns, their
    lines written row by row (left line, right line, next row)."""
    pdf = FPDF()
    pdf.set_auto_page_break(False)
    pdf.add_page()
    if title:
        pdf.set_font("helvetica", "B", 14)
        pdf.text(15, 20, title)
    pdf.set_font("helvetica", size=10)
    width = 85.0
    left_lines, right_lines = _lines(left, pdf, width), _lines(right, pdf, width)
    for row in range(max(len(left_lines), len(right_lines))):
        y = 35 + row * 5
        for x, lines in ((15.0, left_lines), (110.0, right_lines)):
            if row < len(lines):
                _justified(pdf, x, y, width, lines[row], last=row == len(lines) - 1)
    return bytes(pdf.output())


def _justified(pdf: FPDF, x: float, y: float, width: float, line: str, *, last: bool) -> None:
    """Each word placed on its own, the gaps between them stretched to fill the width (no
    space character written: a reader sees the spaces in the gaps)."""
    words = line.split()
    widths = [pdf.get_string_width(word) for word in words]
    gap = pdf.get_string_width(" ")
    if not last and len(words) > 1:
        gap = (width - sum(widths)) / (len(words) - 1)
    for word, size in zip(words, widths, strict=True):
        pdf.text(x, y, word)
        x += size + gap


def drawn_table(rows: list[tuple[str, ...]], before: str, after: str) -> bytes:
    """One page: prose, a table whose every cell is ruled, prose."""
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=10)
    pdf.multi_cell(0, 5, before, align="J")
    pdf.ln(4)
    with pdf.table() as table:
        for cells in rows:
            row = table.row()
            for cell in cells:
                row.cell(cell)
    pdf.ln(4)
    pdf.multi_cell(0, 5, after, align="J")
    return bytes(pdf.output())


def running_lines(bodies: list[str], header: str, footer: str) -> bytes:
    """A page for each body, `header` above it and `footer` ("{n}": the page's number)
    below it on every page."""
    pdf = FPDF()
    pdf.set_auto_page_break(False)
    for n, body in enumerate(bodies, 1):
        pdf.add_page()
        pdf.set_font("helvetica", "I", 9)
        pdf.text(15, 12, header)
        pdf.text(100, 285, footer.format(n=n))
        pdf.set_font("helvetica", size=11)
        pdf.set_xy(15, 25)
        pdf.multi_cell(0, 6, body, align="J")
    return bytes(pdf.output())


def lines_as_given(lines: list[str]) -> bytes:
    """One page holding exactly these lines, one below the other (a line may end `cut-`)."""
    pdf = FPDF()
    pdf.set_auto_page_break(False)
    pdf.add_page()
    pdf.set_font("helvetica", size=11)
    for n, line in enumerate(lines):
        pdf.text(20, 30 + n * 6, line)
    return bytes(pdf.output())


def many_pages(count: int, line: str = "zqmany words on a page") -> bytes:
    """`count` pages written by hand, all showing one content stream (one line of
    Helvetica): a PDF of 10,000 pages in a few hundred kilobytes, made at once."""
    content = f"BT /F1 11 Tf 60 700 Td ({line}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
    ]
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
    page += b" /Resources << /Font << /F1 3 0 R >> >> >>"
    objects += [page] * count
    kids = b" ".join(b"%d 0 R" % n for n in range(5, 5 + count))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, count)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (n, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % at for at in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)
