"""A converted document's text made as searchable as the same text typed as Markdown.

What text extraction leaves that typed text has not: ligature characters (`ﬁ`, which no
query spells), soft hyphens, words cut at a line's end (`immuno-` / `receptor`), runs of
spaces from justified lines, and a page's running header or footer (a journal's name, "Page
3 of 12") repeated on every page, which makes every page match its words. Each function
is pure and linear in its input (no regular expression here backtracks over more than a
bounded few characters), for text of any size from any document.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

# Latin ligatures (Alphabetic Presentation Forms) as NFKC spells them, and no other NFKC
# change (which would also make `²` a `2` and `Ⅳ` an `IV`)
LIGATURES = str.maketrans(
    {"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"}
)
SOFT_HYPHEN = "\u00ad"
_SPACES = re.compile(r"(?<=\S)[ \t\u00a0]{2,}(?=\S)")
WORD_MAX = 48  # letters looked at on each side of a line-end hyphen
_LETTERS = rf"[^\W\d_]{{1,{WORD_MAX}}}"
# where a word may be cut: `-` at a line's end (a blank line below it too: pdfminer writes
# one between the lines of some PDFs), a letter next; found from the `-` (a literal a
# search skips to), the word before it looked for in the WORD_MAX characters before it
_LINE_END_HYPHEN = re.compile(r"-[ \t]*\n(?:[ \t]*\n)?[ \t]*(?=[^\W\d_])")
_HEAD = re.compile(rf"(?<![^\W\d_]){_LETTERS}\Z")  # searched up to the hyphen
_TAIL = re.compile(rf"{_LETTERS}(?![^\W\d_])")
_WORD = re.compile(rf"(?<![^\W\d_]){_LETTERS}(?![^\W\d_])")
_DIGITS = re.compile(r"\d+")

# a running line: among the first or last EDGE_LINES lines of a page, the same (its
# numbers aside) on at least RUNNING_SHARE of the pages, and on RUNNING_MIN_PAGES
EDGE_LINES = 3
RUNNING_SHARE = 0.5
RUNNING_MIN_PAGES = 3
RUNNING_LINE_MAX = 200  # characters: a longer line is text, not a header


def spelled_out(text: str) -> str:
    """Ligatures as their letters, soft hyphens (invisible unless a line breaks there)
    gone: the word as a query spells it."""
    return text.translate(LIGATURES).replace(SOFT_HYPHEN, "")


def clean_pdf_pages(pages: Sequence[str]) -> list[str]:
    """A PDF's page texts (PDFium's) as searchable as typed text: running headers and
    footers dropped, ligatures spelled out, words cut at a line's end joined (where the
    document spells them whole elsewhere), runs of
    spaces between words (justified lines) made one."""
    pages = [spelled_out(page) for page in without_running_lines(pages)]
    return [_SPACES.sub(" ", page) for page in join_cut_words(pages)]


def join_cut_words(pages: Sequence[str]) -> list[str]:
    """`immuno-` at a line's end and `receptor` on the next made `immunoreceptor` when the
    document spells `immunoreceptor` elsewhere; else left as printed: a typesetter also
    breaks lines at a compound's own hyphen (`interferon-` / `gamma`) and after a
    suspended one (`low-` / `and middle-income`), which joined would lose both words. A
    next word in capitals is a name or a new sentence, never joined."""
    cuts = [_cuts(page) if "-" in page else [] for page in pages]
    if not any(cuts):
        return list(pages)
    words: Counter[str] = Counter()
    for page in pages:
        words.update(found.group().lower() for found in _WORD.finditer(page))

    def joined(cut: tuple[int, int, str, str], page: str) -> str:
        start, end, head, tail = cut
        whole = head + tail  # never a word of the cut itself: a line break is in it
        return whole if words[whole.lower()] else page[start:end]

    joined_pages = []
    for page, page_cuts in zip(pages, cuts, strict=True):
        parts, done = [], 0
        for cut in page_cuts:
            parts += [page[done : cut[0]], joined(cut, page)]
            done = cut[1]
        joined_pages.append("".join(parts) + page[done:] if page_cuts else page)
    return joined_pages


def _cuts(page: str) -> list[tuple[int, int, str, str]]:
    """(start, end, head, tail) of each word cut at a line's end: a whole word of letters
    before the hyphen, one in lowercase after the line break (WORD_MAX letters at most)."""
    found: list[tuple[int, int, str, str]] = []
    for hyphen in _LINE_END_HYPHEN.finditer(page):
        at = hyphen.start()
        head = _HEAD.search(page, max(0, at - WORD_MAX), at)
        if head is None:
            continue  # no word before the hyphen, or one longer than a word
        start = head.start()
        if found and start < found[-1][1]:
            continue  # its head is the last cut's tail: `ab-` / `ab-` / `ab` joins once
        tail = _TAIL.match(page, hyphen.end())
        if tail is None or not tail.group()[0].islower():
            continue
        found.append((start, tail.end(), page[start:at], tail.group()))
    return found


def without_running_lines(pages: Sequence[str]) -> list[str]:
    """The pages without their running headers and footers: a line among the first or
    last few of a page that recurs, its numbers aside ("Journal of X 12 (2019) 3-14",
    "Page 3 of 12", "- 3 -"), at the edges of at least half the pages (and of three). The
    first page it is on keeps it: its words stay the document's, once (a document whose
    pages all read alike loses nothing). Two passes over the pages, nothing of them held
    between (memory stays flat)."""
    if len(pages) < RUNNING_MIN_PAGES:
        return list(pages)
    seen: Counter[str] = Counter()
    for page in pages:
        seen.update({key for _, key in _edge_keys(page.split("\n"))})
    wanted = max(RUNNING_MIN_PAGES, math.ceil(RUNNING_SHARE * len(pages)))
    running = {key for key, count in seen.items() if key and count >= wanted}
    if not running:
        return list(pages)
    cleaned = []
    kept_once: set[str] = set()
    for page in pages:
        lines = page.split("\n")
        keys = _edge_keys(lines)
        dropped = {n for n, key in keys if key in running and key in kept_once}
        kept_once.update(key for _, key in keys if key in running)
        kept = (line for n, line in enumerate(lines) if n not in dropped)
        cleaned.append("\n".join(kept) if dropped else page)
    return cleaned


def _edge_keys(lines: list[str]) -> list[tuple[int, str]]:
    """(index, key) of the first and last EDGE_LINES non-blank lines of a page."""
    first = _filled(lines, range(len(lines)))
    last = [n for n in _filled(lines, range(len(lines) - 1, -1, -1)) if n not in first]
    return [(n, _key(lines[n])) for n in (*first, *last)]


def _filled(lines: list[str], order: range) -> list[int]:
    """The first EDGE_LINES non-blank lines in this order."""
    found: list[int] = []
    for n in order:
        if lines[n].strip():
            found.append(n)
            if len(found) == EDGE_LINES:
                break
    return found


def _key(line: str) -> str:
    """A line as running lines compare: its numbers one mark, its spaces single, no case
    ("" for a line too long to be one, or a table's)."""
    if len(line) > RUNNING_LINE_MAX or line.lstrip().startswith("|"):
        return ""  # a table's rows (a form page's header row, its rule) are its own
    return " ".join(_DIGITS.sub("#", line).lower().split())
