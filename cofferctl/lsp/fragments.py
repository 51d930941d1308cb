"""Where a link's `#fragment` leads in its note, as Obsidian reads one: a heading (any case),
nested headings (`[[Help#Questions#Report bugs]]`: the second within the first's section),
a block (`[[Note#^block-id]]`: the block whose last line ends in ` ^block-id`); a Markdown
link's fragment percent-decoded. And what a hover shows of it: that section or block.
Each function reads the note's text once (headings by the daemon's grammar)."""

from __future__ import annotations

import re
from urllib.parse import unquote

from cofferd.markdown_grammar import headings

BLOCK_ID = re.compile(r"[A-Za-z0-9-]+")
SHOWN_LINES = 12
SHOWN_CHARS = 1000


def fragment_of(kind: str, target: str) -> str | None:
    """The fragment a link's target names after its first `#` (decoded when Markdown);
    None when it names none."""
    _, hash_, fragment = target.partition("#")
    if not hash_ or not fragment.strip():
        return None
    return unquote(fragment) if kind == "markdown" else fragment


def span_of(content: str, fragment: str) -> tuple[int, int] | None:
    """(first line, line after the last) of the section or block `fragment` names in
    `content`, lines from 0; None when there is none so named."""
    if fragment.startswith("^"):
        return _block(content, fragment[1:].strip())
    found = list(headings(content))
    wanted = [part.strip().casefold() for part in fragment.split("#") if part.strip()]
    start, end, level = 0, len(found), 0
    at = -1
    for part in wanted:
        at = next(
            (
                i
                for i in range(start, end)
                if found[i][2].casefold() == part and found[i][1] > level
            ),
            -1,
        )
        if at < 0:
            return None
        level = found[at][1]
        start = at + 1
        end = next((i for i in range(start, end) if found[i][1] <= level), end)
    if at < 0:
        return None
    last = found[end][0] if end < len(found) else content.count("\n") + 1
    return found[at][0], last


def _block(content: str, block_id: str) -> tuple[int, int] | None:
    if not BLOCK_ID.fullmatch(block_id):
        return None
    marker = " ^" + block_id
    lines = content.split("\n")
    for number, line in enumerate(lines):
        stripped = line.rstrip()
        if stripped.endswith(marker) or stripped == marker[1:]:
            first = number
            while first > 0 and lines[first - 1].strip():
                first -= 1
            return first, number + 1
    return None


def shown(content: str, span: tuple[int, int]) -> str:
    """The lines of `span`, as much as a hover shows."""
    lines = content.split("\n", span[1])[span[0] : span[1]]
    kept = [line for line in lines if line.strip()][:SHOWN_LINES]
    return "\n".join(kept)[:SHOWN_CHARS]


def nearest_heading(content: str, fragment: str) -> str | None:
    """The heading of `content` closest in spelling to `fragment` (its last part): what a
    diagnostic suggests for a heading that does not exist."""
    import difflib  # only when a heading is missing

    names = [name for _, _, name in headings(content)]
    wanted = fragment.rsplit("#", 1)[-1].strip()
    folded = {name.casefold(): name for name in names}
    close = difflib.get_close_matches(wanted.casefold(), list(folded), n=1, cutoff=0.5)
    return folded[close[0]] if close else None
