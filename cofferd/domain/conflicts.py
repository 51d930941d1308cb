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

_EXT = r"(?P<ext>\.[^./]+)?$"
_COPIES = (
    ("syncthing", re.compile(r"^(?P<stem>.+?)\.sync-conflict-\d{8}-\d{6}(?:-[A-Z0-9]{7})?" + _EXT)),
    ("dropbox", re.compile(r"^(?P<stem>.+?) \([^()]*'s conflicted copy[^()]*\)" + _EXT)),
    ("nextcloud", re.compile(r"^(?P<stem>.+?) \(conflicted copy[^()]*\)" + _EXT)),
)
_MARKERS = re.compile(r"^<{7}(?: .*)?\n(?:.*\n)*?={7}\n(?:.*\n)*?>{7}(?: .*)?$", re.MULTILINE)


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
    return "<<<<<<<" in text and _MARKERS.search(text) is not None
