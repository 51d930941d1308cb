"""The names Coffer gives the files it adds: readable (the document's title), valid on every
system a folder may be synced to (Windows, macOS, Linux, Android), and unique in their
folder; and the folder of a knowledge base a document is added to."""

from __future__ import annotations

import re
import unicodedata

NAME_MAX_BYTES = 120  # UTF-8, before `.md`: well inside every filesystem's 255
UNTITLED = "Untitled"
# Windows and macOS refuse the first nine in a name; wiki links break on the last four.
_REFUSED_CHARACTERS = frozenset('<>:"/\\|?*' + "#^[]")
_BREAKS = frozenset(("Cc", "Zl", "Zp"))  # tabs, new lines: a space
_INVISIBLE = frozenset(("Cf", "Cs", "Co"))  # format controls (bidi, zero-width), surrogates
# A name Windows keeps for a device, whatever its extension (`con.md`, `com1.notes.md`).
_WINDOWS_DEVICE = re.compile(r"(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])", re.IGNORECASE)
FOLDER_MAX = 1024  # bytes of a folder's path inside a knowledge base
PART_MAX = 255  # bytes of one folder's name: every filesystem's limit


def file_stem(title: str) -> str:
    """A file name (without `.md`) that reads as the title: NFC; characters no system
    accepts become spaces and invisible ones go; no leading dot (a hidden file) or `~`,
    no trailing dot or space (Windows drops them); at most NAME_MAX_BYTES; never a
    Windows device name."""
    text = "".join(_kept(ch) for ch in unicodedata.normalize("NFC", title))
    stem = " ".join(text.split()).lstrip(".~ ")
    stem = _cut(stem, NAME_MAX_BYTES).rstrip(". ")
    if not stem:
        return UNTITLED
    first, dot, rest = stem.partition(".")
    if _WINDOWS_DEVICE.fullmatch(first.rstrip()):
        return f"{first}_{dot}{rest}"
    return stem


def numbered(stem: str, n: int) -> str:
    """The file name of the `n`th document with this stem in one folder: `Plan.md`, then
    `Plan 2.md`, `Plan 3.md`, ... (still within NAME_MAX_BYTES)."""
    if n == 1:
        return f"{stem}.md"
    suffix = f" {n}"
    return f"{_cut(stem, NAME_MAX_BYTES - len(suffix)).rstrip('. ')}{suffix}.md"


def same_name(name: str) -> str:
    """What two names have in common when a filesystem takes them for the same file: case
    (macOS, Windows) and Unicode form (macOS)."""
    return unicodedata.normalize("NFC", name).casefold()


def folder_in_kb(folder: str) -> str:
    """A folder of a knowledge base, relative to its top (`Inbox`, `areas/cooking`; "" is
    the top): NFC, without a trailing `/`. ValueError for an absolute path, `..`, `.`, an
    empty part, a NUL, or a name longer than a filesystem holds."""
    cleaned = unicodedata.normalize("NFC", folder).rstrip("/")
    parts = cleaned.split("/")
    if cleaned and (
        folder.startswith("/")
        or any(part in ("", ".", "..") or len(part.encode()) > PART_MAX for part in parts)
        or "\0" in cleaned
        or len(cleaned.encode()) > FOLDER_MAX
    ):
        raise ValueError(
            "must be a folder inside the knowledge base, like Inbox or areas/cooking (not an "
            f"absolute path, no '..'); got {folder[:200]!r}"
        )
    return cleaned


def _kept(ch: str) -> str:
    if ch in _REFUSED_CHARACTERS:
        return " "
    category = unicodedata.category(ch)
    if category in _BREAKS:
        return " "
    return "" if category in _INVISIBLE else ch


def _cut(text: str, limit: int) -> str:
    """At most `limit` bytes of UTF-8, never half a character nor a mark without its base."""
    data = text.encode()
    if len(data) <= limit:
        return text
    cut = data[:limit].decode("utf-8", "ignore")
    while cut and unicodedata.category(text[len(cut)]).startswith("M"):
        cut = cut[:-1]  # the cut parts a letter from its marks: the letter goes too
    return cut
