"""Markdown-aware chunking: sections by heading first, then paragraphs, then lines, then words.

Sizes are in words: a run of non-space characters, or one CJK character (CJK has no spaces).
Code fences and tables stay whole when they fit. Every chunk carries its heading path,
which starts with the document title.

In a converted document a page is no section: its mark (`## Page 3`, domain/pages) stays in
the text, where the page starts, and the text flows on across it as it does on paper, so
a passage is cut where the same text as Markdown would be. A deck's slides flow alike, and
their titles with them (a deck's headings are its slides' titles: the slide is said by its
mark). A sheet is a section of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

from coffer_kernel.markdown_grammar import CLOSES, OPENS, code_lines, heading
from cofferd.domain.models import Chunk
from cofferd.domain.pages import is_mark_heading
from cofferd.domain.scripts import CJK_RANGES

_ONE_WORD = f"[{CJK_RANGES}]|[^\\s{CJK_RANGES}]+"
_CJK_RUN = re.compile(f"[{CJK_RANGES}]+")


class TooManyChunks(Exception):
    """The document's structure would make more chunks than its budget allows."""


def count_words(text: str) -> int:
    # each CJK run made one space: its characters are counted by the length lost, and
    # what is left splits into the other words (str.split's whitespace is \s's)
    rest, runs = _CJK_RUN.subn(" ", text)
    return len(text) - len(rest) + runs + len(rest.split())


@cache
def _pieces_of(size: int) -> re.Pattern[str]:
    """Up to `size` words at a time, in one match (C speed, however long the line)."""
    return re.compile(f"(?:{_ONE_WORD})(?:\\s*(?:{_ONE_WORD})){{0,{size - 1}}}")


def _blocks(body: str) -> Iterator[tuple[int, str, str, int]]:
    """(heading level or 0, heading text, block text, index of its first line) for each
    block of the body."""
    para: list[str] = []
    start = 0
    for number, line, code in code_lines(body.split("\n")):
        if code:  # fenced code: one block, from its opening fence to its closing one
            if code == OPENS:
                if para:
                    yield 0, "", "\n".join(para), start
                para, start = [], number
            para.append(line)
            if code == CLOSES:
                yield 0, "", "\n".join(para), start
                para = []
            continue
        h = heading(line)
        if h:
            if para:
                yield 0, "", "\n".join(para), start
                para = []
            yield h[0], h[1], line, number
        elif line.strip():
            if not para:
                start = number
            para.append(line)
        elif para:
            yield 0, "", "\n".join(para), start
            para = []
    if para:
        yield 0, "", "\n".join(para), start


def _split_large(
    text: str, size: int, first: int | None = None, counted: int | None = None
) -> list[str]:
    """Break one oversized block on lines, and a line that is still too big on words: the
    first piece up to `first` words (default `size`), the others up to `size`. `counted`:
    the block's words, when the caller knows them."""
    pieces: list[str] = []
    current: list[str] = []
    words = 0

    def budget() -> int:
        return size if pieces or first is None else first

    lines = text.split("\n")
    for line in lines:
        n = counted if counted is not None and len(lines) == 1 else count_words(line)
        if current and words + n > budget():
            pieces.append("\n".join(current))
            current, words = [], 0
        if n > budget():
            pieces += _split_line(line, budget(), size)
            continue
        current.append(line)
        words += n
    if current:
        pieces.append("\n".join(current))
    return pieces


@cache
def _more_words(count: int) -> re.Pattern[str]:
    """`count` words after the position it is matched at (fewer where the text ends)."""
    return re.compile(f"(?:\\s*(?:{_ONE_WORD})){{1,{count}}}")


def _words_end(text: str, count: int) -> int:
    """Where the first `count` words of `text` end: matched a power of two at a time, so
    however many are asked, a dozen patterns are all that is ever compiled (each one is a
    few milliseconds: one for each count cost a worker ~0.15 s on a Chinese corpus)."""
    end = 0
    for bit in (1 << shift for shift in reversed(range(count.bit_length()))):
        if count & bit and (found := _more_words(bit).match(text, end)) is not None:
            end = found.end()
    return end


def _split_line(line: str, first: int, size: int) -> list[str]:
    """A line in pieces of `size` words, the first of `first`."""
    if first == size:
        return _pieces_of(size).findall(line)
    end = _words_end(line, first)
    start = len(line) - len(line.lstrip())  # the first word's start (\s is what strips)
    return [line[start:end], *_pieces_of(size).findall(line, end)]


def _tail(text: str, words: int) -> str:
    """The last `words` words of `text`, read backwards from a window at its end that grows
    until it holds them (a chunk can be long; its tail is short). A word reversed is a
    word: the tail is the first `words` words of the window reversed, found in one match."""
    if words <= 0:
        return ""
    window = words * 2
    while True:
        start = max(0, len(text) - window)
        backwards = text[start:][::-1]
        found = _pieces_of(words).search(backwards)
        taken = found.end() if found else 0
        # a word beyond those taken: the last of them is whole, and there were `words`
        beyond = bool(backwards[taken:].strip())
        if start == 0:
            return text[len(text) - taken :] if beyond else text
        if beyond:
            return text[len(text) - taken :]
        window *= 4


class _Chunks:
    """Chunks made section by section: blocks gather in the section under way until the
    next would not fit; a section's later chunks start with the tail of the one before.

    A heading never makes a chunk of its own while something follows it: a heading with
    nothing under it waits for what comes next, and one before a block too large to fit
    leads the block's first piece (a passage that is only `# Sourdough` says nothing)."""

    def __init__(
        self, title: str, size: int, overlap: int, first_line: int, max_chunks: int | None
    ) -> None:
        self.title, self.size, self.overlap = title, size, overlap
        self.first_line, self.max_chunks = first_line, max_chunks
        self.chunks: list[Chunk] = []
        self.path: list[tuple[int, str]] = []
        self.blocks: list[tuple[int, str]] = []  # the section's, under way: (first line, text)
        self.words = 0
        self.only_headings = False  # what is under way is headings (or page marks) alone
        self.parts = 0  # chunks of this section so far (then the next repeats a tail)
        self.marks: set[int] = set()  # the first lines of the page marks under way

    def heading(self, level: int, name: str, block: str, start: int) -> None:
        if not self.only_headings:
            self.flush()
        self.parts = 0
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        self.path.append((level, name))
        self.add(block, start, is_heading=True)

    def page_mark(self, block: str, start: int) -> None:
        """A page's mark, in the text where the page starts: it leads what follows, as a
        heading does, but starts no section."""
        self.marks.add(start)
        self.add(block, start, is_heading=self.only_headings or not self.blocks)

    def add(self, block: str, start: int, *, is_heading: bool = False) -> None:
        n = count_words(block)
        if self.words + n > self.room() and (is_heading or not self.only_headings):
            self.flush()  # (headings under way wait for the text they lead)
        if self.words + n > self.room():
            self.split(block, start, n)
            return
        self.only_headings = is_heading and (self.only_headings or not self.blocks)
        self.blocks.append((start, block))
        self.words += n

    def room(self) -> int:
        """Words the chunk under way may hold (its tail of the chunk before counts)."""
        return self.size - (self.overlap if self.parts else 0)

    def split(self, block: str, start: int, words: int) -> None:
        """A block of `words` words too large for the chunk under way, in pieces; the
        headings under way lead its first piece when there is room beside them."""
        if not (self.only_headings and self.words < self.room()):
            self.flush()
        room = self.room() - self.words
        pieces = _split_large(block, self.size - self.overlap, first=room, counted=words)
        cursor, line = 0, start
        for piece in pieces:
            at = block.find(piece, cursor)
            line += block.count("\n", cursor, at)  # counted on from the last piece
            cursor = at + len(piece)
            self.blocks.append((line, piece))
            line += piece.count("\n")
            self.flush()

    def flush(self) -> None:
        carried: list[tuple[int, str]] = []  # marks at the end lead the next chunk instead
        while self.blocks and self.blocks[-1][0] in self.marks and not self.only_headings:
            carried.insert(0, self.blocks.pop())
        text = "\n\n".join(block for _, block in self.blocks).strip()
        if text:
            if self.parts and self.overlap:
                text = _tail(self.chunks[-1].text, self.overlap) + "\n\n" + text
            first = min(start for start, _ in self.blocks)
            last = max(start + block.count("\n") for start, block in self.blocks)
            if self.max_chunks is not None and len(self.chunks) >= self.max_chunks:
                raise TooManyChunks
            span = (self.first_line + first, self.first_line + last)
            self.chunks.append(Chunk(len(self.chunks), text, self.heading_path(), *span))
            self.parts += 1
        self.blocks, self.words, self.only_headings = [], 0, False
        self.marks = {start for start, _ in carried}
        for start, block in carried:
            self.add(block, start, is_heading=True)

    def heading_path(self) -> tuple[str, ...]:
        names = [name for _, name in self.path]
        return tuple(names if names and names[0] == self.title else [self.title, *names])


def chunk_markdown(
    body: str,
    title: str,
    size: int,
    overlap: int,
    first_line: int = 1,
    max_chunks: int | None = None,
    paged: str | None = None,
) -> list[Chunk]:
    """Chunks with the lines they come from (`first_line` is the body's first line in its
    file, counting from 1); TooManyChunks as soon as there would be more than
    `max_chunks`. `paged`: the body is a converted text marked by `page`, `slide` or
    `sheet` (domain/pages)."""
    chunks = _Chunks(title, size, overlap, first_line, max_chunks)
    for level, name, block, start in _blocks(body):
        if level and paged in ("page", "slide") and is_mark_heading(level, name):
            chunks.page_mark(block, start)
        elif level and paged != "slide":  # a deck's other headings: its slides' titles
            chunks.heading(level, name, block, start)
        else:
            chunks.add(block, start)
    chunks.flush()
    return chunks.chunks


def plain_chunks(body: str, title: str, size: int, first_line: int = 1) -> list[Chunk]:
    """The body in chunks of `size` words, its structure left aside (the degraded form of a
    document whose structure is beyond its budget): as many chunks as its length needs."""
    chunks: list[Chunk] = []
    cursor, line = 0, first_line
    for piece in _split_large(body, size):
        text = piece.strip()
        if not text:
            continue
        at = body.find(text, cursor)
        line += body.count("\n", cursor, at)
        last = line + text.count("\n")
        chunks.append(Chunk(len(chunks), text, (title,), line, last))
        cursor, line = at + len(text), last
    return chunks
