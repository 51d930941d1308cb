"""The title of a converted document: the title its author gave it (the format's own title
property) when that is a real title, else its first heading, else its file name."""

from __future__ import annotations

import re
from pathlib import PurePath

from cofferd.markdown_grammar import first_heading

TITLE_MAX_CHARS = 300
# what office programs, PDF printers, page templates and generators put there when nobody
# chose a title
PLACEHOLDERS = re.compile(
    r"(untitled|no title|title|document|doc|presentation|powerpoint presentation|"
    r"slide|title slide|book|sheet|workbook|page|new document|microsoft word document|"
    r"anonymous|unknown|none|null|n/?a|default|template|noname|empty|"
    r"(click|tap) to add (a )?title|(insert|enter|your|add) (the |a )?title( here)?|"
    r"(document|presentation|report|paper) title|"
    r"(untitled|new|blank) (document|presentation|spreadsheet|page))[ _-]*\d*",
    re.IGNORECASE,
)
# a title that is only punctuation around a placeholder: "(anonymous)", "[Untitled]"
WRAPPING = "()[]{}<>\"'\u201c\u201d\u2018\u2019\u00ab\u00bb-_.:;,*#~ "
# "Microsoft Word - plan.docx": a PDF printed from an office program names the program
PRINTED_BY = re.compile(r"^(microsoft )?(word|excel|powerpoint|office)\s+-\s+", re.IGNORECASE)
LOOKS_LIKE_A_PATH = re.compile(r"^([a-z]:)?[\\/]|[\\/][^ ]*[\\/]", re.IGNORECASE)
FILE_NAME = re.compile(
    r"\.(docx?|pptx?|xlsx?|pdf|html?|txt|md|odt|odp|ods|rtf|pages|key|numbers|epub)$",
    re.IGNORECASE,
)


def usable_title(raw: str | None) -> str | None:
    """`raw` made tidy, or None when it is empty, a placeholder or only a file's name."""
    if not raw:
        return None
    title = " ".join(raw.split())
    if PRINTED_BY.match(title) or FILE_NAME.search(title):
        return None
    if not any(c.isalnum() for c in title) or PLACEHOLDERS.fullmatch(title.strip(WRAPPING)):
        return None
    if LOOKS_LIKE_A_PATH.search(title):  # where a generator found the file, not a title
        return None
    if len(title) > TITLE_MAX_CHARS:
        return title[:TITLE_MAX_CHARS].rsplit(" ", 1)[0] + "…"
    return title


def converted_title(own: str | None, body: str, filename: str) -> str:
    return usable_title(own) or first_heading(body) or PurePath(filename).stem
