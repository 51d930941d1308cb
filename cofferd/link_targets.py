"""Which document a link leads to, by Obsidian's rules: the one place that says it, shared by
the daemon (`cofferd.domain.links` reads links and resolves them with it) and the language
server (a rename computes what each link it writes will lead to). Standard library only;
it imports nothing else of cofferd but the grammar.

A link names a document by a *key*: its path inside the knowledge base, in lower case, NFC,
without `.md`/`.markdown` and without `#heading`. A wiki link's key may be a bare name or
any trailing part of a path; a Markdown link's is the path it leads to, from the linking
file's folder (or from the KB root when it starts with `/`), percent-decoded.

Resolving a key: the document whose whole path matches; else, for a wiki link, the
documents whose path ends in `/<key>`. When several do, the one with the shortest path
(fewest folders, then fewest characters, then alphabetical) is taken, and the link is
marked `ambiguous` so that callers can say so. No match: the link is broken.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import unquote

from cofferd.markdown_grammar import MARKDOWN_SUFFIX

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def key_of(path: str) -> str:
    """The key a document answers to: its path, lower case, NFC, without `.md`."""
    return MARKDOWN_SUFFIX.sub("", unicodedata.normalize("NFC", path)).casefold()


def wiki_key(target: str) -> str | None:
    """The key of a wiki link's target (`Plan#Budget`); None for `[[#heading]]`."""
    path = target.split("#", 1)[0].replace("\\", "/").strip().strip("/")
    if not path or path in (".", ".."):
        return None  # [[#heading]]: a link within the document itself
    return key_of(posixpath.normpath(path))


def markdown_key(target: str, folder: str) -> str | None:
    """The key of a Markdown link's target written in a note in `folder`; None for a web
    link, a heading of the note itself, a file that is no note, or a path leading out."""
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


class Keyed(Protocol):
    """A link, as resolving reads it."""

    @property
    def type(self) -> str: ...

    @property
    def key(self) -> str: ...


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

    def resolve(self, link: Keyed) -> Resolution:
        return self.resolve_key(link.type, link.key)

    def resolve_key(self, kind: str, key: str) -> Resolution:
        """Where a link of `kind` ("wiki" or "markdown") naming `key` leads."""
        exact = self.by_key.get(key)
        if exact is not None or kind == "markdown":
            return Resolution(exact)
        suffix = "/" + key
        named = self.by_name.get(key.rsplit("/", 1)[-1], ())
        found = [p for p in named if key_of(p).endswith(suffix)]
        if not found:
            return Resolution(None)
        found.sort(key=lambda p: (p.count("/"), len(p), p))
        if len(found) == 1:
            return Resolution(found[0])
        return Resolution(found[0], ambiguous=True, candidates=tuple(found))
