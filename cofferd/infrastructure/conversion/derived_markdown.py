"""The Markdown kept for a converted document, made in the converter's process: the text
of each page (slide, sheet) below its mark (domain.pages), frontmatter above saying where
it came from. The daemon stores and indexes it as it is; what is no text to index (a scan,
an empty file) or too much (a bomb) is refused here with the reason, as a sentence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import yaml

from cofferd.domain import pages
from cofferd.domain.index_records import Converted
from cofferd.domain.models import utc_now
from cofferd.infrastructure.conversion import text_cleanup
from cofferd.infrastructure.conversion.format_titles import renumbered, usable_title
from cofferd.infrastructure.conversion.pdf_pages import PdfPage

MiB = 1024 * 1024
MAX_CHARS = 32_000_000  # a longer converted text is a bomb, not a document
MAX_BYTES = 96 * MiB  # its UTF-8 (32 million CJK characters fit)
SCANNED = "a scanned PDF: it has no text layer to index"
NO_TEXT = "no text in it"
NO_TEXT_READ = "no text in it: OCR read none in the image"
# markitdown's own marks: a slide deck's before each slide, a workbook's sheet headings
SLIDE_MARK = re.compile(r"^<!-- Slide number: (\d{1,9}) -->$", re.MULTILINE)
SHEET_MARK = re.compile(r"^## ([^\n]*)$", re.MULTILINE)
EPUB_FIELD = re.compile(r"\*\*([A-Z][a-z]+):\*\* ")
EPUB_NOISE = {"Title", "Language", "Identifier", "Date", "Cover"}
LETTER = re.compile(r"[^\W_]")

Page = tuple[str, str]  # (label, text)


class Refused(Exception):
    """The document converted to nothing worth indexing, or to too much; why, as a sentence."""


def too_large(text: str) -> str | None:
    if len(text) > MAX_CHARS:
        return f"too large: its text is over {MAX_CHARS // 1_000_000} million characters"
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        return f"too large: its text is over {MAX_BYTES // MiB} MiB"
    return None


def from_pdf(
    pdf_pages: Sequence[PdfPage],
    own_title: str | None,
    engine: str,
    scanned: str = SCANNED,
    unread: str = "",
) -> Converted:
    """A PDF's pages, each under its label (else its number), their text cleaned as
    text_cleanup says. A PDF with (next to) no text is a scan that OCR did not read:
    refused with `scanned`, the sentence saying why. `unread`: the pages OCR had no time
    for, said in the frontmatter."""
    if not _has_letters(pdf_pages, max(1, len(pdf_pages))):
        raise Refused(scanned)
    texts = text_cleanup.clean_pdf_pages([p.text for p in pdf_pages])
    marked = [
        (pages.label(p.label, n), text)
        for n, (p, text) in enumerate(zip(pdf_pages, texts, strict=True), 1)
    ]
    return _made("pdf", "", marked, own_title, engine, unread)


def from_image(
    text: str, fmt: str, page_label: str, own_title: str | None, engine: str
) -> Converted:
    """An image's text as OCR read it: one page, under a label that says so."""
    if not LETTER.search(text):
        raise Refused(NO_TEXT_READ)
    return _made(fmt, "", [(page_label, text)], own_title, engine)


def from_markitdown(markdown: str, fmt: str, own_title: str | None, engine: str) -> Converted:
    """What markitdown made of a document in any other format: a deck's slides and a
    workbook's sheets marked as pages are."""
    if reason := too_large(markdown):
        raise Refused(reason)
    if not markdown.strip():
        raise Refused(NO_TEXT)
    markdown = text_cleanup.spelled_out(markdown)
    if fmt == "pptx":
        front, marked = _split(markdown, SLIDE_MARK, numbered=True)
        return _made(fmt, front, marked, own_title, engine)
    if fmt == "xlsx":
        front, marked = _split(markdown, SHEET_MARK, numbered=False)
        return _made(fmt, front, marked, own_title, engine)
    if fmt == "epub":
        markdown = _without_bookkeeping(markdown)
    return _made(fmt, markdown, [], own_title, engine)


def _made(
    fmt: str,
    front: str,
    marked: Sequence[Page],
    own_title: str | None,
    engine: str,
    unread: str = "",
) -> Converted:
    kind = pages.KIND_OF_FORMAT.get(fmt, "page")
    parts = [pages.escaped(front.strip())] if front.strip() else []
    parts += [f"{pages.mark(kind, name)}\n\n{pages.escaped(text.strip())}" for name, text in marked]
    body = "\n\n".join(parts).strip() + "\n"
    title = usable_title(own_title)  # never "untitled", "(anonymous)"...
    heading = pages.first_heading(body)
    if title and heading and renumbered(title, heading):
        title = None  # a template's leftover: the first heading (slide) says what it is
    head: dict[str, str] = {"title": title} if title else {}
    head.update(source_format=fmt, converter=engine, converted_at=utc_now())
    if unread:
        head["unread"] = unread
    yaml_head = yaml.safe_dump(head, sort_keys=False, allow_unicode=True, width=1000)
    text = f"---\n{yaml_head}---\n{body}"  # as application.markdown.compose writes it
    if reason := too_large(text):
        raise Refused(reason)
    return Converted(markdown=text, title=title, pages=len(marked))


def _has_letters(pdf_pages: Sequence[PdfPage], wanted: int) -> bool:
    """Whether the pages hold at least `wanted` letters or digits (a letter a page)."""
    found = 0
    for page in pdf_pages:
        for _ in LETTER.finditer(page.text):
            found += 1
            if found >= wanted:
                return True
    return False


def _split(markdown: str, marks: re.Pattern[str], *, numbered: bool) -> tuple[str, list[Page]]:
    """markitdown's text cut at its marks: what comes before the first, and (label, text)
    of each part. A deck's marks count only in order (slide 1, 2, ...): a slide whose own
    text holds such a line cannot end another slide early."""
    front_end: int | None = None
    found: list[tuple[str, int, int]] = []  # (label, where the mark starts, ends)
    for mark in marks.finditer(markdown):
        name = mark.group(1)
        if numbered and int(name) != len(found) + 1:
            continue
        if front_end is None:
            front_end = mark.start()
        found.append((pages.label(name, len(found) + 1), mark.start(), mark.end()))
    if front_end is None:
        return markdown, []
    ends = [start for _, start, _ in found[1:]] + [len(markdown)]
    parts = [(name, markdown[end:until]) for (name, _, end), until in zip(found, ends, strict=True)]
    return markdown[:front_end], parts


def _without_bookkeeping(body: str) -> str:
    """An e-book's text without the lines markitdown writes above it that say nothing to
    search (its title is the document's, its language, identifier, date and cover);
    authors, publisher and description stay."""
    head, sep, rest = body.partition("\n\n")
    lines = head.split("\n")
    fields = [EPUB_FIELD.match(line) for line in lines]
    if not sep or not all(fields):
        return body
    kept = [
        line for line, field in zip(lines, fields, strict=True)
        if field and field.group(1) not in EPUB_NOISE
    ]  # fmt: skip
    return "\n".join(kept) + sep + rest if kept else rest
