"""Where a link's `#fragment` leads in its note, as Obsidian reads one (the rules are
`coffer_kernel.link_targets`, shared with the daemon's `links --broken`): a heading (any case),
nested headings (`[[Help#Questions#Report bugs]]`: the second within the first's section),
a block (`[[Note#^block-id]]`: the block whose last line ends in ` ^block-id`); a Markdown
link's fragment percent-decoded. And what a hover shows of it: that section or block."""

from __future__ import annotations

from coffer_kernel.link_targets import (
    fragment_of,
    has_fragments,
    missing_fragment,
    nearest_heading,
    span_of,
)

__all__ = ["fragment_of", "has_fragments", "missing_fragment", "nearest_heading", "shown",
           "span_of"]  # fmt: skip

SHOWN_LINES = 12
SHOWN_CHARS = 1000


def shown(content: str, span: tuple[int, int]) -> str:
    """The lines of `span`, as much as a hover shows."""
    lines = content.split("\n", span[1])[span[0] : span[1]]
    kept = [line for line in lines if line.strip()][:SHOWN_LINES]
    return "\n".join(kept)[:SHOWN_CHARS]
