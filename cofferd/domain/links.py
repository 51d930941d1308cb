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
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from cofferd.domain.budgets import DEFAULT
from cofferd.markdown_grammar import (
    MARKDOWN_SUFFIX,
    MAX_TARGET_CHARS,
    markdown_links,
    prose_lines,
    wiki_links,
)

LinkType = Literal["wiki", "markdown"]
MAX_LINKS = DEFAULT.links  # per document
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


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
        for start, end, target in wiki_links(line):
            key = _wiki_key(target)
            if key:
                found.append(Link("wiki", target[:MAX_TARGET_CHARS], key, number, start, end))
        for start, end, written in markdown_links(line):
            target = written.strip("<>").strip()
            key = _markdown_key(target, folder)
            if key:
                found.append(Link("markdown", target[:MAX_TARGET_CHARS], key, number, start, end))
        if len(found) >= MAX_LINKS:
            return found[:MAX_LINKS]
    return found


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
