"""The title a document's author gave it, read from the format's own metadata: the core
properties of Office files (docx, pptx, xlsx) and a PDF's /Title. Runs in the conversion
worker (documents are untrusted input); a title that cannot be read is simply absent."""

from __future__ import annotations

import logging
import posixpath
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
