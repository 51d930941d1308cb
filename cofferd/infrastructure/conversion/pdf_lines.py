"""A PDF page's lines as its reader reads them, from PDFium's text page (pypdfium2).

PDFium writes a page's text in the order of its content stream, with the spaces a reader
sees (from the gaps between glyphs, not only from space characters) and a line break where
a line ends; a word it finds cut by a hyphen at a line's end it writes with U+FFFE in
place of the hyphen and no line break. Here that text is cut into lines, each with the
boxes PDFium draws around its runs of glyphs, and the lines are put in reading order by
cutting the page where nothing is printed: first down a gutter between columns of prose
(wide lines on both sides: never between the cells of a form or the words of a row),
else across a gap of at least a line's height; what cannot be cut keeps the stream's
order. A line PDFium joined across a gutter (a PDF that writes both columns' lines row by
row) is cut at the gutter; where no gutter is cut its parts stay one line.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

HYPHEN_MARK = "\ufffe"  # PDFium's hyphen at a line's end that cuts a word, in its text
PDFIUM_HYPHEN = 0x02  # the same hyphen, as its character's code
NO_LETTER = "\x00"  # a character that is no letter (a glyph mapped to no code)
MAX_SEGMENTS = 2_000  # a page with more runs keeps its stream's order (bounded work)
COLUMN_MIN_SHARE = 0.18  # of the page's text width: a column's lines are at least this wide
COLUMN_MIN_LINES = 3
GUTTER_MIN = 4.0  # points: a narrower gap between lines is no gutter
GUTTERS_TRIED = 8
GAP_FACTOR = 1.5  # a gap between runs of a line wider than this many line heights splits it

Box = tuple[float, float, float, float]  # left, bottom, right, top (PDF points, y up)


@dataclass(slots=True)
class Segment:
    """A run of a line's text: a whole line, or its part on one side of a gutter."""

    text: str
    line: int  # the line it is part of, in the stream's order
    box: Box


def page_text(text_page: Any, tables: Sequence[tuple[Box, str]] = ()) -> str:
    """The page's text, a line a line, in reading order; each of `tables` (its box, its
    Markdown) in place of the lines inside its box."""
    text = text_page.get_text_range()
    if not text.strip():
        return ""
    segments = _segments(text_page, text)
    if tables:
        segments = _with_tables(segments, tables)
    if len(segments) > MAX_SEGMENTS:
        return _written(segments)
    width = max(s.box[2] for s in segments) - min(s.box[0] for s in segments)
    heights = [s.box[3] - s.box[1] for s in segments if s.box[3] > s.box[1]]
    line_height = statistics.median(heights) if heights else 10.0
    return _written(_ordered(segments, width, line_height))


def _segments(text_page: Any, text: str) -> list[Segment]:
    """Each line of PDFium's text with its box, cut where its runs lie far apart."""
    count = text_page.count_chars()
    if len(text) != count:  # characters PDFium's text leaves out (a glyph of no letter)
        text = _character_by_character(text_page, count)
    segments: list[Segment] = []
    start = 0
    for number, line in enumerate(text.split("\r\n")):
        if _clean(line):
            segments += _runs(text_page, line, start, number)
        start += len(line) + 2
    return segments


def _character_by_character(text_page: Any, count: int) -> str:
    """The page's text a character for each of PDFium's (its index the text's offset),
    those of no letter NO_LETTER (taken out of each line once it is cut)."""
    import pypdfium2.raw as pdfium_c

    raw = text_page.raw
    chars = []
    for index in range(count):
        code = pdfium_c.FPDFText_GetUnicode(raw, index)
        if code == PDFIUM_HYPHEN:
            chars.append(HYPHEN_MARK)
        elif code == 0 or 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
            chars.append(NO_LETTER)
        else:
            chars.append(chr(code))
    return "".join(chars)


def _runs(text_page: Any, line: str, start: int, number: int) -> list[Segment]:
    count = text_page.count_rects(start, len(line))
    boxes: list[Box] = [text_page.get_rect(i) for i in range(count)]
    if not boxes:
        return [Segment(_clean(line), number, (0.0, 0.0, 0.0, 0.0))]
    height = max(b[3] - b[1] for b in boxes)
    groups: list[list[Box]] = [[boxes[0]]]
    for box in boxes[1:]:
        last = groups[-1][-1]
        if box[0] - last[2] > GAP_FACTOR * max(height, 1.0) and _same_row(box, last):
            groups.append([box])
        else:
            groups[-1].append(box)
    if len(groups) == 1:
        return [Segment(_clean(line), number, _union(boxes))]
    bounds = [0, *(_index_at(text_page, group[0]) - start for group in groups[1:]), len(line)]
    if any(a >= b for a, b in itertools.pairwise(bounds)):
        return [Segment(_clean(line), number, _union(boxes))]  # cannot say where: whole
    parts = [line[a:b] for a, b in itertools.pairwise(bounds)]
    return [
        Segment(_clean(part), number, _union(group))
        for part, group in zip(parts, groups, strict=True)
        if _clean(part)
    ]


def _clean(text: str) -> str:
    return text.replace(NO_LETTER, "").strip()


def _same_row(a: Box, b: Box) -> bool:
    return min(a[3], b[3]) > max(a[1], b[1])


def _index_at(text_page: Any, box: Box) -> int:
    """The index of the character at a run's left edge (-1: none found there)."""
    middle = (box[1] + box[3]) / 2
    found = text_page.get_index(box[0] + 0.5, middle, 2.0, (box[3] - box[1]) / 2)
    return found if isinstance(found, int) else -1


def _union(boxes: Sequence[Box]) -> Box:
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def _with_tables(segments: list[Segment], tables: Sequence[tuple[Box, str]]) -> list[Segment]:
    """The segments outside every table's box, and each table as one segment where its
    first line inside stood."""
    kept: list[Segment] = []
    placed: set[int] = set()
    for segment in segments:
        inside = next((n for n, (box, _) in enumerate(tables) if _within(segment.box, box)), None)
        if inside is None:
            kept.append(segment)
        elif inside not in placed:
            placed.add(inside)
            box, markdown = tables[inside]
            kept.append(Segment(markdown, -1 - inside, box))
    return kept


def _within(inner: Box, outer: Box) -> bool:
    x = (inner[0] + inner[2]) / 2
    y = (inner[1] + inner[3]) / 2
    return outer[0] <= x <= outer[2] and outer[1] <= y <= outer[3]


def _ordered(segments: list[Segment], width: float, line_height: float) -> list[Segment]:
    """The segments in reading order: the region cut down a gutter between columns, else
    across a gap, each part in turn (left before right, top before bottom)."""
    out: list[Segment] = []
    todo: list[list[Segment]] = [segments]
    while todo:
        region = todo.pop()
        parts = _columns(region, width) or _bands(region, line_height)
        if parts is None:
            out += region
        else:
            todo += reversed(parts)
    return out


def _columns(region: list[Segment], width: float) -> list[list[Segment]] | None:
    """The region cut at the widest gutter that has a column of prose on both sides (of
    the GUTTERS_TRIED widest gaps: a page of scattered words costs no more)."""
    if len(region) < 2 * COLUMN_MIN_LINES:
        return None
    spans = sorted((s.box[0], s.box[2]) for s in region)
    gaps: list[tuple[float, float]] = []  # (width, where to cut)
    reach = spans[0][1]
    for left, right in spans[1:]:
        if left - reach >= GUTTER_MIN:
            gaps.append((left - reach, (reach + left) / 2))
        reach = max(reach, right)
    for _, cut in sorted(gaps, reverse=True)[:GUTTERS_TRIED]:
        sides = _split_at(region, cut)
        if all(_is_column(side, width) for side in sides):
            return list(sides)
    return None


def _split_at(region: list[Segment], x: float) -> tuple[list[Segment], list[Segment]]:
    return [s for s in region if s.box[2] <= x], [s for s in region if s.box[2] > x]


def _is_column(side: list[Segment], width: float) -> bool:
    if len(side) < COLUMN_MIN_LINES:
        return False
    wide = statistics.median(s.box[2] - s.box[0] for s in side)
    return wide >= COLUMN_MIN_SHARE * width


def _bands(region: list[Segment], line_height: float) -> list[list[Segment]] | None:
    """The region cut across every gap of at least a line's height, top band first."""
    if len(region) < 2:
        return None
    by_top = sorted(region, key=lambda s: -s.box[3])
    bands: list[list[Segment]] = [[by_top[0]]]
    floor = by_top[0].box[1]
    for segment in by_top[1:]:
        if floor - segment.box[3] >= line_height:
            bands.append([segment])
        else:
            bands[-1].append(segment)
        floor = min(floor, segment.box[1])
    if len(bands) == 1:
        return None
    order = {id(s): n for n, s in enumerate(region)}  # each band in the stream's order
    return [sorted(band, key=lambda s: order[id(s)]) for band in bands]


def _written(segments: list[Segment]) -> str:
    """A line for each segment; parts of one line that stayed together joined again."""
    lines: list[str] = []
    last = None
    for segment in segments:
        if segment.line == last and segment.line >= 0:
            lines[-1] += " " + segment.text
        else:
            lines.append(segment.text)
        last = segment.line
    return "\n".join(lines)
