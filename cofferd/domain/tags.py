"""Tags and aliases, read the way people's editors write them (Obsidian, Logseq, Zettlr).

A tag comes from frontmatter `tags:`/`tag:` (a list, or one string split on commas and
spaces) or from `#tag` in the body: a `#` at the start of a line or after a space, then
letters, digits, `_`, `-` or `/`, with at least one character that is not a digit (`#1`
and `#2024` are not tags). `#` inside code, in URLs (`page#anchor`) or entities (`&#39;`)
never starts one. Tags compare without case and nest: `project/coffer` is under `project`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from coffer_kernel.markdown_grammar import INLINE_TAG, MAYBE_TAG, prose_lines
from cofferd.domain.budgets import DEFAULT

MAX_TAGS = DEFAULT.tags
MAX_TAG_CHARS = 100
MAX_ALIASES = DEFAULT.aliases
MAX_ALIAS_CHARS = 200

_SEPARATORS = re.compile(r"[,\s]+")


def normalize_tag(raw: str) -> str | None:
    """A tag as stored, or None when it is not one: no `#`, no empty or digit-only parts."""
    tag = raw.strip().lstrip("#").strip("/")
    tag = re.sub(r"/+", "/", tag)
    if not tag or len(tag) > MAX_TAG_CHARS or any(ch.isspace() for ch in tag):
        return None
    if all(ch.isdigit() or ch in "/-_" for ch in tag):
        return None
    return tag


def tag_key(tag: str) -> str:
    """The form tags are compared in: `Project/Coffer` and `project/coffer` are one tag."""
    return tag.casefold()


def _unique(values: Iterable[str], limit: int) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for value in values:
        seen.setdefault(value.casefold(), value)
        if len(seen) >= limit:
            break
    return tuple(seen.values())


def _strings(value: Any) -> list[str]:
    """A frontmatter value as strings: a list of scalars, or one scalar."""
    items = value if isinstance(value, list) else [value]
    return [str(v) for v in items if isinstance(v, str | int | float) and not isinstance(v, bool)]


def frontmatter_tags(frontmatter: dict[str, Any]) -> list[str]:
    tags: list[str] = []
    for key in ("tags", "tag"):
        for item in _strings(frontmatter.get(key)):
            tags += [t for t in map(normalize_tag, _SEPARATORS.split(item)) if t]
    return tags


def inline_tags(body: str, limit: int = MAX_TAGS) -> list[str]:
    """The body's tags, each once (first spelling kept); reading stops at `limit` of them."""
    if MAYBE_TAG.search(body) is None:  # most notes: only headings, or no `#` at all
        return []
    found: dict[str, str] = {}
    for _, line in prose_lines(body):
        if "#" not in line:
            continue
        for m in INLINE_TAG.finditer(line):
            tag = normalize_tag(m.group(1))
            if tag:
                found.setdefault(tag.casefold(), tag)
                if len(found) >= limit:
                    return list(found.values())
    return list(found.values())


def tags_of(frontmatter: dict[str, Any], body: str) -> tuple[str, ...]:
    """Every tag of a document, frontmatter first, each once (first spelling kept)."""
    return _unique([*frontmatter_tags(frontmatter), *inline_tags(body)], MAX_TAGS)


def aliases_of(frontmatter: dict[str, Any]) -> tuple[str, ...]:
    names: list[str] = []
    for key in ("aliases", "alias"):
        names += [s.strip()[:MAX_ALIAS_CHARS] for s in _strings(frontmatter.get(key))]
    return _unique([n for n in names if n], MAX_ALIASES)
