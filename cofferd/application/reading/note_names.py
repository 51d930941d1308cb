"""Notes by the names people type for them, best first: what an editor offers after `[[`.

A note answers to its file name (without `.md`), its title, its aliases and its path.
What was typed (`q`, any case, NFC) is looked for in each, and a note ranks by its best
match: its file name starts so; its title, an alias or its path does; a word of any does;
any of them holds it (the match for CJK, written without spaces); its letters appear in
that order close together in one of them, within `FUZZY_SPAN` times as many characters
as were typed (only when fewer notes than asked for matched so far, and only the
`FUZZY_FEW` tightest: what was typed matching nothing offers nothing, not notes whose
names merely hold its letters far apart). Among equals, the note edited last comes first.

Each note's link is what Obsidian writes with "shortest path when possible": the file
name when no other note has it, else the path; both without `.md`. A KB whose wiki links
mostly say `.md`, or mostly name whole paths, gets its links written its way; one that
mostly links notes with Markdown links is told so (`LinkStyle`), for the editor to write.
"""

from __future__ import annotations

import json
import re
import unicodedata
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate

from coffer_kernel.markdown_grammar import MARKDOWN_SUFFIX

_CLEAN = re.compile(r"[\n\0]")  # the separators, never part of a name
QUERY_MAX_CHARS = 200  # longer is no name anyone types
WORD_SEPARATORS = " -_/."  # what starts a word in a name
FUZZY_SPAN = 3  # letters in order count when they lie within 3x as many characters
FUZZY_FEW = 5  # at most so many notes matched by letters in order, the tightest first
FUZZY_SEEN = 4 * FUZZY_FEW  # so matched, the tightest chosen among the first so many


@dataclass(frozen=True)
class Named:
    path: str
    title: str
    aliases: tuple[str, ...]
    link: str  # what a wiki link to it says


@dataclass(frozen=True)
class LinkStyle:
    """How a KB writes links to its notes, learnt from the links it has: most decide."""

    markdown: bool = False  # `[title](folder/note.md)`, not `[[note]]`
    extension: bool = False  # `[[note.md]]`, not `[[note]]`
    whole_path: bool = False  # `[[folder/note]]` even when the file name alone would do

    @classmethod
    def learn(cls, links: Iterable[tuple[str, str]]) -> LinkStyle:
        """From (type, target as written) of links; Markdown links to other files (an
        image, a PDF) say nothing of how notes are linked."""
        wiki: list[str] = []
        markdown = 0
        for kind, target in links:
            named = target.split("#", 1)[0]
            if kind == "wiki" and named:
                wiki.append(named)
            elif kind == "markdown" and MARKDOWN_SUFFIX.search(named):
                markdown += 1
        with_extension = sum(1 for t in wiki if MARKDOWN_SUFFIX.search(t))
        with_folder = sum(1 for t in wiki if "/" in t)
        return cls(
            markdown > len(wiki), 2 * with_extension > len(wiki), 2 * with_folder > len(wiki)
        )

    def as_dict(self) -> dict[str, bool]:
        return {
            "markdown": self.markdown,
            "extension": self.extension,
            "whole_path": self.whole_path,
        }


Row = tuple[str, str, str, str]  # (path, title, aliases as JSON, updated_at), as stored


@dataclass(frozen=True)
class _Note:
    """What a stored row gives, worked out once and kept while the row stays the same."""

    path: str
    title: str
    aliases: tuple[str, ...]
    bare_path: str  # without `.md`
    stem: str
    folded_stem: str
    texts: str  # folded, `\n` between them: the file name, title, aliases, path


class NameIndex:
    """A KB's notes, ready to be completed: the texts each answers to, folded, in one
    string (`\n` between a note's texts, NUL between notes), so that looking for what was
    typed is one scan in C. Built again after every change to the KB, from the notes of
    the last build whose rows did not change: a save costs a sort and a join."""

    def __init__(
        self, rows: Iterable[Row], style: LinkStyle, previous: NameIndex | None = None
    ) -> None:
        """`rows` in the order of their recency: edited last first."""
        self.style = style
        known = previous._known if previous is not None else {}
        self._known: dict[Row, _Note] = {row: known.get(row) or _note(row) for row in rows}
        self._notes = list(self._known.values())
        self._taken = Counter(note.folded_stem for note in self._notes)
        texts = [note.texts for note in self._notes]
        self._text = "\0" + "\0".join(texts)  # each note's texts after a NUL
        self._starts = list(accumulate((len(t) + 1 for t in texts[:-1]), initial=1))

    def _named(self, note: int) -> Named:
        n = self._notes[note]
        shortest = self._taken[n.folded_stem] == 1 and not self.style.whole_path
        link = n.stem if shortest else n.bare_path
        if self.style.extension:
            link += n.path[len(n.bare_path) :]
        return Named(n.path, n.title, n.aliases, link)

    def __len__(self) -> int:
        return len(self._notes)

    def complete(self, typed: str, limit: int) -> list[Named]:
        q = _CLEAN.sub(" ", _fold(typed.strip()))[:QUERY_MAX_CHARS]
        if not q:
            return [self._named(note) for note in range(min(limit, len(self._notes)))]
        found: dict[int, None] = {}  # notes, best first
        # A rank at a time, each by scans in C that stop once enough are found: notes are
        # in the order of their recency, so within a rank the first found are the best.
        for needles in (
            ["\0" + q],  # a file name starts so
            ["\n" + q],  # a title, an alias or the path does
            [separator + q for separator in WORD_SEPARATORS],  # a word does
            [q],  # any text holds it
        ):
            wanted = limit - len(found)
            firsts = {note for needle in needles for note in self._first(needle, wanted, found)}
            found.update(dict.fromkeys(sorted(firsts)[:wanted]))
            if len(found) == limit:
                return [self._named(note) for note in found]
        if len(q) > 1:
            self._in_order(q, limit, found)
        return [self._named(note) for note in found]

    def _first(self, needle: str, wanted: int, found: dict[int, None]) -> list[int]:
        """The first `wanted` notes, not `found` yet, whose texts hold `needle`."""
        notes: list[int] = []
        at = 0
        while len(notes) < wanted and (at := self._text.find(needle, at)) >= 0:
            note = bisect_right(self._starts, at + len(needle) - 1) - 1
            if note not in found:
                notes.append(note)
            at = self._end(note)
        return notes

    def _in_order(self, q: str, limit: int, found: dict[int, None]) -> None:
        """Notes with the letters of `q` in that order within one of their texts, after.
        Taking each letter where it next occurs decides it, so the pattern starts only at
        a text's start and never steps back: each text is read once, in C."""
        text = self._text
        first = text.find(q[0])
        if first < 0 or any(letter not in text for letter in q[1:]):
            return  # one letter in no name: a scan each (memchr), not a read of every text
        pattern = "[\\n\\x00]" + "".join(  # `\x00`: `\0` then a digit is octal
            f"[^\\n\\x00{re.escape(letter)}]*+{re.escape(letter)}" for letter in q
        )
        start = max(text.rfind("\n", 0, first), text.rfind("\0", 0, first))
        widest = FUZZY_SPAN * len(q)
        tight: dict[int, int] = {}  # note: its tightest span
        seen = 0
        for match in re.compile(pattern).finditer(text, start):
            note = bisect_right(self._starts, match.start() + 1) - 1
            if note in found:
                continue
            span = _span(text, q, match.end() - 1)
            if span <= widest and span < tight.get(note, widest + 1):
                tight[note] = span
                seen += 1
                if seen == FUZZY_SEEN:
                    break
        best = sorted(tight, key=lambda note: (tight[note], note))
        found.update(dict.fromkeys(best[: min(FUZZY_FEW, limit - len(found))]))

    def _end(self, note: int) -> int:
        """Where the note's texts end (at the NUL before the next note's)."""
        return self._starts[note + 1] - 1 if note + 1 < len(self._starts) else len(self._text)


def _span(text: str, q: str, end: int) -> int:
    """How many characters the tightest run of `q`'s letters in order ending at `end` (where
    its last letter is) takes: each letter before taken where it last occurs, leftwards."""
    at = end
    for letter in reversed(q[:-1]):
        at = text.rfind(letter, 0, at)
    return end - at + 1


def _note(row: Row) -> _Note:
    path, title, aliases_json, _ = row
    loaded = json.loads(aliases_json)
    aliases = tuple(str(a) for a in loaded) if isinstance(loaded, list) else ()
    bare_path = MARKDOWN_SUFFIX.sub("", path)
    stem = bare_path.rsplit("/", 1)[-1]
    texts = "\n".join(_CLEAN.sub(" ", t) for t in (stem, title, *aliases, bare_path))
    # folded as a whole, before offsets are taken: folding may change a text's length
    return _Note(path, title, aliases, bare_path, stem, _fold(stem), _fold(texts))


def _fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()
