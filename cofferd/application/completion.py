"""Notes by the names people type for them, best first: what an editor offers after `[[`.

A note answers to its file name (without `.md`), its title, its aliases and its path.
What was typed (`q`, any case, NFC) is looked for in each, and a note ranks by its best
match: its file name starts so; its title or an alias does; a word of any of them does;
any of them holds it (the match for CJK, written without spaces); its letters appear in
that order in one of them (only when fewer notes than asked for matched so far). Among
equals, the note edited last comes first, then the shorter path.

Each note's link is what Obsidian writes with "shortest path when possible": the file
name when no other note has it, else the path; both without `.md`.
"""

from __future__ import annotations

import heapq
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

_SUFFIX = re.compile(r"\.(md|markdown)$", re.IGNORECASE)
_WORDS = re.compile(r"[\s\-_/.,;:()]+")
QUERY_MAX_CHARS = 200  # longer is no name anyone types


@dataclass(frozen=True)
class Named:
    path: str
    title: str
    aliases: tuple[str, ...]
    link: str  # what a wiki link to it says


@dataclass(frozen=True)
class _Entry:
    named: Named
    recency: int  # 0: edited last
    stem: str  # folded, as are the rest
    names: tuple[str, ...]  # title and aliases
    words: tuple[str, ...]
    texts: tuple[str, ...]  # the file name, title, aliases and path
    joined: str  # every text, to look for a substring once


class NameIndex:
    """A KB's notes, ready to be completed."""

    def __init__(self, rows: Iterable[tuple[str, str, Iterable[str], str]]) -> None:
        """rows: (path, title, aliases, updated_at)."""
        listed = sorted(rows, key=lambda row: row[3], reverse=True)
        stems = [_SUFFIX.sub("", path).rsplit("/", 1)[-1] for path, *_ in listed]
        taken = Counter(_fold(stem) for stem in stems)
        self._entries: list[_Entry] = []
        for recency, ((path, title, aliases, _), stem) in enumerate(
            zip(listed, stems, strict=True)
        ):
            folded_stem = _fold(stem)
            link = stem if taken[folded_stem] == 1 else _SUFFIX.sub("", path)
            names = tuple(_fold(text) for text in (title, *aliases) if text)
            bare_path = _fold(_SUFFIX.sub("", path))
            texts = (folded_stem, *names, bare_path)
            self._entries.append(
                _Entry(
                    Named(path, title, tuple(aliases), link),
                    recency,
                    folded_stem,
                    names,
                    tuple(w for text in texts for w in _WORDS.split(text) if w),
                    texts,
                    "\n".join(texts),
                )
            )

    def __len__(self) -> int:
        return len(self._entries)

    def complete(self, typed: str, limit: int) -> list[Named]:
        q = _fold(typed.strip())[:QUERY_MAX_CHARS]
        if not q:
            return [entry.named for entry in self._entries[:limit]]
        found: list[tuple[int, int, int, str, Named]] = []
        for entry in self._entries:
            if q in entry.joined:
                found.append((_tier(entry, q), *_order(entry)))
        if len(found) < limit and len(q) > 1:
            found += [
                (4, *_order(entry))
                for entry in self._entries
                if q not in entry.joined and any(_in_order(q, text) for text in entry.texts)
            ]
        return [item[-1] for item in heapq.nsmallest(limit, found)]


def _tier(entry: _Entry, q: str) -> int:
    if entry.stem.startswith(q):
        return 0
    if any(name.startswith(q) for name in entry.names):
        return 1
    if any(word.startswith(q) for word in entry.words):
        return 2
    return 3


def _order(entry: _Entry) -> tuple[int, int, str, Named]:
    return entry.recency, len(entry.named.path), entry.named.path, entry.named


def _in_order(q: str, text: str) -> bool:
    """Whether the letters of `q` appear in `text` in that order (one pass over `text`)."""
    at = 0
    for letter in q:
        at = text.find(letter, at) + 1
        if not at:
            return False
    return True


def _fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()
