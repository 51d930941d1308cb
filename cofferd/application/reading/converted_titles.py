"""The title of a converted document added to a KB: the title its author gave it (the
format's own title property) when the converter found it a real title, else its first
heading (no page mark), else its file name. A title property another document of the KB
gives itself too gives way to the first heading in the index (domain.title_choice)."""

from __future__ import annotations

from pathlib import PurePath

from cofferd.domain.pages import first_heading


def converted_title(own: str | None, body: str, filename: str) -> str:
    """`own`: the title the converter found a real one (infrastructure.conversion
    .format_titles.usable_title and own_title_kept), or None."""
    return own or first_heading(body) or PurePath(filename).stem
