"""A note on the web page (issue 46): its Markdown rendered (web_markdown), its links shown as
the daemon resolves them, its properties, backlinks and links beside it; a PDF's original
for the browser's viewer; a file a note embeds (`/file/{kb}/{path}`).

What each link leads to is the daemon's answer, not the page's: `Graph.inspect` resolves the
links of the text shown (what an editor is told), `Graph.anchors` finds the heading or block
each names, `Graph.links` lists the note's links and backlinks. Every file is read through
the KB's boundary (Documents). A note longer than `MAX_SHOWN_CHARS` is shown cut, and says so.
"""

from __future__ import annotations

import html
import json
import posixpath
import urllib.parse
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote

from aiohttp import web

from coffer_kernel.link_targets import MissingFragment, anchor_of, fragment_of, github_slugs
from coffer_kernel.locations import InvalidTreePath, check_relpath, normalize_relpath
from coffer_kernel.markdown_grammar import MAX_TARGET_CHARS, headings
from cofferd.domain.errors import PathRefused
from cofferd.domain.formats import format_of
from cofferd.surfaces.http import api, web_shell
from cofferd.surfaces.http.query_params import Query, with_query
from cofferd.surfaces.http.web_access import KB_FILE, REMOTE_IMAGES
from cofferd.surfaces.http.web_markdown import Rendering, Target, render

MAX_SHOWN_CHARS = 1_000_000  # a note's text rendered; the rest is left out, and said
MAX_PROPERTIES = 100
MAX_PROPERTY_CHARS = 1000
MAX_LISTED = 500  # links and backlinks beside the note
ORIGINAL_TYPES = {"pdf": "application/pdf"}  # shown by the browser's own viewer
FILE_TYPES = {  # what a note may embed, shown by the browser; any other file is a download
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "avif": "image/avif",
    "bmp": "image/bmp",
    "svg": "image/svg+xml",  # its script never runs: in an <img>, or sandboxed (KB_FILE)
    "pdf": "application/pdf",
}
IMAGE_SUFFIXES = frozenset(FILE_TYPES) - {"pdf"}
MARKDOWN_FORMATS = frozenset({"md"})
EXTERNAL_SCHEMES = ("http://", "https://", "mailto:")


def relpath_of(given: str) -> str:
    try:
        return normalize_relpath(check_relpath(given))
    except InvalidTreePath as exc:
        raise PathRefused(f"not a path inside the knowledge base: {exc}") from None


def _quoted(value: str) -> str:
    return urllib.parse.quote(value, safe="/")


def note_href(kb: str, path: str, anchor: str | None = None) -> str:
    fragment = "#" + urllib.parse.quote(anchor, safe="") if anchor else ""
    return f"/note/{urllib.parse.quote(kb, safe='')}/{_quoted(path)}{fragment}"


def file_href(kb: str, path: str) -> str:
    return f"/file/{urllib.parse.quote(kb, safe='')}/{_quoted(path)}"


def search_href(kb: str, **query: str) -> str:
    return "/?" + urllib.parse.urlencode({"kb": kb, **query})


@dataclass
class LinksOfNote:
    """The daemon's answers on the links of the text shown, as web_markdown asks for them."""

    kb: str
    text: str  # the text shown: what `[[#heading]]` links look in
    resolved: dict[tuple[str, str], dict[str, Any]]  # (wiki|markdown, target) -> inspect's
    anchors: dict[tuple[str, str], str | MissingFragment]  # (path, fragment)
    text_first: bool = False  # a GitHub wiki: `[[text|Page]]` names Page

    def wiki(self, target: str, embed: bool) -> Target:
        if target.startswith("#"):
            return self._here(target[1:])
        return self._target("wiki", target[:MAX_TARGET_CHARS], embed)

    def markdown(self, target: str, embed: bool) -> Target:
        if target.lower().startswith(EXTERNAL_SCHEMES):
            return Target(target, "external", target)
        return self._target("markdown", unquote(target)[:MAX_TARGET_CHARS], embed)

    def tag(self, name: str) -> str:
        return search_href(self.kb, q=name, tags=name)

    def _here(self, fragment: str) -> Target:
        anchor = anchor_of(self.text, fragment)
        if anchor is None:
            return Target(None, "missing-heading", f"no heading {fragment!r} in this note")
        return Target("#" + urllib.parse.quote(anchor, safe=""), "note")

    def _target(self, kind: str, target: str, embed: bool) -> Target:
        found = self.resolved.get((kind, target))
        name = target.split("#", 1)[0] or target
        if found is None or found["kind"] is None:
            title = f"no note named {name!r}" if kind == "wiki" else f"no file at {name!r}"
            return Target(search_href(self.kb, q=posixpath.basename(name)), "broken", title)
        path = found["relative_path"]
        if found["kind"] == "outside":
            return Target(None, "outside", f"{target} is outside the knowledge base")
        if found["kind"] == "file":
            href = file_href(self.kb, path)
            image = href if embed and format_of(path) in IMAGE_SUFFIXES else None
            return Target(href, "file", path, image)
        fragment = fragment_of("wiki" if kind == "wiki" else "markdown", target)
        anchor = self.anchors.get((path, fragment)) if fragment else None
        if isinstance(anchor, MissingFragment):
            title = f"no {anchor.what} {anchor.fragment!r} in {path}"
            if anchor.nearest:
                title += f" (did you mean {anchor.nearest!r}?)"
            return Target(note_href(self.kb, path), "missing-heading", title)
        return Target(note_href(self.kb, path, anchor), "note", path)


# -- routes --------------------------------------------------------------------------------


class NoteQuery(Query):
    remote: Literal["1"] | None = None  # remote images shown, as the reader asked


@with_query(NoteQuery)
async def note_page(request: web.Request, query: NoteQuery) -> web.StreamResponse:
    """A note rendered, found by its exact path among the KB's documents; a PDF's original
    file; any other text as escaped text."""
    coffer = request.app[api.COFFER]
    kb, relpath = request.match_info["kb"], relpath_of(request.match_info["path"])
    doc = await coffer.documents.exact(kb, relpath)
    if format_of(doc.path) in ORIGINAL_TYPES:
        content = await coffer.documents.original_file(kb, doc)
        return _file(content, ORIGINAL_TYPES[format_of(doc.path)])
    view = await coffer.documents.get(kb, doc.id)
    whole = view.body or ""
    text, cut = whole[:MAX_SHOWN_CHARS], len(whole) > MAX_SHOWN_CHARS
    if cut:
        text = text[: text.rfind("\n") + 1] or text
    remote = query.remote == "1"
    shown = ""
    if format_of(doc.path) in MARKDOWN_FORMATS or view.derived:
        links = await _links_of(coffer, kb, doc.path, text)
        rendering = Rendering(links, _heading_ids(text), remote)
        shown = render(text, rendering)
        if rendering.remote_images and not remote:
            count = len(rendering.remote_images)
            shown = (
                f'<p class="notice">{count} remote image{"s" if count > 1 else ""} not loaded '
                "(loading one tells its server you read this note). "
                '<a class="button" href="?remote=1">load remote images for this page</a></p>'
                + shown
            )
    else:
        shown = f'<pre class="note">{html.escape(text)}</pre>'
    if cut:
        shown += (
            f'<p class="notice">note truncated for display: the first {len(text):,} of '
            f"{len(whole):,} characters are shown.</p>"
        )
    graph = await coffer.graph.links(kb, doc.id)
    body = (
        web_shell.header(kb, title=False)
        + '<main class="note-page"><article>'
        + _title(doc.title or doc.path, text)
        + f'<p class="where">{html.escape(kb)} · {html.escape(doc.path)}'
        + f"{' · converted text' if view.derived else ''}</p>"
        + _properties(kb, view.frontmatter or {})
        + f'<div class="markdown">{shown}</div></article>'
        + _aside(kb, view.path, graph)
        + "</main>"
    )
    response = web_shell.page(
        doc.title or doc.path, body, scripts=("note.js",), styles=("note.css",)
    )
    if remote:
        response[REMOTE_IMAGES] = True
    return response


async def file_of_note(request: web.Request) -> web.StreamResponse:
    """A file of the KB a note embeds or links to (an image, a PDF), through its boundary."""
    coffer = request.app[api.COFFER]
    kb, relpath = request.match_info["kb"], relpath_of(request.match_info["path"])
    content = await coffer.documents.other_file(kb, relpath)
    kind = FILE_TYPES.get(format_of(relpath))
    if kind is None:
        name = urllib.parse.quote(posixpath.basename(relpath))
        response = web.Response(
            body=content,
            content_type="application/octet-stream",
            headers={"Content-Disposition": f"attachment; filename*=UTF-8''{name}"},
        )
    else:
        response = _file(content, kind)
    if kind not in ORIGINAL_TYPES.values():  # a sandboxed PDF is refused by the viewer
        response[KB_FILE] = True
    return response


def _file(content: bytes, kind: str) -> web.Response:
    return web.Response(body=content, content_type=kind, headers={"Content-Disposition": "inline"})


# -- the parts of the page -----------------------------------------------------------------


async def _links_of(coffer: Any, kb: str, relpath: str, text: str) -> LinksOfNote:
    inspected = await coffer.graph.inspect(kb, relpath, text)
    resolved: dict[tuple[str, str], dict[str, Any]] = {}
    wanted: list[tuple[str, str]] = []
    for link in inspected["links"]:
        kind = "wiki" if link["type"] == "wiki" else "markdown"
        target = link["target"] if kind == "wiki" else unquote(link["target"])
        resolved.setdefault((kind, target), link)
        fragment = fragment_of(link["type"], link["target"])
        if link["kind"] == "document" and fragment:
            wanted.append((link["relative_path"], fragment))
    anchors = await coffer.graph.anchors(kb, wanted) if wanted else {}
    text_first = any(link["text_first"] for link in inspected["links"])
    return LinksOfNote(kb, text, resolved, anchors, text_first)


def _title(title: str, text: str) -> str:
    """The note's title, unless its own first heading says it."""
    first = next(iter(headings(text)), None)
    if first is not None and first[1] == 1 and first[2].strip() == title.strip():
        return ""
    return f'<h1 class="title">{html.escape(title)}</h1>'


def _heading_ids(text: str) -> dict[int, str]:
    """Each heading's line and anchor, as the daemon names them (Graph.anchors)."""
    listed = list(headings(text))
    slugs = github_slugs(name for _, _, name in listed)
    return {line: slug for (line, _, _), slug in zip(listed, slugs, strict=True)}


def _cut(value: str, limit: int = MAX_PROPERTY_CHARS) -> str:
    return value if len(value) <= limit else value[:limit] + "…"


def _properties(kb: str, frontmatter: dict[str, Any]) -> str:
    if not frontmatter:
        return ""
    rows = []
    for key, value in list(frontmatter.items())[:MAX_PROPERTIES]:
        if key in ("tags", "tag") and isinstance(value, (list, str)):
            names = [value] if isinstance(value, str) else [str(v) for v in value]
            shown = " ".join(
                f'<a class="tag" href="{html.escape(search_href(kb, q=n, tags=n))}">'
                f"#{html.escape(_cut(n, 200))}</a>"
                for n in names[:MAX_PROPERTIES]
            )
        else:
            written = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            shown = html.escape(_cut(written))
        rows.append(f"<tr><th>{html.escape(_cut(str(key), 200))}</th><td>{shown}</td></tr>")
    more = len(frontmatter) - MAX_PROPERTIES
    caption = f"<caption>{more} more not shown</caption>" if more > 0 else ""
    return f'<table class="properties">{caption}{"".join(rows)}</table>'


def _listed(kb: str, title: str, entries: list[tuple[str, str, str]]) -> str:
    items = "".join(
        f'<li><a class="{css}" href="{html.escape(href)}">{html.escape(label)}</a></li>'
        for href, label, css in entries[:MAX_LISTED]
    )
    more = f"<p>{len(entries) - MAX_LISTED} more</p>" if len(entries) > MAX_LISTED else ""
    return f"<section><h2>{title} ({len(entries)})</h2><ul>{items}</ul>{more}</section>"


def _aside(kb: str, absolute: str, graph: dict[str, Any]) -> str:
    back: dict[str, tuple[str, str, str]] = {}
    for link in graph["backlinks"]:
        path = link["relative_path"]
        back.setdefault(path, (note_href(kb, path), path, "note"))
    out: dict[str, tuple[str, str, str]] = {}
    for link in graph["outgoing"]:
        path = link["relative_path"]
        if link["kind"] == "document":
            out.setdefault(path, (note_href(kb, path), path, "note"))
        elif link["kind"] == "file":
            out.setdefault(path, (file_href(kb, path), path, "file"))
        elif link["kind"] is None:
            name = link["target"]
            out.setdefault("?" + name, (search_href(kb, q=name), name, "broken"))
    editor = "vscode://file" + urllib.parse.quote(absolute, safe="/")
    return (
        '<aside class="beside">'
        + _listed(kb, "Backlinks", list(back.values()))
        + _listed(kb, "Links", list(out.values()))
        + "<section><h2>Open in editor</h2>"
        + f'<p class="path"><code>{html.escape(absolute)}</code></p>'
        + f'<button type="button" data-copy="{html.escape(absolute)}" hidden>copy path</button> '
        + f'<a href="{html.escape(editor)}">open in VS Code</a></section>'
        + "</aside>"
    )
