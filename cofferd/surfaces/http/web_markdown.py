"""A note's Markdown as HTML for the web page, as vault users know it: CommonMark, GFM tables
and strikethrough, task lists, footnotes, wiki links and embeds, tags, headings with the
daemon's anchors and blocks with their `^id`; then sanitised, since notes are untrusted.

Nothing here decides what a link leads to: the caller's `NoteLinks` says (the daemon's
link rules, web_note). Raw HTML in a note is shown as text (markdown-it's `html` off), and
what the renderer writes goes through nh3 (ammonia) with an allowlist: no script, no
style, no event handler, links only relative, http(s) or mailto. A remote image is shown
as its address unless the reader allowed remote images for the page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.tasklists import tasklists_plugin

from coffer_kernel.link_targets import BLOCK_MARKER
from coffer_kernel.markdown_grammar import TAG_CHARS, WIKI_LINK, wiki_links

TAG_AT = re.compile(rf"#({TAG_CHARS}+)")
REMOTE = re.compile(r"^https?://", re.IGNORECASE)
ALIGN = re.compile(r"text-align:\s*(left|right|center)")

TAGS = {
    "a", "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote",
    "pre", "code", "em", "strong", "del", "s", "table", "thead", "tbody", "tr", "th", "td",
    "img", "input", "section", "sup", "span", "div",
}  # fmt: skip
ATTRIBUTES = {
    "*": {"class", "id", "title"},
    "a": {"href", "name"},  # `<a name="x">`: what a GitHub page's `#x` goes to
    "img": {"src", "alt"},
    "input": {"type", "checked", "disabled"},
    "ol": {"start"},
}
URL_SCHEMES = {"http", "https", "mailto"}


@dataclass(frozen=True)
class Target:
    """How a link is shown: `href` None when it leads nowhere the page can show."""

    href: str | None
    css: str  # "note", "file", "broken", "missing-heading", "outside", "external"
    title: str = ""
    image: str | None = None  # an embed shown as an image: its address on the page


class NoteLinks(Protocol):
    """What the links of the note being shown lead to (the daemon's rules, not the page's)."""

    @property
    def text_first(self) -> bool:
        """Whether `[[text|Page]]` names what follows its bar (a GitHub wiki)."""

    def wiki(self, target: str, embed: bool) -> Target: ...

    def markdown(self, target: str, embed: bool) -> Target: ...

    def tag(self, name: str) -> str: ...


@dataclass
class Rendering:
    links: NoteLinks
    heading_ids: dict[int, str]  # line of the text (from 0) -> the daemon's anchor
    remote: bool  # whether remote images are loaded
    remote_images: list[str] = field(default_factory=list)  # those seen


def render(text: str, rendering: Rendering) -> str:
    """The note's HTML, sanitised."""
    html = _PARSER.render(text, {"rendering": rendering})
    return sanitised(html)


def sanitised(html: str) -> str:
    return nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer",
        strip_comments=True,
        attribute_filter=_attribute,
    )


def _attribute(tag: str, name: str, value: str) -> str | None:
    if tag == "input" and name == "type" and value != "checkbox":
        return None
    return value


# -- the grammar's additions ---------------------------------------------------------------


def _wiki_link(state: StateInline, silent: bool) -> bool:
    """`[[target|alias]]` and `![[embed]]`, as the daemon's grammar reads them."""
    if not state.src.startswith(("[[", "![["), state.pos):
        return False
    found = WIKI_LINK.match(state.src, state.pos)
    if found is None or found.end() > state.posMax:
        return False
    if not silent:
        _, _, target = next(wiki_links(found.group(0)))
        token = state.push("wiki_link", "", 0)
        token.meta = {
            "target": target,
            "alias": found.group(1).partition("|")[2].strip(),
            "embed": found.group(0).startswith("!"),
        }
    state.pos = found.end()
    return True


def _tag(state: StateInline, silent: bool) -> bool:
    """`#tag` where a word starts."""
    pos = state.pos
    if state.src[pos] != "#" or (pos > 0 and not state.src[pos - 1].isspace()):
        return False
    found = TAG_AT.match(state.src, pos, state.posMax)
    if found is None or found.group(1).isdigit():
        return False
    if not silent:
        state.push("tag", "", 0).meta = {"name": found.group(1)}
    state.pos = found.end()
    return True


def _blocks(state: StateCore) -> None:
    """A paragraph ending in `^id` is that block (the marker hidden); a table cell's
    alignment is a class (style attributes are not let through)."""
    tokens = state.tokens
    for n, token in enumerate(tokens):
        if token.type in ("th_open", "td_open"):
            align = ALIGN.search(str(token.attrGet("style") or ""))
            if align:
                token.attrs.pop("style", None)
                token.attrSet("class", f"align-{align.group(1)}")
        if token.type != "paragraph_open" or n + 1 >= len(tokens):
            continue
        children = tokens[n + 1].children or []
        last = children[-1] if children else None
        if last is None or last.type != "text" or "^" not in last.content:
            continue
        marker = BLOCK_MARKER.search(last.content)
        if marker is not None and "\n" not in last.content[marker.start() :]:
            last.content = last.content[: marker.start()].rstrip()
            token.attrSet("id", "^" + marker.group(1))


# -- rendering -----------------------------------------------------------------------------


def _rendering(env: EnvType) -> Rendering:
    found: Rendering = env["rendering"]
    return found


def _anchor(target: Target, text: str) -> str:
    attrs = f' class="{escapeHtml(target.css)}"'
    if target.title:
        attrs += f' title="{escapeHtml(target.title)}"'
    if target.href is None:
        return f"<span{attrs}>{text}</span>"
    return f'<a href="{escapeHtml(target.href)}"{attrs}>{text}</a>'


def _render_wiki(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    meta: dict[str, Any] = tokens[idx].meta
    links = _rendering(env).links
    named, text = meta["target"], meta["alias"]
    if links.text_first and text:
        named, text = text, named
    target = links.wiki(named, meta["embed"])
    label = escapeHtml(text or named)
    if target.image is not None:
        return _image(env, target.image, text or named)
    if meta["embed"]:
        target = Target(target.href, f"{target.css} embed", target.title)
    return _anchor(target, label)


def _render_tag(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    name = tokens[idx].meta["name"]
    href = _rendering(env).links.tag(name)
    return f'<a class="tag" href="{escapeHtml(href)}">#{escapeHtml(name)}</a>'


def _render_link_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    href = str(token.attrGet("href") or "")
    if href.startswith("#"):
        return self.renderToken(tokens, idx, options, env)
    target = _rendering(env).links.markdown(href, False)
    token.attrs = {"class": target.css}
    if target.href is not None:
        token.attrSet("href", target.href)
    if target.title:
        token.attrSet("title", target.title)
    return self.renderToken(tokens, idx, options, env)


def _render_image(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = self.renderInlineAsText(token.children or [], options, env)
    if REMOTE.match(src):
        return _image(env, src, alt)
    target = _rendering(env).links.markdown(src, True)
    if target.image is not None:
        return _image(env, target.image, alt)
    return _anchor(target, escapeHtml(alt or src))


def _image(env: EnvType, src: str, alt: str) -> str:
    rendering = _rendering(env)
    if REMOTE.match(src):
        rendering.remote_images.append(src)
        if not rendering.remote:
            return (
                f'<span class="remote-image" title="{escapeHtml(src)}">remote image not loaded: '
                f"{escapeHtml(src)}</span>"
            )
    return f'<img src="{escapeHtml(src)}" alt="{escapeHtml(alt)}">'


def _render_heading_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    if token.map is not None and token.map[0] in _rendering(env).heading_ids:
        token.attrSet("id", _rendering(env).heading_ids[token.map[0]])
    return self.renderToken(tokens, idx, options, env)


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    md.use(footnote_plugin).use(tasklists_plugin)
    md.inline.ruler.before("link", "wiki_link", _wiki_link)
    md.inline.ruler.before("link", "tag", _tag)
    md.core.ruler.push("blocks", _blocks)
    md.add_render_rule("wiki_link", _render_wiki)
    md.add_render_rule("tag", _render_tag)
    md.add_render_rule("link_open", _render_link_open)
    md.add_render_rule("image", _render_image)
    md.add_render_rule("heading_open", _render_heading_open)
    return md


_PARSER = _parser()
