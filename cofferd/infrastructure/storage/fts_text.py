"""How text meets FTS5: one `porter unicode61` table that also finds CJK and short terms.

`unicode61` splits words on anything that is not a letter, digit or private-use character,
and it sees a run of Chinese/Japanese/Korean characters as one long "word". Before indexing
we put a SEPARATOR (the ASCII unit separator: one byte, a separator to unicode61 that it
reads without a table lookup, invisible to people) after every CJK character, so each
becomes a token of its own; a CJK query becomes a phrase of single characters, which finds
any 1-, 2- or 3-character substring through the index. Stored text and its highlighted
matches keep the original look once the separators are removed again; a snippet is cut
from them by its width on screen, not by tokens (a CJK character is one). Indexes before
schema 12 used a ZERO WIDTH SPACE (three bytes in UTF-8, and a table lookup each: a Chinese
corpus's index was 4.3x its text); migration 12 made them SEPARATORs.

User text never reaches FTS5 syntax: every term is rebuilt as a quoted phrase and the
phrases are OR-ed, which ranks English as well as plain BM25 over words (SciFact: see
docs/benchmarks.md) and cannot raise a syntax error.
"""

from __future__ import annotations

import array
import bisect
import ctypes
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from cofferd.domain.query_syntax import Query
from cofferd.domain.scripts import CJK_RANGES, WIDE_RANGES
from cofferd.infrastructure.storage import native

SEPARATOR = "\x1f"
ZWSP = "\u200b"  # the separator before schema 12; in a text, a separator as well
HIGHLIGHT_START = "\x02"
HIGHLIGHT_END = "\x03"

# runs split in pieces: a piece ends with a separator and the next starts with one, which
# tokenizes alike; one long run joined at once took superlinear time (43x for 16x the text)
_CJK_RUNS = re.compile(f"([{CJK_RANGES}]{{1,1024}})")  # kept by re.split
_CJK_ONE = re.compile(f"[{CJK_RANGES}]")
_WIDE_RUN = re.compile(f"[{WIDE_RANGES}]+")

# A snippet is this many columns wide on screen in any script: about 150 letters, or 75
# Chinese, Japanese or Korean characters (two columns each).
SNIPPET_COLUMNS = 150
KEPT_BUFFER = 1 << 20  # bytes of index_text's output buffer kept per thread (C)
WORD_CUT_MAX = 20  # characters looked at to end a snippet between words


# Characters unicode61 splits on anyway (blanks, punctuation, symbols: never a letter,
# digit or private-use character): a run beside one needs no SEPARATOR on that side.
SPLIT_ANYWAY = frozenset(
    " \t\n\r" + SEPARATOR + ",.;:!?()[]{}<>\"'-/"
    "\u3000，。、！？：；「」『』（）《》〈〉【】〔〕“”‘’・…—～．"  # noqa: RUF001
)
_JOINED_RUNS = SEPARATOR + "\n" + SEPARATOR
_SEPARATOR_CODE = [ord(SEPARATOR)]
_CODE_POINT = "I" if array.array("I").itemsize == 4 else "L"  # 4 bytes: a UTF-32 unit
_UTF32 = "utf-32-le" if sys.byteorder == "little" else "utf-32-be"  # as the array holds it
# index_text: where a run was (`_RUN`), and where it is to be followed by a SEPARATOR
# (`_MARK`, until the SEPARATORs before runs are placed): two CJK characters, so neither
# is in the text between runs.
_RUN, _MARK = "\u4e00", "\u4e01"
_RUN_AND_MARK = _RUN + _MARK
_NOT_SPLIT = "[^" + re.escape("".join(sorted(SPLIT_ANYWAY))) + "]"
_RUN_AFTER = re.compile(f"{_RUN}(?={_NOT_SPLIT})")
_RUN_BEFORE = re.compile(f"(?<={_NOT_SPLIT}){_RUN}")


def index_text(text: str) -> str:
    """Text as stored in FTS5: CJK characters split into single-character tokens. A ZWSP
    in the text becomes a SEPARATOR, as migration 12 made the ZWSPs of older indexes.
    Done in C where the install built native/cjk_tokens.c (3.5x as fast on Chinese text),
    else in Python (`python_index_text`): the same text out."""
    if text.isascii():  # no CJK and no ZWSP: as it is
        return text
    return _native_index_text(text) if _native_index_text else python_index_text(text)


def native_index_text(library: Path) -> Callable[[str], str] | None:
    """`index_text` in C, from the library built of native/cjk_tokens.c; None without it."""
    try:
        function = ctypes.CDLL(str(library)).coffer_index_text
    except (OSError, AttributeError):  # not built, or built before it had the function
        return None
    function.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p)
    function.restype = ctypes.c_size_t
    kept = threading.local()  # a buffer per thread: a new (zeroed) one each call cost more
    # than the C; one for a text past KEPT_BUFFER is made for it alone, not kept

    def index_text(text: str) -> str:
        try:
            data = text.encode()
        except UnicodeEncodeError:  # a lone surrogate: no UTF-8 for C to read
            return python_index_text(text)
        needed = 2 * len(data) + 16
        out = getattr(kept, "out", None)
        if needed > KEPT_BUFFER:
            out = ctypes.create_string_buffer(needed)
        elif out is None:
            out = kept.out = ctypes.create_string_buffer(KEPT_BUFFER)
        return ctypes.string_at(out, function(data, len(data), out)).decode()

    return index_text


def python_index_text(text: str) -> str:
    """`index_text` in Python."""
    if ZWSP in text:
        text = text.replace(ZWSP, SEPARATOR)
    if _CJK_ONE.search(text) is None:
        return text
    # A few calls over all of the text rather than a few for each run (a Chinese text has a
    # run between every two punctuation marks): the text before a run, the run, ...
    parts = _CJK_RUNS.split(text)
    runs = parts[1::2]
    # ... each run's characters split (no run holds a newline) ...
    parts[1::2] = _interleaved("\n".join(runs)).split(_JOINED_RUNS)
    # ... and beside a run too: `Pythonファイル` is the word `python`, then CJK characters.
    # The text between runs is joined with a CJK character where each run was (none is in
    # it), which gets a SEPARATOR on each side where unicode61 would not split already.
    # Nothing beside it: the text's start or end, or another piece of a long run.
    between = _RUN_AFTER.sub(_RUN_AND_MARK, _RUN.join(parts[0::2]))
    between = _RUN_BEFORE.sub(SEPARATOR + _RUN, between).replace(_MARK, SEPARATOR)
    parts[0::2] = between.split(_RUN)
    return "".join(parts)


_native_index_text = native_index_text(native.LIBRARY)


def _interleaved(text: str) -> str:
    """SEPARATOR.join(text), without a string object for each character: as code points
    (UTF-32), every other one a SEPARATOR."""
    codes = array.array(_CODE_POINT, text.encode(_UTF32))
    spread = array.array(_CODE_POINT, bytes(8 * len(codes)))
    spread[0::2] = codes
    spread[1::2] = array.array(_CODE_POINT, _SEPARATOR_CODE) * len(codes)
    return spread.tobytes().decode(_UTF32)[:-1]


def display_text(text: str) -> str:
    return text.replace(SEPARATOR, "")


def unmark(marked: str) -> tuple[str, list[tuple[int, int]]]:
    """Text with its matches marked (FTS5 highlight()): the text without the marks, and
    where each mark was, [start, end)."""
    plain: list[str] = []
    spans: list[tuple[int, int]] = []
    length = 0
    for i, part in enumerate(marked.split(HIGHLIGHT_START)):
        hit, _, rest = part.partition(HIGHLIGHT_END) if i else ("", "", part)
        if hit:
            spans.append((length, length + len(hit)))
        plain.append(hit + rest)
        length += len(hit) + len(rest)
    return "".join(plain), spans


def snippet(marked: str, columns: int = SNIPPET_COLUMNS) -> tuple[str, int]:
    """About `columns` of a passage as a terminal shows them, matches still marked: the
    stretch with the most different matches (the start when none), cut between words, `…`
    where it is cut. A wide character (CJK) takes two columns, so a Chinese snippet is as
    wide on screen as an English one, not as many characters. With it, where in the
    passage's text (its marks out) the snippet's first match is (where it starts, if none)."""
    text, spans = unmark(marked)
    at = _Columns(text)
    if at.column(len(text)) <= columns:
        return marked, spans[0][0] if spans else 0
    first, last = _most_matches(text, spans, at, columns)
    lead = max(0, columns - (at.column(last[1]) - at.column(first[0]))) // 2
    begin = max(0, min(at.column(first[0]) - lead, at.column(len(text)) - columns))
    start = _word_start(text, at.index_from(begin), first[0])
    end = _word_end(text, at.index_until(begin + columns), max(start, last[1]))
    inside = [(a - start, b - start) for a, b in spans if start <= a and b <= end]
    shown = (
        ("…" if start else "") + _mark(text[start:end], inside) + ("…" if end < len(text) else "")
    )
    return shown, start + (inside[0][0] if inside else 0)


class _Columns:
    """Where a text's characters are on screen: one column each, two for a wide one."""

    def __init__(self, text: str) -> None:
        self.starts: list[int] = []  # the runs of wide characters
        self.ends: list[int] = []
        self.wide_before: list[int] = []  # wide characters before each run
        wide = 0
        for run in _WIDE_RUN.finditer(text):
            self.starts.append(run.start())
            self.ends.append(run.end())
            self.wide_before.append(wide)
            wide += run.end() - run.start()
        self.length = len(text)

    def column(self, index: int) -> int:
        """The column where the character at `index` starts."""
        run = bisect.bisect_right(self.starts, index) - 1
        if run < 0:
            return index
        return index + self.wide_before[run] + min(index, self.ends[run]) - self.starts[run]

    def index_from(self, column: int) -> int:
        """The first index at `column` or after it (the length when none is)."""
        low, high = 0, self.length
        while low < high:
            middle = (low + high) // 2
            if self.column(middle) < column:
                low = middle + 1
            else:
                high = middle
        return low

    def index_until(self, column: int) -> int:
        """The last index at `column` or before it: the text before it fits in `column`."""
        low, high = 0, self.length
        while low < high:
            middle = (low + high + 1) // 2
            if self.column(middle) <= column:
                low = middle
            else:
                high = middle - 1
        return low


def _most_matches(
    text: str, spans: list[tuple[int, int]], at: _Columns, columns: int
) -> tuple[tuple[int, int], tuple[int, int]]:
    """The first and last match of the stretch at most `columns` wide that holds the most
    different matched words (then the most matches; the first such); the text's start
    when nothing is marked, or no match fits."""
    if not spans:
        return (0, 0), (0, 0)
    words = [text[a:b].lower() for a, b in spans]
    held: dict[str, int] = {}
    best, first, last = (0, 0), spans[0], spans[0]
    j = 0
    for i, (a, _) in enumerate(spans):
        j = max(j, i)
        while j < len(spans) and at.column(spans[j][1]) - at.column(a) <= columns:
            held[words[j]] = held.get(words[j], 0) + 1
            j += 1
        if (len(held), j - i) > best:
            best, first, last = (len(held), j - i), spans[i], spans[j - 1]
        if j > i:
            held[words[i]] -= 1
            if not held[words[i]]:
                del held[words[i]]
    return first, last


def _in_word(text: str, index: int) -> bool:
    """Whether `index` falls inside a word (CJK, without spaces, may be cut anywhere)."""
    return 0 < index < len(text) and all(
        ch.isalnum() and not _CJK_ONE.match(ch) for ch in text[index - 1 : index + 1]
    )


def _word_start(text: str, index: int, limit: int) -> int:
    """`index`, moved on past a word it falls inside (not beyond `limit`, nor
    WORD_CUT_MAX characters) and the blanks after it."""
    stop = min(limit, index + WORD_CUT_MAX)
    moved = index
    while _in_word(text, moved) and moved < stop:
        moved += 1
    if _in_word(text, moved) and moved < limit:
        moved = index  # a word too long to skip: cut inside it
    while moved < limit and text[moved].isspace():
        moved += 1
    return moved


def _word_end(text: str, index: int, limit: int) -> int:
    """`index`, moved back before a word it falls inside (not before `limit`, nor
    WORD_CUT_MAX characters) and the blanks before it."""
    stop = max(limit, index - WORD_CUT_MAX)
    moved = index
    while _in_word(text, moved) and moved > stop:
        moved -= 1
    if _in_word(text, moved) and moved > limit:
        moved = index
    while moved > limit and text[moved - 1].isspace():
        moved -= 1
    return moved


def _mark(text: str, spans: list[tuple[int, int]]) -> str:
    out: list[str] = []
    at = 0
    for a, b in spans:
        out += [text[at:a], HIGHLIGHT_START, text[a:b], HIGHLIGHT_END]
        at = b
    out.append(text[at:])
    return "".join(out)


def match(query: Query, *, prefix: bool = False) -> str | None:
    """The FTS5 MATCH string of a query (its words as prefixes with `prefix`), or None
    when nothing can match."""
    if query.phrases:
        required = all_of(query.phrases)
        if query.words:
            required = f"({required}) AND ({match_expression(query.phrases + query.words)})"
    elif query.words:
        required = match_expression(query.words, prefix=prefix)
    else:
        return None
    if query.excluded:
        return f"({required}) NOT ({match_expression(query.excluded)})"
    return required


def all_of(terms: list[list[str]]) -> str:
    """An FTS5 MATCH string: every one of the terms."""
    return " AND ".join(_phrase(t) for t in terms)


def _phrase(tokens: list[str], prefix: bool = False) -> str:
    quoted = '"' + " ".join(t.replace('"', '""') for t in tokens) + '"'
    return quoted + " *" if prefix else quoted


def match_expression(terms: list[list[str]], *, prefix: bool = False) -> str:
    """An FTS5 MATCH string: any of the terms."""
    return " OR ".join(_phrase(t, prefix=prefix and not _CJK_ONE.match(t[-1])) for t in terms)


# x top_k: the index stems, so more matches of a quoted phrase are read than are asked
# for, to keep those that hold it word for word (Query.holds_phrases)
PHRASE_CANDIDATES = 5

# bm25 weights for (text, heading, meta): a match in the title, an alias or a tag counts
# twice a match in the text (measured best of 0-2 on SciFact, CMRC 2018 and JSQuAD, with
# titles as a heading and as frontmatter: docs/benchmarks.md).
RANK = "bm25(1.0, 0.5, 2.0)"


def rank_of(table: str) -> str:
    """RANK as an SQL expression over `table`'s matched row (lower is better)."""
    return RANK.replace("bm25(", f"bm25({table}, ", 1)
