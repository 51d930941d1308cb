"""The lines of a Markdown body that are prose: what tags and links are read from.

Fenced code blocks, indented code and inline code spans are not prose: a `#define` or a
`[[x]]` in code is neither a tag nor a link.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BACKTICKS = re.compile(r"`+")


def prose_lines(body: str) -> Iterator[tuple[int, str]]:
    """(index of the line in the body, the line with inline code blanked) for each line
    of prose; what is left is where it was in the line."""
    fence: str | None = None
    for number, line in enumerate(body.split("\n")):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence:
                fence = None
            continue
        if m:
            fence = m.group(1)[0]
            continue
        if line.startswith(("    ", "\t")):  # indented code
            continue
        yield number, blank_code_spans(line) if "`" in line else line


def blank_code_spans(line: str) -> str:
    """The line with each code span replaced by as many spaces, where ``(`+).+?\\1``
    finds them, in one pass over the line's runs of backticks.

    A span opens with a run of backticks and closes at the first later place that has as
    many in a row; the opener is the longest that can be closed (a longer run closes it
    with its first backticks; a run of 5 or more alone holds a short span, as in `` ` ``).
    """
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(line)]
    longest_after = [0] * (len(runs) + 1)  # the longest of runs[r:]
    for r in range(len(runs) - 1, -1, -1):
        longest_after[r] = max(longest_after[r + 1], runs[r][1] - runs[r][0])
    pieces: list[str] = []
    kept = 0  # line[kept:] is not replaced
    r = 0
    while r < len(runs):
        start = max(runs[r][0], kept)
        opener = runs[r][1] - start
        size = max(min(opener, longest_after[r + 1]), (opener - 1) // 2)
        if size <= 0:
            r += 1
            continue
        if 2 * size + 1 <= opener:  # closed inside its own run
            close = start + size + 1
        else:
            r += 1
            while runs[r][1] - runs[r][0] < size:
                r += 1
            close = runs[r][0]
        pieces += [line[kept:start], " " * (close + size - start)]
        kept = close + size
    pieces.append(line[kept:])
    return "".join(pieces)
