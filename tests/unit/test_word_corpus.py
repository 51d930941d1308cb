"""Word files of many shapes read by conversion/word_xml (issue 35 §6): the Markdown is
markitdown's own (mammoth with its own minidom parser) to the byte for each, with styles
of its own or a template's, read cold or kept; a part that declares a document type
(entities) is refused; a part too large to keep is read each time."""

from __future__ import annotations

import functools
import io
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import docx
import pytest
from mammoth.docx import office_xml
from markitdown import MarkItDown

from cofferd.infrastructure.conversion import markitdown_run, word_xml
from tests.support.helpers import write
from tests.support.samples import make_docx
from tests.support.word_corpus import mammoths_own_parser, styles_of, varied_docx


def corpus() -> dict[str, bytes]:
    files = {f"own{n}.docx": varied_docx(n) for n in range(4)}
    files |= {f"template{n}.docx": varied_docx(n, own_styles=False) for n in range(2)}
    files["default.docx"] = (Path(docx.__file__).parent / "templates" / "default.docx").read_bytes()
    files["plain.docx"] = make_docx("A plain note, naïve café 日本")
    return files


def with_part(data: bytes, name: str, change: Callable[[bytes], bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            part = zin.read(info.filename)
            zout.writestr(info, change(part) if info.filename == name else part)
    return out.getvalue()


def declared_in(doctype: bytes, part: bytes) -> bytes:
    return part.replace(b"?>", b"?>" + doctype, 1)


def test_every_word_file_is_markitdowns_markdown_to_the_byte(tmp_path: Path) -> None:
    markitdown = MarkItDown(enable_plugins=False)
    word_xml._kept.clear()
    for name, data in corpus().items():
        path = write(tmp_path / name, data)
        with mammoths_own_parser():
            expected = markitdown.convert_local(str(path)).markdown
        cold = markitdown_run._by_own_converter(str(path), "docx").markdown
        kept = markitdown_run._by_own_converter(str(path), "docx").markdown
        assert cold == expected, name
        assert kept == expected, name
    assert word_xml._kept  # the styles of the files of one template were kept
    shown = markitdown_run._by_own_converter(str(tmp_path / "own3.docx"), "docx").markdown
    for shape in ("# Rapport 3", "**bold**", "* point 0", "1. step 0", "| cell", "image/png"):
        assert shape in shown, shape
    assert "[a link 3](https://example.org/doc/3?q=a&b=c)" in shown
    assert "The footnote's own words 3, ½." in shown


def test_a_part_declaring_a_document_type_is_refused(tmp_path: Path) -> None:
    """minidom read one: internal entities expanded (up to expat's amplification limit),
    external ones dropped. Word never writes one: refused at the declaration."""
    laughs = b'<!DOCTYPE w:styles [<!ENTITY a "' + b"x" * 100 + b'">'
    for n in range(1, 12):
        laughs += f'<!ENTITY {"a" * (n + 1)} "{("&" + "a" * n + ";") * 10}">'.encode()
    declared = {
        "internal": b'<!DOCTYPE w:styles [<!ENTITY e "Heading1">]>',
        "external": b'<!DOCTYPE w:styles [<!ENTITY e SYSTEM "file:///etc/hostname">]>',
        "laughs": laughs + b"]>",
    }
    engine = markitdown_run.load()
    for name, doctype in declared.items():
        data = with_part(varied_docx(1), "word/styles.xml", functools.partial(declared_in, doctype))
        path = write(tmp_path / f"{name}.docx", data)
        started = time.perf_counter()
        made = markitdown_run.convert(engine, str(path), "docx")
        assert time.perf_counter() - started < 5
        assert isinstance(made, tuple), name
        assert made[0] == "failed" and word_xml.DOCTYPE_REFUSED in made[1], made
    with pytest.raises(ValueError, match="document type"):
        word_xml.parse_xml(io.BytesIO(b'<!DOCTYPE a SYSTEM "a.dtd"><a/>'))


def test_a_part_too_large_to_keep_is_read_each_time() -> None:
    styles = styles_of(varied_docx(2))
    filler = b"<w:style w:type='paragraph' w:styleId='Filler'/>" * (word_xml.KEPT_MAX_BYTES // 40)
    large = styles.replace(b"</w:styles>", filler + b"</w:styles>")
    assert len(large) > word_xml.KEPT_MAX_BYTES
    word_xml._kept.clear()
    first = word_xml.parse_xml(io.BytesIO(large), office_xml._namespaces)
    again = word_xml.parse_xml(io.BytesIO(large), office_xml._namespaces)
    assert first == again and first is not again and not word_xml._kept
    assert word_xml.parse_xml(io.BytesIO(styles), office_xml._namespaces) is not None
    assert len(word_xml._kept) == 1
