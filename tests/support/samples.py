"""Real documents of every supported format, generated with the formats' own libraries."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable

import docx
import openpyxl
import pptx
from fpdf import FPDF

FORM_ROWS = 6  # the rows of the printed form paged_pdf puts on a page


def make_docx(text: str) -> bytes:
    document = docx.Document()
    document.add_heading("Quarterly report", level=1)
    document.add_paragraph(text)
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "region", "revenue"
    table.cell(1, 0).text, table.cell(1, 1).text = "north", "42"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_pptx(text: str) -> bytes:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Roadmap"
    slide.placeholders[1].text = text
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def make_xlsx(text: str) -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["item", "note"])
    for i in range(20):
        sheet.append([f"row {i}", text if i == 7 else f"note {i}"])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def make_pdf(text: str, pages: int = 1) -> bytes:
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for page in range(pages):
        pdf.add_page()
        pdf.multi_cell(0, 10, f"Page {page + 1}. {text}")
    return bytes(pdf.output())


def make_html(text: str) -> bytes:
    return f"<html><head><title>Web page</title></head><body><h1>Notes</h1><p>{text}</p></body></html>".encode()


def make_csv(text: str) -> bytes:
    return f"name,comment\nalpha,{text}\nbeta,plain\n".encode()


def make_json(text: str) -> bytes:
    return json.dumps({"title": "config", "comment": text, "values": [1, 2, 3]}).encode()


def make_xml(text: str) -> bytes:
    return f'<?xml version="1.0"?><root><item name="a">{text}</item></root>'.encode()


def make_epub(text: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
            '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
        )
        z.writestr(
            "OEBPS/content.opf",
            '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
            '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>A Book</dc:title>'
            '<dc:identifier id="id">book-1</dc:identifier><dc:language>en</dc:language></metadata>'
            '<manifest><item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/></manifest>'
            '<spine><itemref idref="c1"/></spine></package>',
        )
        z.writestr(
            "OEBPS/c1.xhtml",
            f'<html xmlns="http://www.w3.org/1999/xhtml"><body><h1>Chapter</h1><p>{text}</p></body></html>',
        )
    return out.getvalue()


def make_md(text: str) -> bytes:
    return f"# Plain markdown\n\n{text}\n".encode()


def make_txt(text: str) -> bytes:
    return f"{text}\n".encode()


def paged_pdf(
    texts: list[str], *, form_on: int | None = None, labels: bool = False, title: str = ""
) -> bytes:
    """A PDF with one text per page; on page `form_on` (from 0) a printed form below its
    text (labels in four columns, as a form's fields are laid out: what makes markitdown
    read every page with pdfplumber and join them with blank lines); with `labels`, the
    first two pages numbered i, ii and the rest 1, 2, ..."""
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    pdf.set_font("helvetica", size=11)
    for n, text in enumerate(texts):
        pdf.add_page()
        if labels and n == 0:
            pdf.set_page_label(label_style="r")
        if labels and n == 2:
            pdf.set_page_label(label_style="D", label_start=1)
        pdf.multi_cell(0, 6, text)
        if n == form_on:
            for row in range(FORM_ROWS):
                for col, field in enumerate(("Name", "Date", "Amount", "Signed")):
                    pdf.text(20 + col * 45, 150 + row * 10, f"{field}{row}")
    return bytes(pdf.output())


MAKERS: dict[str, Callable[[str], bytes]] = {
    "docx": make_docx,
    "pptx": make_pptx,
    "xlsx": make_xlsx,
    "pdf": make_pdf,
    "html": make_html,
    "csv": make_csv,
    "json": make_json,
    "xml": make_xml,
    "epub": make_epub,
    "md": make_md,
    "txt": make_txt,
}


def zip_bomb_docx(inflated_mb: int = 1024) -> bytes:
    """A docx whose document.xml inflates to `inflated_mb` MB (a few MB on disk)."""
    out = io.BytesIO()
    real = zipfile.ZipFile(io.BytesIO(make_docx("bomb")))
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for info in real.infolist():
            if info.filename != "word/document.xml":
                z.writestr(info, real.read(info))
        with z.open("word/document.xml", "w", force_zip64=True) as fh:
            block = b"<w:p>" + b"A" * (1024 * 1024 - 5)
            for _ in range(inflated_mb):
                fh.write(block)
    return out.getvalue()
