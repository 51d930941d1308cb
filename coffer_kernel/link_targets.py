"""Which file a link leads to, and which heading or block in it, by Obsidian's rules: the one
place that says it, shared by the daemon (`cofferd.domain.links` reads links and resolves
them with it; `links --broken` checks their fragments) and the language server (a rename
computes what each link it writes will lead to; diagnostics, definition and hover).
Standard library only; it imports nothing else of cofferd but the grammar.

Every file of a knowledge base is a possible target: its documents, and the other files
its scan lists (images, PDFs, canvases: any extension). A link names a file by a *key*:
its path inside the knowledge base, in lower case, NFC, without `.md`/`.markdown` (a note
answers with or without its extension, any other file only with it) and without
`#fragment`. A wiki link's key may be a bare name or any trailing part of a path; a
Markdown link's is the path it leads to, from the linking file's folder (or from the KB
root when it starts with `/`), percent-decoded.

Resolving a key: the file whose whole path matches (a document before another file);
else, for a wiki link, the files whose path ends in `/<key>`; a Markdown link that leads
to no file from its note's folder is read as Obsidian reads one written by the shortest
path (`![alt](image.png)`): as a wiki link naming what it wrote (unless it starts with
`/`, `./` or `../`, which say where it is). When several do, the one Obsidian takes
(`getFirstLinkpathDest`, observed on Obsidian 1.13.7): the one in the linking note's own
folder (not an ancestor's), else the shortest path in characters (`a/b/Note.md` before
`zzzz/Note.md`), then the path itself; the link is marked `ambiguous` so that callers can
say so. No match: the link is broken.

A GitHub wiki (a knowledge base whose root holds `_Sidebar.md` or `_Footer.md`, the pages
only GitHub's wikis have) names a page by its title, blanks for the file name's hyphens:
a wiki link there that finds no file by Obsidian's rules leads to the note of any folder
whose file name is its name with each blank a hyphen (`[[AWS Lambda setup]]` ->
`guides/AWS-Lambda-setup.md`), chosen among several as above; `[[text|Page]]` names its
page after the bar, the text first (`DocumentIndexOfPaths.read`); `[[https://...]]` is a
web link (GitHub shows the image), listed as outside. A Markdown link by the wiki's own
address (`/owner/repo/wiki/images/x.png`, `../wiki/Page`) leads to what follows `wiki/`.

A fragment (`#Heading`, `#A#B` nested, `#^block-id`) is looked for only in a Markdown
note: a heading in any case, the second of `#A#B` within the first's section, a block
whose last line ends in ` ^block-id` (or `]]^block-id` after an embed). A missing one is
named with the nearest heading.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import unquote

from coffer_kernel.markdown_grammar import MARKDOWN_SUFFIX, headings, prose_lines, rendered_text

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_BLANK = re.compile(r"\s")
_WIKI_ADDRESS = re.compile(r"(?:/[^/]+/[^/]+|\.\.)/wiki/(?=.)")  # GitHub: /owner/repo/wiki/
GITHUB_WIKI_PAGES = frozenset({"_sidebar", "_footer"})  # keys only a GitHub wiki's root has


def key_of(path: str) -> str:
    """The key a document answers to: its path, lower case, NFC, without `.md`."""
    return MARKDOWN_SUFFIX.sub("", unicodedata.normalize("NFC", path)).casefold()


def wiki_key(target: str) -> str | None:
    """The key of a wiki link's target (`Plan#Budget`); None for `[[#heading]]`."""
    path = target.split("#", 1)[0].replace("\\", "/").strip().strip("/")
    if not path or path in (".", ".."):
        return None  # [[#heading]]: a link within the document itself
    return key_of(posixpath.normpath(path))


def page_name(key: str) -> str:
    """The file name (a key's last part) of the GitHub wiki page a wiki link's key names:
    each blank a hyphen, as GitHub names a page's file after its title."""
    return _BLANK.sub("-", key.rsplit("/", 1)[-1])


def names_leading_to(name: str) -> tuple[str, ...]:
    """The names (a key's last part) of the wiki links that may lead to a file so named:
    its own, and in a GitHub wiki its title (`page-name` -> `page name`)."""
    title = name.replace("-", " ")
    return (name, title) if title != name else (name,)


def markdown_path(target: str, folder: str) -> str | None:
    """The path in the knowledge base that a Markdown link's target written in a note in
    `folder` leads to: percent-decoded, from that folder (from the root when it starts with
    `/`), normalised, as written otherwise; None for a web link, a heading of the note
    itself, a folder, or a path leading out (`outside_path`)."""
    normal = _joined(target, folder)
    return None if normal is None or leaves(normal) else normal


def outside_path(target: str, folder: str) -> str | None:
    """The path, from the knowledge base's folder, of a Markdown link's target written in
    a note in `folder` that leads out of it (`../../CONTRIBUTING.md`); None for any other."""
    normal = _joined(target, folder)
    return normal if normal is not None and leaves(normal) else None


def leaves(normal: str) -> bool:
    """Whether a normalised path from the knowledge base's folder leads out of it."""
    return normal.startswith("../") or normal == ".."


def _joined(target: str, folder: str) -> str | None:
    if _SCHEME.match(target) or target.startswith(("#", "//")):
        return None  # a web link, mailto:, or a heading of this document
    path = unquote(target.split("#", 1)[0].split("?", 1)[0])
    if not path.strip() or path.endswith("/"):
        return None  # a folder
    joined = path.lstrip("/") if path.startswith("/") else posixpath.join(folder, path)
    return posixpath.normpath(joined)


def markdown_key(target: str, folder: str) -> str | None:
    """The key of a Markdown link's target written in a note in `folder` (`markdown_path`'s
    key); None when it has no path in the knowledge base."""
    path = markdown_path(target, folder)
    return None if path is None else key_of(path)


def markdown_name_key(target: str) -> str | None:
    """The key a Markdown link's target has as a wiki link (what Obsidian finds it by when no
    file is at its path from the note's folder); None when its path says where it is."""
    if _SCHEME.match(target) or target.startswith(("#", "/", "./", "../")):
        return None
    return wiki_key(unquote(target.split("#", 1)[0].split("?", 1)[0]))


class Keyed(Protocol):
    """A link, as resolving reads it."""

    @property
    def type(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def key(self) -> str: ...


@dataclass(frozen=True)
class Resolution:
    path: str | None
    ambiguous: bool = False
    candidates: tuple[str, ...] = ()  # when ambiguous: every file it may name, best first
    document: bool = True  # False: a file that is not a document (an image, a canvas)
    outside: bool = False  # a path out of the knowledge base's folder (no path here)


class DocumentIndexOfPaths:
    """The files of a KB by key, to resolve links against: its documents, and `files`, the
    others (which only a link naming them with their extension leads to). A document of a
    key goes before another file of it. The other files, there may be 100,000, are held by
    their name only (one path, or a list when several share it), the set given kept as it
    is: about 100 bytes a file besides the set (docs/benchmarks.md, issue 34)."""

    def __init__(self, paths: Iterable[str], files: Iterable[str] = ()) -> None:
        self.by_key: dict[str, str] = {}
        self.by_name: dict[str, list[str]] = {}
        for path in paths:
            key = key_of(path)
            self.by_key.setdefault(key, path)
            self.by_name.setdefault(key.rsplit("/", 1)[-1], []).append(path)
        self.files: AbstractSet[str] = files if isinstance(files, AbstractSet) else set(files)
        self.github_wiki = not GITHUB_WIKI_PAGES.isdisjoint(self.by_key)
        self._by_page: dict[str, list[str]] | None = None
        self._file_names: dict[str, str | list[str]] = {}
        names = self._file_names
        for path in self.files:
            name = unicodedata.normalize("NFC", path.rpartition("/")[2]).casefold()
            held = names.get(name)
            if held is None:
                names[name] = path
            elif isinstance(held, str):
                names[name] = [held, path]
            else:
                held.append(path)

    def _files_named(self, name: str) -> list[str]:
        held = self._file_names.get(name)
        return [] if held is None else [held] if isinstance(held, str) else held

    def read(
        self, kind: str, key: str | None, target: str, alias: str | None
    ) -> tuple[str | None, str, str | None]:
        """(key, target, alias) of a link as this KB reads it: a GitHub wiki's aliased wiki
        link names the page after its bar (`[[About|Snowplow-overview]]`)."""
        if self.github_wiki and kind == "wiki" and alias:
            page = wiki_key(alias)
            if page is not None:
                return page, alias, target
        return key, target, alias

    def _pages(self) -> dict[str, list[str]]:
        """The notes of a GitHub wiki by the name of their page (`page_name`)."""
        if self._by_page is None:
            self._by_page = {}
            for name, paths in self.by_name.items():
                self._by_page.setdefault(page_name(name), []).extend(paths)
        return self._by_page

    def resolve(self, link: Keyed, source: str | None = None) -> Resolution:
        """Where `link`, written in the note at `source`, leads."""
        return self.resolve_written(link.type, link.key, link.target, source)

    def resolve_written(
        self, kind: str, key: str | None, target: str, source: str | None = None
    ) -> Resolution:
        """Where a link of `kind` written `target` (its key `key`) in the note at `source`
        leads."""
        if self.github_wiki:
            if kind == "wiki" and _SCHEME.match(target):
                return Resolution(None, outside=True)
            address = _WIKI_ADDRESS.match(target) if kind != "wiki" else None
            if address is not None:
                target = target[address.end() :]
                key = markdown_key("/" + target, "")
        found = self.resolve_key(kind, key, source) if key is not None else Resolution(None)
        if found.path is None and kind != "wiki":
            folder = posixpath.dirname(source) if source is not None else ""
            if outside_path(target, folder) is not None:
                return Resolution(None, outside=True)
            by_name = markdown_name_key(target)
            if by_name is not None:
                return self.resolve_key("wiki", by_name, source)
        return found

    def resolve_key(self, kind: str, key: str, source: str | None = None) -> Resolution:
        """Where a link of `kind` ("wiki", "markdown" or "definition", read as "markdown")
        naming `key`, written in the note
        at `source` (None: a note in no folder, the root's), leads."""
        exact = self.by_key.get(key)
        if exact is not None:
            return Resolution(exact)
        name = key.rsplit("/", 1)[-1]
        files = [p for p in self._files_named(name) if key_of(p) not in self.by_key]
        exact = min((p for p in files if key_of(p) == key), default=None)
        if exact is not None or kind != "wiki":
            return Resolution(exact, document=exact is None)
        if "/" in key:
            suffix = "/" + key
            found = [p for p in [*self.by_name.get(name, ()), *files] if key_of(p).endswith(suffix)]
        else:  # a bare name: every file so named ends in it
            found = [*self.by_name.get(name, ()), *files]
        if not found and self.github_wiki:
            found = self._pages().get(page_name(key), [])
        if not found:
            return Resolution(None)
        if len(found) > 1:
            folder = posixpath.dirname(source) if source is not None else None
            found.sort(key=lambda p: (posixpath.dirname(p) != folder, len(p), p))
        document = found[0] not in self.files
        if len(found) == 1:
            return Resolution(found[0], document=document)
        return Resolution(found[0], ambiguous=True, candidates=tuple(found), document=document)


# -- fragments ---------------------------------------------------------------------------

BLOCK_ID = re.compile(r"[A-Za-z0-9-]+")
# `^id` at a line's end marks its block: alone on the line, after a blank, or right after
# an embed or a link (`![[x.png]]^id`, as Obsidian's help vault writes it); `2^10` is not
BLOCK_MARKER = re.compile(r"(?:^|(?<=[^\S\n])|(?<=[\])]))\^([A-Za-z0-9-]+)[^\S\n]*$", re.MULTILINE)


def fragment_of(kind: str, target: str) -> str | None:
    """The fragment a link's target names after its first `#` (decoded when Markdown);
    None when it names none."""
    _, hash_, fragment = target.partition("#")
    if not hash_ or not fragment.strip():
        return None
    return fragment if kind == "wiki" else unquote(fragment)


def has_fragments(path: str) -> bool:
    """Whether a file's headings and blocks are looked for: a Markdown note's only (an
    image's `#interface`, a PDF's `#page=3` are the viewer's to read)."""
    return MARKDOWN_SUFFIX.search(path) is not None


_HEADING_PUNCTUATION = re.compile(r"[!\"#$%&()*+,.:;<=>?@^`{|}~/\[\]\\\s]+")


def heading_key(heading: str) -> str:
    """What a heading is matched by, as Obsidian matches a link's `#heading`: its
    punctuation and runs of blanks one space, trimmed, in any case (`How large is it?`
    answers to `#How large is it`, `` `hasTag()` `` to `#hasTag`)."""
    return _HEADING_PUNCTUATION.sub(" ", heading).strip().casefold()


def github_slug(heading: str) -> str:
    """A heading's anchor as GitHub writes it (github-slugger; VS Code and Foam write the
    same): lower case, every character dropped but letters, marks and digits of any script,
    `_`, `-` and spaces, each space a hyphen (`Markdown Templates` -> `markdown-templates`);
    of the heading's text as the page shows it (`rendered_text`: `_emphasis_` -> `emphasis`,
    a link's text, a code span's)."""
    return "".join(
        "-" if ch == " " else ch
        for ch in rendered_text(heading).lower()
        if ch in " -_" or unicodedata.category(ch)[0] in "LMN"
    )


def github_slugs(names: Iterable[str]) -> list[str]:
    """The anchors of a note's headings in order, as GitHub makes them: a repeated one
    with `-1`, `-2`... (the first suffix no earlier anchor has)."""
    seen: dict[str, int] = {}
    slugs = []
    for name in names:
        base = slug = github_slug(name)
        while slug in seen:
            seen[base] += 1
            slug = f"{base}-{seen[base]}"
        seen[slug] = 0
        slugs.append(slug)
    return slugs


def span_of(content: str, fragment: str) -> tuple[int, int] | None:
    """(first line, line after the last) of the section or block `fragment` names in
    `content`, lines from 0; None when there is none so named. A heading is named by its
    text as Obsidian matches it (`heading_key`), or by its GitHub anchor (`github_slugs`);
    else the line of an HTML anchor so named (`<a name="x"></a>`, `id="x"`) is."""
    if fragment.startswith("^"):
        return _block(content, fragment[1:].strip())
    return _section(content, fragment) or _html_anchor(content, fragment)


_HTML_ANCHOR = re.compile(r"""<[A-Za-z][^<>\n]*?\b(?:name|id)\s*=\s*["']?([^"'\s<>]+)""")


def _html_anchor(content: str, fragment: str) -> tuple[int, int] | None:
    """The line of prose holding an HTML element named `fragment` (GitHub's pages go to
    `<a name="x">` and `id="x"` as to headings), as (line, line + 1)."""
    if "#" in fragment or "<" not in content:
        return None
    for number, line in prose_lines(content):
        if "<" in line and any(m.group(1) == fragment for m in _HTML_ANCHOR.finditer(line)):
            return number, number + 1
    return None


def _section(content: str, fragment: str) -> tuple[int, int] | None:
    listed = list(headings(content))
    slugs = github_slugs(name for _, _, name in listed)
    found = [
        (line, level, heading_key(name), slug)
        for (line, level, name), slug in zip(listed, slugs, strict=True)
    ]
    wanted = [(heading_key(part), part.casefold()) for part in fragment.split("#") if part.strip()]
    start, end, level = 0, len(found), 0
    at = -1
    for key, slug in wanted:
        at = next(
            (
                i
                for i in range(start, end)
                if found[i][1] > level and (found[i][2] == key or found[i][3] == slug)
            ),
            -1,
        )
        if at < 0:
            return None
        level = found[at][1]
        start = at + 1
        end = next((i for i in range(start, end) if found[i][1] <= level), end)
    if at < 0:
        return None
    last = found[end][0] if end < len(found) else content.count("\n") + 1
    return found[at][0], last


def block_ids(content: str) -> Iterator[tuple[int, str, str]]:
    """(line from 0, id, the line) of each block id of `content`: a `^id` ending a line of
    prose (one in fenced or indented code is the example's, not a block)."""
    lines = content.split("\n")
    for number, prose in prose_lines(content):
        if "^" in prose and (found := BLOCK_MARKER.search(prose)) is not None:
            yield number, found.group(1), lines[number]


def _block(content: str, block_id: str) -> tuple[int, int] | None:
    if not BLOCK_ID.fullmatch(block_id):
        return None
    for number, found, _ in block_ids(content):
        if found == block_id:
            lines = content.split("\n")
            first = number
            while first > 0 and lines[first - 1].strip():
                first -= 1
            return first, number + 1
    return None


def nearest_heading(content: str, fragment: str) -> str | None:
    """The heading of `content` closest in spelling to `fragment` (its last part): what is
    suggested for a heading that does not exist."""
    import difflib  # only when a heading is missing

    names = [name for _, _, name in headings(content)]
    wanted = fragment.rsplit("#", 1)[-1].strip()
    folded = {name.casefold(): name for name in names}
    close = difflib.get_close_matches(wanted.casefold(), list(folded), n=1, cutoff=0.5)
    return folded[close[0]] if close else None


@dataclass(frozen=True)
class MissingFragment:
    what: str  # "heading" or "block"
    fragment: str
    nearest: str | None  # the heading suggested

    def message(self, path: str) -> str:
        said = f"{path} has no {self.what} {self.fragment!r}"
        return f"{said}: did you mean {self.nearest!r}?" if self.nearest else said


def missing_fragment(content: str, fragment: str) -> MissingFragment | None:
    """What is missing when `content` has no heading or block `fragment` names (the one
    rule for the language server's diagnostics and `links --broken`); None when it has."""
    if span_of(content, fragment) is not None:
        return None
    if fragment.startswith("^"):
        return MissingFragment("block", fragment, None)
    return MissingFragment("heading", fragment, nearest_heading(content, fragment))


def anchor_of(content: str, fragment: str) -> str | None:
    """The anchor a page gives the heading or block `fragment` names in `content` (the
    heading's GitHub anchor, `^id` for a block); None when there is none so named."""
    span = span_of(content, fragment)
    if span is None:
        return None
    if fragment.startswith("^"):
        return "^" + fragment[1:].strip()
    listed = list(headings(content))
    slugs = github_slugs(name for _, _, name in listed)
    slug = next((s for (line, _, _), s in zip(listed, slugs, strict=True) if line == span[0]), None)
    return slug if slug is not None else fragment  # an HTML anchor: its own name
