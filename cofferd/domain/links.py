"""Links between documents (`Link`, `links_of`), read as Obsidian and Markdown write
them, and resolved the way Obsidian resolves them.

    [[Plan]]  [[projects/Plan]]  [[Plan.md]]  [[Plan#Budget]]  [[Plan|the plan]]  ![[Plan]]
    [the plan](../projects/plan.md)  [x](<my plan.md#budget>)  [x](/projects/plan.md)
    [plan]: projects/plan.md "The plan"    (a definition: read as a Markdown link's target)

A link names a document by a *key*: its path inside the knowledge base, in lower case,
without `.md`/`.markdown` and without `#heading`. A wiki link's key may be a bare name or
any trailing part of a path; a Markdown link's is the path it leads to, from the linking
file's folder (or from the KB root when it starts with `/`). Links in code are not links.
A Markdown link leading out of the KB's folder (`../../CONTRIBUTING.md`) is kept: it is
listed as leading "outside".

Keys and resolving are `coffer_kernel.link_targets` (standard library only, so that the
language server resolves as the daemon does; callers import them from there): the
document whose whole path matches; else, for a wiki link, the documents whose path ends
in `/<key>`, the one Obsidian takes (in the linking note's folder, else the shortest
path) and the link marked `ambiguous` when several do. No match: the link is broken. A GitHub
wiki's links are read as GitHub reads them (`as_read`: `[[text|Page]]` names Page).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace
from typing import Literal

from coffer_kernel.link_targets import (
    DocumentIndexOfPaths,
    key_of,
    markdown_key,
    outside_path,
    wiki_key,
)
from coffer_kernel.markdown_grammar import (
    MAX_TARGET_CHARS,
    Definitions,
    aliased_wiki_links,
    markdown_links,
    prose_lines,
)
from cofferd.domain.budgets import DEFAULT

LinkType = Literal["wiki", "markdown", "definition"]  # definition: `[label]: target`
MAX_LINKS = DEFAULT.links  # per document


@dataclass(frozen=True)
class Link:
    type: LinkType
    target: str  # as written, without an alias
    key: str
    line: int  # in the file, from 1
    start: int = 0  # where the link is in its line, in characters (end excluded)
    end: int = 0
    alias: str | None = None  # a wiki link's text after its bar, as written
    text_first: bool = False  # read as a GitHub wiki reads it: `target` is after the bar

    @property
    def name(self) -> str:
        """The last part of the key: what a document must be called to be its target."""
        return self.key.rsplit("/", 1)[-1]

    @property
    def alias_name(self) -> str | None:
        """The name a GitHub wiki reads an aliased wiki link by (`[[text|Page]]`)."""
        key = wiki_key(self.alias) if self.type == "wiki" and self.alias else None
        return key.rsplit("/", 1)[-1] if key else None


def as_read(link: Link, index: DocumentIndexOfPaths) -> Link:
    """`link` as the KB of `index` reads it (`DocumentIndexOfPaths.read`)."""
    key, target, alias = index.read(link.type, link.key, link.target, link.alias)
    if target == link.target or key is None:
        return link
    return replace(link, target=target, key=key, alias=alias, text_first=True)


def links_of(body: str, relpath: str, first_line: int = 1) -> list[Link]:
    """Every link in the body of the document at `relpath`; `first_line` is the line of
    the file the body starts on."""
    if "[[" not in body and "](" not in body and "]:" not in body:
        return []
    found: list[Link] = []
    folder = posixpath.dirname(relpath)
    definitions = Definitions()
    for index, line in prose_lines(body):
        definition = definitions.read(index, line)
        if "[" not in line and definition is None:
            continue
        number = first_line + index
        if definition is not None:
            written = line[definition.target_start : definition.target_end]
            target = written.strip("<>").strip()
            key = _path_key(target, folder)
            if key:
                kept = target[:MAX_TARGET_CHARS]
                found.append(
                    Link("definition", kept, key, number, definition.start, definition.end)
                )
            continue
        for start, end, target, alias in aliased_wiki_links(line):
            key = wiki_key(target)
            if key:
                alias = alias[:MAX_TARGET_CHARS] if alias else None
                found.append(
                    Link("wiki", target[:MAX_TARGET_CHARS], key, number, start, end, alias)
                )
        for start, end, written in markdown_links(line):
            target = written.strip("<>").strip()
            key = _path_key(target, folder)
            if key:
                found.append(Link("markdown", target[:MAX_TARGET_CHARS], key, number, start, end))
        if len(found) >= MAX_LINKS:
            return found[:MAX_LINKS]
    return found


def _path_key(target: str, folder: str) -> str | None:
    """The key of a Markdown link's or a definition's target: its path in the knowledge
    base's, or the path out of it of one leading out (listed as "outside", never broken)."""
    key = markdown_key(target, folder)
    if key:
        return key
    outside = outside_path(target, folder)
    return key_of(outside) if outside is not None else None
