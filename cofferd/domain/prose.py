"""The lines of a Markdown body that are prose: what tags and links are read from.

Fenced code blocks, indented code and inline code spans are not prose: a `#define` or a
`[[x]]` in code is neither a tag nor a link.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+).+?\1")


def prose_lines(body: str) -> Iterator[tuple[int, str]]:
    """(index of the line in the body, the line with inline code blanked) for each line
    of prose."""
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
        yield number, _CODE_SPAN.sub(" ", line) if "`" in line else line
