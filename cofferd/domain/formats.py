"""The formats a document may have, by the suffix of its file name.

Markdown is the truth people write. Other files of a docs tree are indexed where they lie
when their KB lists their format in `index_formats`: plain text is read as it is; the
others are converted to Markdown (markitdown), and the converted text is derived data
kept in the data home, never written into the folder.
"""

from __future__ import annotations

from functools import cache
from pathlib import PurePosixPath

from coffer_kernel.markdown_grammar import MARKDOWN_SUFFIXES
from coffer_kernel.sources import IMAGE_FORMATS as IMAGE_FORMATS

MARKDOWN = "md"
ALIASES = {
    "markdown": MARKDOWN,
    "htm": "html",
    "text": "txt",
    "jpeg": "jpg",
}  # other names of a format
TEXT_FORMATS = ("txt",)  # read as text, without conversion
# IMAGE_FORMATS: read by OCR (the `ocr` extra), one page each, never unless a KB lists them
CONVERTED_FORMATS = (
    "pdf", "docx", "pptx", "xlsx", "html", "epub", "csv", "json", "xml", *IMAGE_FORMATS,
)  # fmt: skip
IN_PLACE_FORMATS = (*CONVERTED_FORMATS, *TEXT_FORMATS)  # what `index_formats` may list
# Prose people wrote or read. Spreadsheets (xlsx, csv) and data (json, xml) flood keyword
# search with cells and keys; a folder's HTML is as often a site's templates or an export
# of the notes themselves as a saved article; images are photos as often as screenshots,
# and OCR costs seconds each. Each is one setting away.
DEFAULT_INDEX_FORMATS = ("docx", "epub", "pdf", "pptx", "txt")
PAGED_FORMATS = (
    "pdf",
    "pptx",
    "xlsx",
    *IMAGE_FORMATS,
)  # their converted text marks each page, slide, sheet
# Formats whose converted text starts with no heading that names the document (a PDF's
# pages, a sheet's `## Sheet1`): without a title of its own, one is named by its file.
NAMED_BY_FILE = ("pdf", "xlsx", "csv", "json", "xml", *IMAGE_FORMATS)


@cache
def suffixes(formats: tuple[str, ...]) -> tuple[str, ...]:
    """The file name suffixes of documents in these formats, Markdown's (the grammar's:
    coffer_kernel.markdown_grammar) first."""
    return MARKDOWN_SUFFIXES + tuple(
        f".{name}"
        for fmt in formats
        for name in (fmt, *(alias for alias, named in ALIASES.items() if named == fmt))
    )


def format_named(name: str) -> str:
    """The format a name (`PDF`, `.htm`, `markdown`) says, lower case."""
    name = name.lower().lstrip(".")
    return ALIASES.get(name, name)


def format_of(path: str) -> str:
    """A document's format by its name: `md` for Markdown, else its in-place format (or
    its lower-case suffix when it is none)."""
    return format_named(PurePosixPath(path).suffix)


def is_converted(path: str) -> bool:
    """Whether the document at `path` is indexed from text converted out of its file."""
    return format_of(path) in CONVERTED_FORMATS
