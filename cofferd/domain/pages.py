"""Pages, slides and sheets in a converted text: the one grammar of their marks.

The converter's worker writes a line `## Page iv` (the document's own page label, else
its number), `## Slide 3` or `## Sheet Budget` where each starts, and escapes any line of
the document's own text that would read as one (`\\## Page 3`): every mark in a converted
text is Coffer's. The chunker keeps a page's or slide's mark in the passage's text and
goes on across it (a sheet's is a section); search reads the marks back to say the page of
a passage's match, grep and `show` where a line is. Texts converted before these marks
(`<!-- Slide number: 3 -->`, markitdown's) are read too.
"""

from __future__ import annotations

import mmap
import re
from dataclasses import dataclass

from coffer_kernel.markdown_grammar import headings

KIND_OF_FORMAT = {  # formats.PAGED_FORMATS (an image is one page)
    "pdf": "page", "pptx": "slide", "xlsx": "sheet", "png": "page", "jpg": "page", "webp": "page",
}  # fmt: skip
LABEL_MAX_CHARS = 64
_KINDS = "Page|Slide|Sheet"
_OLD_SLIDE = "<!-- Slide number: "
# a label is at most LABEL_MAX_CHARS characters: at most 4 bytes each in UTF-8
_MARK = r"^(?:## ({kinds}) ([^\n]{{1,{n}}})|{old}(\d{{1,6}}) -->)$"
MARKS = re.compile(_MARK.format(kinds=_KINDS, n=LABEL_MAX_CHARS, old=_OLD_SLIDE), re.M)
MARKS_IN_BYTES = re.compile(
    _MARK.format(kinds=_KINDS, n=4 * LABEL_MAX_CHARS, old=_OLD_SLIDE).encode(), re.M
)
_LOOKS_LIKE_A_MARK = re.compile(rf"^(?=## (?:{_KINDS}) |{_OLD_SLIDE})", re.M)
_NOT_IN_A_LABEL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")


@dataclass(frozen=True, slots=True)
class PageStart:
    """Where a page (slide, sheet) starts: the line of its mark (lines from 1), its
    ordinal in the document (from 1), its kind and its label."""

    line: int
    ordinal: int
    kind: str
    label: str

    @property
    def location(self) -> str:
        """As a person says it: "page iv", "slide 3", "sheet Budget"."""
        return f"{self.kind} {self.label}"


def label(raw: object, ordinal: int) -> str:
    """A page's label as a mark may hold it: one line of at most LABEL_MAX_CHARS printable
    characters; its ordinal when the document gives none (or nothing printable)."""
    text = (
        " ".join(_NOT_IN_A_LABEL.sub(" ", raw[: 4 * LABEL_MAX_CHARS]).split())
        if isinstance(raw, str)
        else ""
    )
    return text[:LABEL_MAX_CHARS].rstrip() or str(ordinal)


def is_mark_heading(level: int, text: str) -> bool:
    """Whether a heading (its level, its text) is a mark."""
    return level == 2 and MARKS.fullmatch(f"## {text}") is not None


def first_heading(text: str) -> str | None:
    """The first heading of a converted text that is no page, slide or sheet mark: a deck's
    first slide's title, a document's first heading."""
    for _, level, name in headings(text):
        if not is_mark_heading(level, name):
            return name
    return None


def mark(kind: str, page_label: str) -> str:
    """The line that starts a page of this kind (`page`, `slide`, `sheet`)."""
    return f"## {kind.capitalize()} {page_label}"


def escaped(text: str) -> str:
    """The document's own text with every line that would read as a mark escaped."""
    return _LOOKS_LIKE_A_MARK.sub("\\\\", text)


def page_starts(text: str) -> list[PageStart]:
    """Where each page (slide, sheet) of a converted text starts, in linear time."""
    starts: list[PageStart] = []
    lines, counted = 1, 0
    for found in MARKS.finditer(text):
        lines += text.count("\n", counted, found.start())
        counted = found.start()
        kind, page_label, old = found.groups()
        starts.append(
            PageStart(lines, len(starts) + 1, (kind or "slide").lower(), page_label or old)
        )
    return starts


def page_starts_in(data: bytes | bytearray | mmap.mmap) -> list[PageStart]:
    """page_starts of a converted text's UTF-8 bytes (a file mapped, never decoded whole)."""
    starts: list[PageStart] = []
    lines, counted = 1, 0
    view = memoryview(data)
    for found in MARKS_IN_BYTES.finditer(data):
        lines += bytes(view[counted : found.start()]).count(b"\n")
        counted = found.start()
        kind, page_label, old = found.groups()
        name = (page_label or old).decode("utf-8", "replace")
        starts.append(PageStart(lines, len(starts) + 1, (kind or b"slide").decode().lower(), name))
    return starts


def page_in_passage(
    starts: list[PageStart], text: str, offset: int, line_start: int, line_end: int
) -> PageStart | None:
    """The page (slide, sheet) of the character at `offset` of a passage that holds lines
    `line_start`-`line_end` of its converted text (`starts`: the text's page_starts): the
    page of the last mark in the passage at or before `offset`; with none there, the page
    before the passage's first mark (the match is in the text that leads to it), else the
    page its first line is on. A passage flows across pages, and may open with the tail of
    the passage before it (lines before `line_start`), so a mark is known by its label (the
    last page of that label within the passage's lines), not by counting."""
    marks = list(MARKS.finditer(text))
    before = [m for m in marks if m.start() <= offset]
    if before:
        found = _page_of_mark(starts, before[-1], line_end)
        if found is not None:
            return found
    elif marks:
        after = _page_of_mark(starts, marks[0], line_end)
        if after is not None:
            return starts[after.ordinal - 2] if after.ordinal > 1 else None
    return page_of(starts, line_start)


def _page_of_mark(starts: list[PageStart], found: re.Match[str], line_end: int) -> PageStart | None:
    kind, page_label, old = found.groups()
    kind, page_label = (kind or "slide").lower(), page_label or old
    named = [s for s in starts if s.label == page_label and s.kind == kind and s.line <= line_end]
    return named[-1] if named else None


def line_in_page(start: PageStart, line: int) -> int:
    """A line's number within its page: 1 for the first line below the mark's blank line."""
    return max(1, line - start.line - 1)


def page_of(starts: list[PageStart], line: int) -> PageStart | None:
    """The page `line` is on (None before the first page), by bisection."""
    low, high = 0, len(starts)
    while low < high:
        middle = (low + high) // 2
        if starts[middle].line <= line:
            low = middle + 1
        else:
            high = middle
    return starts[low - 1] if low else None
