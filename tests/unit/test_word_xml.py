"""Word files read faster, the same (issue 35 §6): mammoth's XML parts parsed by
ElementTree into mammoth's own nodes (conversion/word_xml), and Office containers handed
to markitdown's converter of their format (markitdown_run). The trees are mammoth's to the
node and the Markdown is markitdown's to the byte, on real files made here; hostile parts
cost a loop, or are refused."""

from __future__ import annotations

import io
import time
import zipfile
from pathlib import Path

import docx
import pytest
from docx.shared import Pt
from mammoth.docx import office_xml, xmlparser

from cofferd.infrastructure.conversion import markitdown_run, word_xml
from tests.support.samples import make_epub, make_pptx, make_xlsx


def rich_docx() -> bytes:
    made = docx.Document()
    made.core_properties.title = "Rapport annuel"
    made.add_heading("Résumé — 概要", 1)
    para = made.add_paragraph("Plain, ")
    para.add_run("bold").bold = True
    para.add_run(" and ").italic = True
    para.add_run("small").font.size = Pt(8)
    made.add_paragraph("first point", style="List Bullet")
    made.add_paragraph("second point", style="List Number")
    table = made.add_table(rows=2, cols=2)
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            cell.text = f"cell {r}{c} 表"
    made.add_heading("  Leading spaces kept  ", 2)
    made.add_paragraph("tab\tand\u00a0no-break space")
    made.add_comment(made.paragraphs[1].runs[0], text="a reviewer's note", author="R")
    out = io.BytesIO()
    made.save(out)
    return out.getvalue()


def parts(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n: z.read(n) for n in z.namelist() if n.endswith((".xml", ".rels"))}


def test_every_part_is_mammoths_own_tree() -> None:
    checked = 0
    for name, data in parts(rich_docx()).items():
        theirs = xmlparser.parse_xml(io.BytesIO(data), office_xml._namespaces)
        ours = word_xml.parse_xml(io.BytesIO(data), office_xml._namespaces)
        assert ours == theirs, name
        checked += 1
    assert checked >= 10  # document, styles, numbering, comments, theme, ...
    odd = (
        b'<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
        b'wordprocessingml/2006/main" xmlns:x="urn:other"><w:t xml:space="preserve"> a '
        b"&amp; <!-- c --> b </w:t><x:e x:k='v' plain='p'>&#x4e2d;</x:e></w:document>"
    )
    ours = word_xml.parse_xml(io.BytesIO(odd), office_xml._namespaces)
    theirs = xmlparser.parse_xml(io.BytesIO(odd), office_xml._namespaces)
    assert ours.children[1] == theirs.children[1]  # names, prefixes, attributes, entities
    assert [t.value for t in theirs.children[0].children] == [" a & ", " b "]
    assert [t.value for t in ours.children[0].children] == [" a &  b "]  # one run of text
    cdata = odd.replace(b"<!-- c -->", b"<![CDATA[<b>]]>")  # minidom's copy dropped it
    assert word_xml.parse_xml(io.BytesIO(cdata)).children[0].children[0].value == " a & <b> b "


def test_a_shared_template_is_read_once_and_stays_right() -> None:
    word_xml._kept.clear()
    styles = parts(rich_docx())["word/styles.xml"]
    assert len(styles) >= word_xml.KEPT_MIN_BYTES
    first = word_xml.parse_xml(io.BytesIO(styles), office_xml._namespaces)
    again = word_xml.parse_xml(io.BytesIO(styles), office_xml._namespaces)
    assert again is first and len(word_xml._kept) == 1
    changed = styles.replace(b'w:styleId="Heading1"', b'w:styleId="Heading1x"', 1)
    other = word_xml.parse_xml(io.BytesIO(changed), office_xml._namespaces)
    assert other is not first and other != first  # another template: read for itself


@pytest.mark.parametrize(
    ("fmt", "data"),
    [
        ("docx", rich_docx()),
        ("pptx", make_pptx("slide words 幻灯片")),
        ("xlsx", make_xlsx("cell words")),
        ("epub", make_epub("chapter words")),
    ],
)
def test_the_markdown_is_markitdowns_to_the_byte(tmp_path: Path, fmt: str, data: bytes) -> None:
    from markitdown import MarkItDown

    path = tmp_path / f"file.{fmt}"
    path.write_bytes(data)
    expected = MarkItDown(enable_plugins=False).convert_local(str(path)).markdown
    made = markitdown_run.load()
    assert markitdown_run._by_own_converter(str(path), fmt).markdown == expected
    assert made is not None


def test_deep_nesting_costs_a_loop_and_entities_are_refused() -> None:
    depth = 200_000  # minidom's copy into mammoth's nodes recursed: RecursionError
    deep = b"<a>" * depth + b"x" + b"</a>" * depth
    started = time.perf_counter()
    root = word_xml.parse_xml(io.BytesIO(deep))
    assert time.perf_counter() - started < 10
    for _ in range(depth - 1):
        (root,) = root.children
    assert root.children[0].value == "x"
    laughs = b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "' + b"x" * 100 + b'">'
    for n in range(1, 12):
        laughs += f'<!ENTITY {"a" * (n + 1)} "{("&" + "a" * n + ";") * 10}">'.encode()
    laughs += b"]><l>&" + b"a" * 12 + b";</l>"
    with pytest.raises(ValueError, match="document type"):  # (expat: amplification)
        word_xml.parse_xml(io.BytesIO(laughs))
