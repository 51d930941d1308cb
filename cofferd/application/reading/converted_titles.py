"""The title of a converted document added to a KB: the title its author gave it (the
format's own title property) when the converter found it a real title, else its first
heading (no page mark), else its file name."""

from __future__ import annotations

from pathlib import PurePath

from coffer_kernel.markdown_grammar import headings
from cofferd.domain.pages import is_mark_heading


def converted_title(own: str | None, body: str, filename: str) -> str:
    """`own`: the title the converter found a real one (infrastructure.conversion
    .format_titles.usable_title), or None."""
    return own or _first_heading(body) or PurePath(filename).stem


def _first_heading(body: str) -> str | None:
    """The first heading that is no page, slide or sheet mark (domain.pages)."""
    for _, level, name in headings(body):
        if not is_mark_heading(level, name):
            return name
    return None
