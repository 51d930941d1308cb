"""Markdown-aware chunking: sections by heading first, then paragraphs, then lines, then words.

Sizes are in words: a run of non-space characters, or one CJK character (CJK has no spaces).
Code fences and tables stay whole when they fit. Every chunk carries its heading path,
which starts with the document title.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

from cofferd.application.markdown import heading
from cofferd.domain.models import Chunk
from cofferd.domain.scripts import CJK_RANGES

_ONE_WORD = f"[{CJK_RANGES}]|[^\\s{CJK_RANGES}]+"
_WORD = re.compile(_ONE_WORD)
_CJK_RUN = re.compile(f"[{CJK_RANGES}]+")
_SPACED_WORD = re.compile(f"[^\\s{CJK_RANGES}]+")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class TooManyChunks(Exception):
    """The document's structure would make more chunks than its budget allows."""


def count_words(text: str) -> int:
    return len(_SPACED_WORD.findall(text)) + sum(map(len, _CJK_RUN.findall(text)))


@cache
def _pieces_of(size: int) -> re.Pattern[str]:
    """Up to `size` words at a time, in one match (C speed, however long the line)."""
    return re.compile(f"(?:{_ONE_WORD})(?:\\s*(?:{_ONE_WORD})){{0,{size - 1}}}")


def _blocks(body: str) -> Iterator[tuple[int, str, str, int]]:
    """(heading level or 0, heading text, block text, index of its first line) for each
    block of the body."""
    lines = body.split("\n")
    para: list[str] = []
    start = 0
    fence: str | None = None
    for number, line in enumerate(lines):
        if fence is not None:
            para.append(line)
            if line.strip().startswith(fence):
                fence = None
                yield 0, "", "\n".join(para), start
                para = []
            continue
        m = _FENCE.match(line)
        if m:
            if para:
                yield 0, "", "\n".join(para), start
            para, start = [line], number
            fence = m.group(1)[0] * 3
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


def _split_large(text: str, size: int) -> list[str]:
    """Break one oversized block on lines, and a line that is still too big on words."""
    pieces: list[str] = []
    current: list[str] = []
    words = 0
    for line in text.split("\n"):
        n = count_words(line)
        if n > size:
            if current:
                pieces.append("\n".join(current))
                current, words = [], 0
            pieces += _pieces_of(size).findall(line)
            continue
        if words + n > size and current:
            pieces.append("\n".join(current))
            current, words = [], 0
        current.append(line)
        words += n
    if current:
        pieces.append("\n".join(current))
    return pieces


def _tail(text: str, words: int) -> str:
    """The last `words` words of `text`, read from a window at its end that grows until
    it holds them (a chunk can be long; its tail is short)."""
    if words <= 0:
        return ""
    window = words * 8
    while True:
        start = max(0, len(text) - window)
        starts = [m.start() for m in _WORD.finditer(text, start)]
        if start == 0:
            return text if len(starts) <= words else text[starts[-words] :]
        if len(starts) > words:  # the window's first word may be cut: never that one
            return text[starts[-words] :]
        window *= 4


def chunk_markdown(
    body: str,
    title: str,
    size: int,
    overlap: int,
    first_line: int = 1,
    max_chunks: int | None = None,
) -> list[Chunk]:
    """Chunks with the lines they come from (`first_line` is the body's first line in its
    file, counting from 1); TooManyChunks as soon as there would be more than
    `max_chunks`."""
    chunks: list[Chunk] = []
    path: list[tuple[int, str]] = []

    def heading_path() -> tuple[str, ...]:
        names = [name for _, name in path]
        return tuple(names if names and names[0] == title else [title, *names])

    section: list[str] = []
    section_words = 0
    section_parts = 0
    lines: list[int] = []  # first and last line of what the section holds

    def flush() -> None:
        nonlocal section, section_words, section_parts, lines
        text = "\n\n".join(section).strip()
        if text:
            if section_parts and overlap:
                previous = chunks[-1].text
                text = _tail(previous, overlap) + "\n\n" + text
            span = (first_line + min(lines), first_line + max(lines)) if lines else (0, 0)
            if max_chunks is not None and len(chunks) >= max_chunks:
                raise TooManyChunks
            chunks.append(Chunk(len(chunks), text, heading_path(), *span))
            section_parts += 1
        section, section_words, lines = [], 0, []

    for level, name, block, start in _blocks(body):
        if level:
            flush()
            section_parts = 0
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, name))
        n = count_words(block)
        if n > size:
            flush()
            cursor, first = 0, start
            for piece in _split_large(block, size - overlap if section_parts else size):
                at = block.find(piece, cursor)
                first += block.count("\n", cursor, at)  # counted on from the last piece
                cursor = at + len(piece)
                section, lines = [piece], [first, first + piece.count("\n")]
                first += piece.count("\n")
                flush()
            continue
        if section_words + n > size - (overlap if section_parts else 0):
            flush()
        section.append(block)
        section_words += n
        lines += [start, start + block.count("\n")]
    flush()
    return chunks


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
