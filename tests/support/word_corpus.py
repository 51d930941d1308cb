"""Word files of many shapes, made by python-docx (tests/test_word_corpus, bench.studies.word_rate):
headings, lists, tables, an image, footnotes, comments, hyperlinks, non-ASCII text; each
may carry styles of its own (a style added, as real files each carry their own styles.xml)."""

from __future__ import annotations

import contextlib
import io
import zipfile
from collections.abc import Iterator

import docx
from docx.enum.style import WD_STYLE_TYPE
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Pt
from PIL import Image

FOOTNOTES_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml"
FOOTNOTES_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/footnotes"
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def png(color: tuple[int, int, int]) -> io.BytesIO:
    out = io.BytesIO()
    Image.new("RGB", (4, 3), color).save(out, format="PNG")
    out.seek(0)
    return out


def hyperlink(paragraph: object, url: str, text: str) -> None:
    part = paragraph.part  # type: ignore[attr-defined]
    rel = part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rel)
    run = OxmlElement("w:r")
    words = OxmlElement("w:t")
    words.text = text
    run.append(words)
    link.append(run)
    paragraph._p.append(link)  # type: ignore[attr-defined]


def varied_docx(n: int, *, own_styles: bool = True) -> bytes:
    """The n-th Word file of the corpus: every shape above, its words and sizes varied by
    n, and with `own_styles` a style of its own (so its styles.xml is its alone)."""
    made = docx.Document()
    if own_styles:
        style = made.styles.add_style(f"Corpus Style {n}", WD_STYLE_TYPE.PARAGRAPH)
        style.font.size = Pt(9 + n % 5)
    made.core_properties.title = f"Corpus file {n}"
    made.add_heading(f"Rapport {n} — Résumé 概要 {'Ω' * (n % 3)}", 1)
    para = made.add_paragraph(f"Plain words {n}, ")
    para.add_run("bold").bold = True
    para.add_run(" and italic").italic = True
    para.add_run(" £ € ü ß 日本語 العربية").font.size = Pt(8)
    hyperlink(para, f"https://example.org/doc/{n}?q=a&b=c", f"a link {n}")
    for level in range(1 + n % 3):
        made.add_heading(f"Section {level} of {n}", 2 + level)
        made.add_paragraph(f"point {level} of {n}", style="List Bullet")
        made.add_paragraph(f"step {level} of {n}", style="List Number")
        made.add_paragraph(f"nested {level}", style="List Bullet 2")
    table = made.add_table(rows=2 + n % 3, cols=3)
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            cell.text = f"cell {r}{c} 表 | pipe" if (r + c) % 2 else f"{n * r + c}"
    made.add_picture(png((n * 37 % 256, 90, 160)))
    made.add_paragraph("tab\tand\u00a0no-break space, <angle> & ampersand *stars* _under_")
    if own_styles:
        made.add_paragraph(f"in a style of its own {n}", style=f"Corpus Style {n}")
    made.add_comment(made.paragraphs[1].runs[0], text=f"a reviewer's note {n}", author="R")
    made.add_paragraph(f"A sentence with a footnote {n}.")
    out = io.BytesIO()
    made.save(out)
    return with_footnote(out.getvalue(), f"The footnote's own words {n}, ½.")


def with_footnote(data: bytes, words: str) -> bytes:
    """`data` with a footnote after its last paragraph's text (python-docx writes none)."""
    footnotes = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:footnotes xmlns:w="{W}">'
        '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p>'
        '</w:footnote><w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r>'
        '<w:continuationSeparator/></w:r></w:p></w:footnote><w:footnote w:id="1"><w:p><w:r>'
        f"<w:t>{words}</w:t></w:r></w:p></w:footnote></w:footnotes>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            part = zin.read(info.filename)
            if info.filename == "[Content_Types].xml":
                part = part.replace(
                    b"</Types>",
                    f'<Override PartName="/word/footnotes.xml" ContentType="{FOOTNOTES_TYPE}"/>'
                    "</Types>".encode(),
                )
            elif info.filename == "word/_rels/document.xml.rels":
                part = part.replace(
                    b"</Relationships>",
                    f'<Relationship Id="rIdFoot1" Type="{FOOTNOTES_REL}" Target="footnotes.xml"/>'
                    "</Relationships>".encode(),
                )
            elif info.filename == "word/document.xml":
                last = part.rindex(b"</w:p>")
                note = b'<w:r><w:footnoteReference w:id="1"/></w:r>'
                part = part[:last] + note + part[last:]
            zout.writestr(info, part)
        zout.writestr("word/footnotes.xml", footnotes)
    return out.getvalue()


def styles_of(data: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return z.read("word/styles.xml")


@contextlib.contextmanager
def mammoths_own_parser() -> Iterator[None]:
    """mammoth as markitdown ships it: every part parsed by its minidom reader (what the
    converter did before word_xml), for comparison."""
    from mammoth.docx import office_xml, xmlparser

    ours = office_xml.parse_xml
    office_xml.parse_xml = xmlparser.parse_xml
    try:
        yield
    finally:
        office_xml.parse_xml = ours
