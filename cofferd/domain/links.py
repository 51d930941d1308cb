"""Links between documents, read as Obsidian and Markdown write them, and resolved the way
Obsidian resolves them.

    [[Plan]]  [[projects/Plan]]  [[Plan.md]]  [[Plan#Budget]]  [[Plan|the plan]]  ![[Plan]]
    [the plan](../projects/plan.md)  [x](<my plan.md#budget>)  [x](/projects/plan.md)

A link names a document by a *key*: its path inside the knowledge base, in lower case,
without `.md`/`.markdown` and without `#heading`. A wiki link's key may be a bare name or
any trailing part of a path; a Markdown link's is the path it leads to, from the linking
file's folder (or from the KB root when it starts with `/`). Links in code are not links.

Resolving a key (`resolve`): the document whose whole path matches; else, for a wiki link,
the documents whose path ends in `/<key>`. When several do, the one with the shortest path
(fewest folders, then fewest characters, then alphabetical) is taken, and the link is
marked `ambiguous` so that callers can say so. No match: the link is broken.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from cofferd.domain.budgets import DEFAULT
from cofferd.domain.prose import prose_lines

LinkType = Literal["wiki", "markdown"]
MAX_LINKS = DEFAULT.links  # per document
MAX_TARGET_CHARS = 500

_WIKI = re.compile(r"!?\[\[([^\[\]\n]+?)\]\]")  # linear: a match cannot reach past a bracket
_NOT_SPACE = re.compile(r"\S")
_ANGLE_CLOSE = re.compile(">")
_BARE_END = re.compile(r"[)\s]")
_PAREN_CLOSE = re.compile(r"\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
MARKDOWN_SUFFIX = re.compile(r"\.(md|markdown)$", re.IGNORECASE)


@dataclass(frozen=True)
class Link:
    type: LinkType
    target: str  # as written, without an alias
    key: str
    line: int  # in the file, from 1
    start: int = 0  # where the link is in its line, in characters (end excluded)
    end: int = 0

    @property
    def name(self) -> str:
        """The last part of the key: what a document must be called to be its target."""
        return self.key.rsplit("/", 1)[-1]


def key_of(path: str) -> str:
    """The key a document answers to: its path, lower case, NFC, without `.md`."""
    return MARKDOWN_SUFFIX.sub("", unicodedata.normalize("NFC", path)).casefold()


def links_of(body: str, relpath: str, first_line: int = 1) -> list[Link]:
    """Every link in the body of the document at `relpath`; `first_line` is the line of
    the file the body starts on."""
    if "[[" not in body and "](" not in body:
        return []
    found: list[Link] = []
    folder = posixpath.dirname(relpath)
    for index, line in prose_lines(body):
        if "[" not in line:
            continue
        number = first_line + index
        for m in _WIKI.finditer(line):
            target = m.group(1).split("|", 1)[0].strip()
            key = _wiki_key(target)
            if key:
                found.append(
                    Link("wiki", target[:MAX_TARGET_CHARS], key, number, m.start(), m.end())
                )
        for start, end, written in markdown_links(line):
            target = written.strip("<>").strip()
            key = _markdown_key(target, folder)
            if key:
                found.append(Link("markdown", target[:MAX_TARGET_CHARS], key, number, start, end))
        if len(found) >= MAX_LINKS:
            return found[:MAX_LINKS]
    return found


def markdown_links(line: str) -> Iterator[tuple[int, int, str]]:
    r"""(start, end, target) of the `[text](target "title")` links of one line, the target
    as written (`<...>` included), as
    ``(?<!!)\[[^\]\n]*\]\(\s*(<[^>\n]+>|[^)\s]+)(?:\s+["'(][^)\n]*)?\s*\)``
    finds them, in one pass over the line (that pattern reads the rest of the line again
    from every `[`).

    Every `[` before the same `]` leads to the same match or to none, so each `]` is
    looked at once; after it, every search moves forward only."""
    end = len(line)
    skip_spaces = _Ahead(line, _NOT_SPACE)
    angle_close = _Ahead(line, _ANGLE_CLOSE)
    bare_end = _Ahead(line, _BARE_END)
    rest_after_angle, rest_after_bare = _LinkRest(line), _LinkRest(line)
    at = 0
    while (opening := line.find("[", at)) >= 0:
        at = opening + 1
        if opening and line[opening - 1] == "!":
            continue  # an image
        closing = line.find("]", at)
        if closing < 0:
            return
        at = closing + 1
        if not line.startswith("(", at):
            continue
        start = skip_spaces(at + 1)
        if start == end:
            return
        if line[start] == "<" and start + 1 < (close := angle_close(start + 1)) < end:
            link_end = rest_after_angle(close + 1)
            if link_end >= 0:
                yield opening, link_end, line[start : close + 1]
                at = link_end
                continue
        if line[start] != ")":
            stop = bare_end(start)
            link_end = rest_after_bare(stop)
            if link_end >= 0:
                yield opening, link_end, line[start:stop]
                at = link_end


class _Ahead:
    """Where a one-character pattern next occurs in a line, at or after a position (the
    line's length when nowhere). Asked for positions that never move back, it reads each
    character once."""

    def __init__(self, line: str, pattern: re.Pattern[str]) -> None:
        self._line, self._pattern = line, pattern
        self._asked, self._found = 1, 0  # nothing known yet

    def __call__(self, start: int) -> int:
        if not self._asked <= start <= self._found:
            m = self._pattern.search(self._line, start)
            self._asked, self._found = start, m.start() if m else len(self._line)
        return self._found


class _LinkRest:
    r"""What may follow a link's target, ``(?:\s+["'(][^)\n]*)?\s*\)``: where it ends
    when it starts at a position, or -1."""

    def __init__(self, line: str) -> None:
        self._line = line
        self._skip_spaces = _Ahead(line, _NOT_SPACE)
        self._paren_close = _Ahead(line, _PAREN_CLOSE)

    def __call__(self, at: int) -> int:
        line = self._line
        start = self._skip_spaces(at)
        if start == len(line):
            return -1
        if line[start] == ")":
            return start + 1
        if start > at and line[start] in "\"'(":  # a title
            close = self._paren_close(start + 1)
            return close + 1 if close < len(line) else -1
        return -1


def _wiki_key(target: str) -> str | None:
    path = target.split("#", 1)[0].replace("\\", "/").strip().strip("/")
    if not path or path in (".", ".."):
        return None  # [[#heading]]: a link within the document itself
    return key_of(posixpath.normpath(path))


def _markdown_key(target: str, folder: str) -> str | None:
    if _SCHEME.match(target) or target.startswith(("#", "//")):
        return None  # a web link, mailto:, or a heading of this document
    path = unquote(target.split("#", 1)[0].split("?", 1)[0])
    if not MARKDOWN_SUFFIX.search(path):
        return None  # an image, a PDF, a folder: not a document
    joined = path.lstrip("/") if path.startswith("/") else posixpath.join(folder, path)
    normal = posixpath.normpath(joined)
    if normal.startswith("../") or normal == "..":
        return None  # it leads out of the knowledge base
    return key_of(normal)


@dataclass(frozen=True)
class Resolution:
    path: str | None
    ambiguous: bool = False
    candidates: tuple[str, ...] = ()  # when ambiguous: every document it may name, best first


class DocumentIndexOfPaths:
    """The documents of a KB by key, to resolve links against."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.by_key: dict[str, str] = {}
        self.by_name: dict[str, list[str]] = {}
        for path in paths:
            key = key_of(path)
            self.by_key.setdefault(key, path)
            self.by_name.setdefault(key.rsplit("/", 1)[-1], []).append(path)

    def resolve(self, link: Link) -> Resolution:
        exact = self.by_key.get(link.key)
        if exact is not None or link.type == "markdown":
            return Resolution(exact)
        suffix = "/" + link.key
        found = [p for p in self.by_name.get(link.name, ()) if key_of(p).endswith(suffix)]
        if not found:
            return Resolution(None)
        found.sort(key=lambda p: (p.count("/"), len(p), p))
        if len(found) == 1:
            return Resolution(found[0])
        return Resolution(found[0], ambiguous=True, candidates=tuple(found))
