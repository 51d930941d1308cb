"""The title a document's author gave it, read from the format's own metadata: the core
properties of Office files (docx, pptx, xlsx) and a PDF's /Title, kept only when it is a
real title (`usable_title`). Runs in the conversion worker (documents are untrusted
input); a title that cannot be read is simply absent."""

from __future__ import annotations

import logging
import posixpath
import re
import zipfile
import zlib
from pathlib import Path
from xml.etree import ElementTree

from pdfminer.pdfdocument import PDFDocument
from pdfminer.pdfparser import PDFParser
from pdfminer.pdftypes import PDFObjRef
from pdfminer.psexceptions import PSException
from pdfminer.utils import decode_text

log = logging.getLogger(__name__)

TITLE_MAX_CHARS = 300
# what office programs, PDF printers, page templates and generators put there when nobody
# chose a title
PLACEHOLDERS = re.compile(
    r"(untitled|no title|title|document|doc|presentation|powerpoint presentation|"
    r"slide|title slide|book|sheet|workbook|page|new document|microsoft word document|"
    r"anonymous|unknown|none|null|n/?a|default|template|noname|empty|"
    r"(click|tap) to add (a )?title|(insert|enter|your|add) (the |a )?title( here)?|"
    r"(document|presentation|report|paper) title|"
    r"(untitled|new|blank) (document|presentation|spreadsheet|page))[ _-]*\d*",
    re.IGNORECASE,
)
# a title that is only punctuation around a placeholder: "(anonymous)", "[Untitled]"
WRAPPING = "()[]{}<>\"'\u201c\u201d\u2018\u2019\u00ab\u00bb-_.:;,*#~ "
# "Microsoft Word - plan.docx": a PDF printed from an office program names the program
PRINTED_BY = re.compile(r"^(microsoft )?(word|excel|powerpoint|office)\s+-\s+", re.IGNORECASE)
LOOKS_LIKE_A_PATH = re.compile(r"^([a-z]:)?[\\/]|[\\/][^ ]*[\\/]", re.IGNORECASE)
FILE_NAME = re.compile(
    r"\.(docx?|pptx?|xlsx?|pdf|html?|txt|md|odt|odp|ods|rtf|pages|key|numbers|epub)$",
    re.IGNORECASE,
)


_WORDS = re.compile(r"\w+")


def renumbered(own: str, heading: str) -> bool:
    """Whether a document's title property names what its first heading (a deck's first
    slide) names, with other numbers: a template's leftover ("Lecture 11" on a deck whose
    first slide says "Lecture 13 Introduction to Databases"). Then the heading is the
    title; a title property that says something else ("Annual report" over "Summary") is
    the author's, and kept."""
    mine, theirs = _WORDS.findall(own.casefold()), _WORDS.findall(heading.casefold())
    if not mine or len(mine) > len(theirs) or not any(w.isdigit() for w in mine):
        return False
    pairs = list(zip(mine, theirs, strict=False))
    if any(a != b and not (a.isdigit() and b.isdigit()) for a, b in pairs):
        return False
    return any(a != b for a, b in pairs)


def usable_title(raw: str | None) -> str | None:
    """`raw` made tidy, or None when it is empty, a placeholder or only a file's name."""
    if not raw:
        return None
    title = " ".join(raw.split())
    if PRINTED_BY.match(title) or FILE_NAME.search(title):
        return None
    if not any(c.isalnum() for c in title) or PLACEHOLDERS.fullmatch(title.strip(WRAPPING)):
        return None
    if LOOKS_LIKE_A_PATH.search(title):  # where a generator found the file, not a title
        return None
    if len(title) > TITLE_MAX_CHARS:
        return title[:TITLE_MAX_CHARS].rsplit(" ", 1)[0] + "…"
    return title


OOXML_FORMATS = ("docx", "pptx", "xlsx")
CORE_PROPERTIES_REL = (
    "http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties"
)
RELATIONSHIP = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
# core properties are a few hundred bytes; expat (2.4.1 and later) refuses entity expansion
# attacks, ElementTree never fetches external entities, and the worker's memory is capped
PART_MAX_BYTES = 1024 * 1024


def own_title(path: Path, fmt: str) -> str | None:
    if fmt in OOXML_FORMATS:
        return _ooxml_title(path)
    if fmt == "pdf":
        return _pdf_title(path)
    return None


def _ooxml_title(path: Path) -> str | None:
    try:
        with zipfile.ZipFile(path) as package:
            core = _read_part(package, _core_part(package))
    except (
        zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error,
        RuntimeError, NotImplementedError,  # an encrypted or oddly compressed part
        ElementTree.ParseError,
    ) as exc:  # fmt: skip
        log.debug("no core properties in %s: %s", path.name, exc)
        return None
    if core is None:
        return None
    try:
        title = ElementTree.fromstring(core).find(DC_TITLE)
    except ElementTree.ParseError as exc:
        log.debug("unreadable core properties in %s: %s", path.name, exc)
        return None
    return title.text if title is not None else None


def _core_part(package: zipfile.ZipFile) -> str:
    """The core properties part the package's relationships name (docProps/core.xml)."""
    rels = _read_part(package, "_rels/.rels")
    for rel in ElementTree.fromstring(rels).iter(RELATIONSHIP) if rels else ():
        if rel.get("Type") == CORE_PROPERTIES_REL and rel.get("Target"):
            return posixpath.normpath(str(rel.get("Target")).lstrip("/"))
    return "docProps/core.xml"


def _read_part(package: zipfile.ZipFile, name: str) -> bytes | None:
    try:
        info = package.getinfo(name)
    except KeyError:
        return None
    return package.read(info) if info.file_size <= PART_MAX_BYTES else None


def _pdf_title(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            for info in PDFDocument(PDFParser(fh)).info:
                value = _resolved(info.get("Title"))
                if isinstance(value, bytes):
                    return decode_text(value)  # PDFDocEncoding, or UTF-16 with its mark
                if isinstance(value, str):
                    return value
    except (PSException, OSError, ValueError, TypeError, KeyError) as exc:
        log.debug("no title in %s: %s", path.name, exc)
    return None


REFERENCES_FOLLOWED = 8  # a title that is a reference to a reference... (or to itself)


def _resolved(value: object) -> object:
    """`value` with its references followed, at most REFERENCES_FOLLOWED of them: pdfminer's
    resolve1 follows a reference to itself for ever (a 700-byte PDF held the converter)."""
    for _ in range(REFERENCES_FOLLOWED):
        if not isinstance(value, PDFObjRef):
            return value
        value = value.resolve()
    return None
