"""What indexing one document may cost, in one place.

Every file is someone else's input. Whatever it holds, preparing it for the index stays
within these bounds; a document beyond one of them is still indexed, in a bounded form
(the first part of its text, or its text in plain fixed-size chunks), and the reason is
kept with it (`metadata.degraded`, `GET .../skipped`, `documents_degraded`). A document
that cannot be prepared within its time is skipped with its reason.

The figures are chosen so that indexing any one Markdown or text file raises the daemon's
memory by tens of megabytes at most, and none of them binds an ordinary note. The text of a
document in another format passes through the daemon once, on its way from the converter
to the data home: it is bounded there (the converter's reply at 256 MiB, the text at 32
million characters, infrastructure.conversion.converter and application.conversion_queue),
and is then indexed within these same figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from coffer_kernel.markdown_grammar import HEADING_CHARS, HEADING_LINE_CHARS

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Budget:
    # Text read into the index; the rest of a longer file is still grep's, not search's.
    indexed_bytes: int = 16 * MiB
    # Chunks of one document as its headings and paragraphs cut it; beyond, the text is
    # cut into plain chunks of the KB's size, which its length bounds.
    chunks: int = 20_000
    # A heading's text as kept in every chunk's heading path (and as a title).
    heading_chars: int = HEADING_CHARS  # (the Markdown grammar's)
    # A longer line is text, never a heading.
    heading_line_chars: int = HEADING_LINE_CHARS
    links: int = 2_000
    tags: int = 200
    aliases: int = 50
    # Wall clock to read and prepare one document, in a worker process; over it, the
    # worker is replaced and the document skipped.
    prepare_s: float = 30.0


DEFAULT = Budget()


def size_text(n: int) -> str:
    """A byte count as people read it: `16 MiB`, `2.5 MiB`, `900 KiB`."""
    if n >= MiB:
        value = n / MiB
        return f"{value:.0f} MiB" if value.is_integer() or value >= 100 else f"{value:.1f} MiB"
    return f"{max(1, round(n / 1024))} KiB"
