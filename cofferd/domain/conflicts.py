"""Copies that sync tools leave when two devices changed a file at once, and files that
hold git's merge-conflict markers.

    plan.sync-conflict-20261130-101500-ABCDEFG.md    Syncthing
    plan (Ana's conflicted copy 2026-11-30).md        Dropbox
    plan (conflicted copy 2026-11-30 101500).md       Nextcloud
    <<<<<<< HEAD ... ======= ... >>>>>>> branch      git, inside the file

A copy is not indexed (search would show every passage twice) but listed, with the
document it is a copy of, until someone merges it and deletes it. A file with merge
markers is the document itself: it stays searchable and is listed too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Linear: whatever follows the stem is tried only where its fixed start is (`.sync-`,
# ` (`), and reads no further than the next `(`, `)` or `.`; Dropbox's phrase is looked for
# once, ahead, not again from every place it occurs.
_EXT = r"(?P<ext>\.[^./]+)?$"
_COPIES = (
    ("syncthing", re.compile(r"^(?P<stem>.+?)\.sync-conflict-\d{8}-\d{6}(?:-[A-Z0-9]{7})?" + _EXT)),
    ("dropbox", re.compile(r"^(?P<stem>.+?) \((?=[^()]*'s conflicted copy)[^()]*\)" + _EXT)),
    ("nextcloud", re.compile(r"^(?P<stem>.+?) \(conflicted copy[^()]*\)" + _EXT)),
)
# A `<<<<<<<` line, then a `=======` line, then a `>>>>>>>` line, each searched once.
_MARKER_START = re.compile(r"^<{7}(?: |$)", re.MULTILINE)
_MARKER_MIDDLE = re.compile(r"^={7}$", re.MULTILINE)
_MARKER_END = re.compile(r"^>{7}(?: |$)", re.MULTILINE)


@dataclass(frozen=True)
class ConflictCopy:
    original: str  # the path it is a copy of, in the same folder
    tool: str


def conflict_copy(relpath: str) -> ConflictCopy | None:
    """What a file is a conflict copy of, by its name; None for any other file."""
    if "conflict" not in relpath:
        return None
    folder, _, name = relpath.rpartition("/")
    for tool, pattern in _COPIES:
        m = pattern.match(name)
        if m:
            original = m.group("stem") + (m.group("ext") or "")
            return ConflictCopy(f"{folder}/{original}" if folder else original, tool)
    return None


def has_merge_markers(text: str) -> bool:
    start = _MARKER_START.search(text) if "<<<<<<<" in text else None
    middle = start and _MARKER_MIDDLE.search(text, start.end())
    return bool(middle and _MARKER_END.search(text, middle.end()))


MARKERS_SHOWN = 1000  # merge-marker lines named for one text


def merge_marker_lines(text: str) -> list[int]:
    """The lines (from 1) of git's merge markers, when the text holds a whole conflict."""
    if not has_merge_markers(text):
        return []
    found = []
    for number, line in enumerate(text.split("\n"), 1):
        if line[:1] in "<=>" and (
            _MARKER_START.match(line) or _MARKER_MIDDLE.fullmatch(line) or _MARKER_END.match(line)
        ):
            found.append(number)
            if len(found) == MARKERS_SHOWN:
                break
    return found
