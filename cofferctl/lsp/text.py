"""Where things are in a note, as an editor counts: lines, and columns in the client's
position encoding (UTF-16 code units unless it offers UTF-32, which is Python's own); file
URIs; what is being typed; links rewritten. Headings, fences, links, tags and suffixes are
read by the daemon's own grammar (`coffer_kernel.markdown_grammar`), so the editor and the index
agree on them."""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

from coffer_kernel.link_targets import heading_key, markdown_path
from coffer_kernel.markdown_grammar import (
    BARE_TARGET_END,
    MARKDOWN_SUFFIX,
    TAG_BEING_TYPED,
    aliased_wiki_links,
    definition_rest,
    headings,
    markdown_links,
    prose_lines,
    reference_definition,
)

UTF16 = "utf-16"
UTF32 = "utf-32"
WORD_MAX = 200  # the longest word under the cursor looked at


def columns(line: str, index: int, encoding: str) -> int:
    """The client's column of the character at `index` of `line`."""
    if encoding == UTF32:
        return index
    head = line[:index]
    return len(head) + sum(1 for ch in head if ord(ch) > 0xFFFF)


def index_of(line: str, column: int, encoding: str) -> int:
    """The index in `line` of the client's `column` (at most the line's end)."""
    if encoding == UTF32:
        return min(column, len(line))
    units = 0
    for index, ch in enumerate(line):
        if units >= column:
            return index
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(line)


def completion_context(line: str, at: int) -> tuple[str, int, str, str] | None:
    """What is being typed at `at` in `line`: (kind, where the typed text starts, the typed
    text, the note a link names so far): "note" after `[[`, "heading" after `[[note#`,
    "alias" after `[[note|`, "path" in a Markdown link's `](`, "tag" after a `#` that
    starts a word; None elsewhere."""
    opening = line.rfind("[[", 0, at)
    if opening >= 0 and "]]" not in line[opening:at]:
        inside = line[opening + 2 : at]
        if "|" in inside:
            named, _, typed = inside.partition("|")
            return "alias", at - len(typed), typed, named.partition("#")[0]
        if "#" in inside:
            named, _, typed = inside.partition("#")
            return "heading", at - len(typed), typed, named
        return "note", opening + 2, inside, ""
    pointing = line.rfind("](", 0, at)
    if pointing >= 0 and not any(ch in line[pointing + 2 : at] for ch in " )<>"):
        return "path", pointing + 2, line[pointing + 2 : at], ""
    m = TAG_BEING_TYPED.search(line, 0, at)
    if m:
        return "tag", m.start() + 1, m.group(1), ""
    return None


def new_note_path(kind: str, target: str, linking: str) -> str | None:
    """Where the note a broken link names would be made, inside its knowledge base: a wiki
    link's name beside the linking note (a path in it from the top), a Markdown link's
    path as it leads from the linking note (`markdown_path`); None when it would lead out."""
    named = target.split("#", 1)[0].strip()
    folder = posixpath.dirname(linking)
    if kind != "wiki":  # a Markdown link or a definition: a path
        normal = markdown_path(named, folder)
    else:
        joined = named if "/" in named else posixpath.join(folder, named)
        if not MARKDOWN_SUFFIX.search(joined):
            joined += ".md"
        normal = posixpath.normpath(joined) if named else None
    if normal is None or normal.startswith(("../", "/")) or normal in (".", ".."):
        return None
    return unicodedata.normalize("NFC", normal)


class Unwritable(ValueError):
    """A link cannot be written to name what it must: the reason, as the editor shows it."""


LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # where an editor may break a line
WIKI_NAME_REFUSED = "[]|#^\\"  # a wiki link cannot name a note whose name holds these
URL_ESCAPED = "%#?<>"  # percent-encoded in a Markdown link's path (with blanks but a space)


def relinked(
    written: str,
    link: dict[str, Any],
    source: str,
    moved_to: str,
    wiki_name: str | None = None,
) -> str | None:
    """The link `written` (as in the note at `source`) made to lead to `moved_to`, its
    heading, alias and form kept: a wiki link names the note as before (its file name,
    or its path when it gave one; `wiki_name` when given), a Markdown link gives the path
    from its note's folder (a GitHub wiki's `[[text|Page]]`, `text_first`: after the bar).
    A wiki link cannot name a note whose name holds `|`, `#`, `^`, brackets or a line
    break: it becomes a Markdown link to it (`wiki_as_markdown`)."""
    name = link["target"].split("#", 1)[0].strip()
    if not name:
        return None
    heading = _heading_of(link)
    text_first = bool(link.get("text_first"))
    if link["type"] == "wiki":
        bare = MARKDOWN_SUFFIX.sub("", moved_to)
        new_name = bare if "/" in name else bare.rsplit("/", 1)[-1]
        if MARKDOWN_SUFFIX.search(name):
            new_name += moved_to[len(bare) :]
        if wiki_name is not None:
            new_name = wiki_name
        if any(ch in new_name for ch in WIKI_NAME_REFUSED + LINE_BREAKS):
            angled = bool(link.get("note_angles"))
            return wiki_as_markdown(
                written, heading, source, moved_to, angled=angled, text_first=text_first
            )
        opening = written.index("[[") + 2
        if text_first:
            opening = written.index("|", opening) + 1
        at = written.index(name, opening)
        rewritten = written[:at] + new_name + written[at + len(name) :]
        return checked(rewritten, "wiki", new_name, heading, text_first)
    path = (
        "/" + moved_to
        if name.startswith("/")
        else posixpath.relpath(moved_to, posixpath.dirname(source) or ".")
    )
    start, stop = target_span(written, link["type"])
    if written.startswith("<", start):  # [x](<my plan.md#budget>): written as it is
        cut = _name_end(written, start + 1, stop - 1)
        rewritten = written[: start + 1] + url_path(path) + written[cut:]
    else:
        cut = _name_end(written, start, stop)
        inside = url_path(path)
        if any(ch in inside for ch in " ()"):  # a bare target cannot hold these: <...> can
            rewritten = written[:start] + "<" + inside + written[cut:stop] + ">" + written[stop:]
        else:
            rewritten = written[:start] + inside + written[cut:]
    return checked(rewritten, link["type"], path, heading)


def wiki_as_markdown(
    written: str, heading: str | None, source: str, moved_to: str, *, angled: bool = False,
    text_first: bool = False,
) -> str:  # fmt: skip
    """The wiki link or embed `written` (in the note at `source`) as a Markdown one leading
    to `moved_to`, a name no wiki link can hold (`|`, `#`, `^`, brackets, a line break): its
    path from the note's folder and its `#heading` percent-encoded, its alias (else the
    note's name, as Obsidian shows the link) its text: `[[plan#Budget|money]]` ->
    `[money](a%23b.md#Budget)`. In the style of the note's own Markdown links: `angled`
    (they write `<my plan.md>`), its spaces kept inside `<...>`, else `%20`. (`text_first`:
    a GitHub wiki's `[[money|plan#Budget]]`.)"""
    inside = written[written.index("[[") + 2 : written.rindex("]]")]
    page, bar, alias = inside.partition("|")
    alias = page if text_first else alias
    label = alias.strip() if bar else MARKDOWN_SUFFIX.sub("", posixpath.basename(moved_to))
    if not bar and heading:
        label += " > " + heading
    # a line break, a bracket or a backslash (which would escape the `]`) cannot be text
    label = " ".join("".join(" " if ch in LINE_BREAKS + "[]\\" else ch for ch in label).split())
    path = posixpath.relpath(moved_to, posixpath.dirname(source) or ".")
    encoded = url_fragment(path, spaces=angled).replace("\\", "%5C")
    fragment = (
        ""
        if heading is None
        else "#" + "#".join(url_fragment(part, spaces=angled) for part in heading.split("#"))
    )
    target = encoded + fragment
    if angled and " " in target:
        target = f"<{target}>"
    embed = "!" if written.startswith("!") else ""
    return checked(f"{embed}[{label}]({target})", "markdown", path, heading)


def angle_brackets(content: str) -> bool:
    """Whether the note's Markdown links write their targets in `<...>` (most of those
    whose target holds a space or `%20`, `<my plan.md>` over `my%20plan.md`)."""
    angled = encoded = 0
    for _, line in prose_lines(content):
        if "](" in line:
            for _, _, target in markdown_links(line):
                if target.startswith("<") and " " in target:
                    angled += 1
                elif "%20" in target:
                    encoded += 1
    return angled > encoded


def target_span(written: str, kind: str) -> tuple[int, int]:
    """Where the target of the Markdown link or definition `written` is in it (`<...>`
    included)."""
    if kind == "definition":
        found = reference_definition(written) or definition_rest(written)
        if found is None:
            raise Unwritable(f"{written!r} is no longer a link reference definition")
        return found.target_start, found.target_end
    after = written.index("](") + 2
    start = after + len(written[after:]) - len(written[after:].lstrip())
    if written.startswith("<", start):
        return start, written.index(">", start) + 1
    bare_end = BARE_TARGET_END.search(written, start)
    return start, bare_end.start() if bare_end else len(written)


def _heading_of(link: dict[str, Any]) -> str | None:
    """The `#heading` a link names, as the grammar reads it back (decoded when Markdown)."""
    _, hash_, heading = link["target"].partition("#")
    if not hash_:
        return None
    return heading if link["type"] == "wiki" else unquote(heading)


def url_path(path: str) -> str:
    """`path` as a Markdown link's destination holds it: `%`, `#`, `?`, `<`, `>`, every
    blank but a space and every control character percent-encoded (cofferd decodes them)."""
    return "".join(
        quote(ch, safe="")
        if ch in URL_ESCAPED or (ch.isspace() and ch != " ") or not ch.isprintable()
        else ch
        for ch in path
    )


def url_fragment(heading: str, spaces: bool) -> str:
    """`heading` as a Markdown link's `#fragment`: as `url_path`, and `(`, `)` too; spaces
    kept only inside `<...>` (`spaces`)."""
    encoded = url_path(heading).replace("(", "%28").replace(")", "%29")
    return encoded if spaces else encoded.replace(" ", "%20")


def reads_as(written: str, kind: str, text_first: bool = False) -> tuple[str, str | None] | None:
    """What a link written anew names as the grammar reads it back, (name or path, heading
    or None), decoded as cofferd decodes a Markdown link; None when `written` is not
    exactly one link of that `kind` on one line (`text_first`: read as a GitHub wiki)."""
    if any(ch in written for ch in LINE_BREAKS):
        return None
    if kind == "wiki":
        wiki = list(aliased_wiki_links(written))
        if len(wiki) != 1 or wiki[0][0] not in (0, 1) or wiki[0][1] != len(written):
            return None
        _, _, target, alias = wiki[0]
        name, hash_, heading = (alias if text_first and alias else target).partition("#")
        return name.strip(), heading if hash_ else None
    if kind == "definition":
        definition = reference_definition(written) or definition_rest(written)
        if definition is None or (definition.start, definition.end) != (0, len(written)):
            return None
        target = written[definition.target_start : definition.target_end]
    else:
        found = list(markdown_links(written))
        if len(found) != 1 or found[0][:2] != (0, len(written)):
            return None
        target = found[0][2]
    path, hash_, heading = target.strip("<>").strip().partition("#")
    return unquote(path.split("?", 1)[0]), unquote(heading) if hash_ else None


def checked(
    rewritten: str, kind: str, name: str, heading: str | None, text_first: bool = False
) -> str:
    """`rewritten`, once read back as naming `name` (and `heading`); Unwritable else."""
    if reads_as(rewritten, kind, text_first) != (name, heading):
        what = name + (f"#{heading}" if heading is not None else "")
        raise Unwritable(
            f"a {kind} link cannot be written to name {what!r} (it would read otherwise)"
        )
    return rewritten


def _name_end(written: str, start: int, end: int) -> int:
    """Where a Markdown link's path ends: at its `#heading`, or at its end."""
    at = written.find("#", start, end)
    return end if at < 0 else at


def mention(line: str, first: int, last: int) -> tuple[int, int]:
    """The text a code action would link: the selection, or the word under the cursor."""
    if first < last:
        return first, last
    start, end = first, first
    while start > max(0, first - WORD_MAX) and _word_char(line[start - 1]):
        start -= 1
    while end < min(len(line), first + WORD_MAX) and _word_char(line[end]):
        end += 1
    return start, end


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_-"


def reheaded(
    written: str,
    link: dict[str, Any],
    old: str,
    new: str,
    anchors: Mapping[str, str] | None = None,
) -> str | None:
    """The link `written` with its `#heading` renamed from `old` to `new` (any case), or
    the part of `#A#B` that names it; a Markdown link or definition naming a heading by a
    GitHub anchor the rename changes (`anchors`, old to new: `#markdown-templates`, and the
    `-1` of another heading of the same name) is given the new anchor. None when it names
    no heading, or one the rename leaves as it is. Unwritable when a link of its kind cannot name
    `new` (a wiki link and `|`, `]]`, `[[`): the editor is told why."""
    name, hash_, heading = link["target"].partition("#")
    markdown = link["type"] != "wiki"  # a Markdown link or a definition
    named = unquote(heading) if markdown else heading
    before = target_span(written, link["type"])[1] if markdown else len(written)
    at = written.rfind("#" + heading, 0, before)
    if not hash_ or at < 0:
        return None
    parts = named.split("#")
    for n, part in enumerate(parts):
        if heading_key(part) == heading_key(old):
            parts[n] = new
            break
        if markdown and anchors and part.casefold() in anchors:
            parts[n] = anchors[part.casefold()]
            break
    else:
        return None
    named_new = "#".join(parts)
    if markdown:
        written_new = "#".join(url_fragment(part, spaces="<" in written) for part in parts)
        path = reads_as(written, link["type"])
        kept = path[0] if path else unquote(name.split("?", 1)[0])
    else:
        written_new, kept = named_new, name.strip()
        refused = sorted({ch for ch in new if ch in "[]|" + LINE_BREAKS})
        if refused:
            raise Unwritable(
                f"a wiki link cannot name the heading {new!r}: it holds "
                f"{', '.join(repr(ch) for ch in refused)}"
            )
    rewritten = written[: at + 1] + written_new + written[at + 1 + len(heading) :]
    return checked(rewritten, link["type"], kept, named_new, bool(link.get("text_first")))


def path_of(uri: str) -> Path | None:
    """The file a `file:` URI names; None for any other URI (and one holding NUL)."""
    parsed = urlparse(uri)
    path = unquote(parsed.path)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost") or "\0" in path:
        return None
    return Path(path)


def uri_of(path: Path) -> str:
    return path.as_uri()


def relative(path: Path, root: Path) -> str | None:
    """`path` inside `root`, as a knowledge base names it (POSIX, NFC); None outside."""
    try:
        inside = path.relative_to(root)
    except ValueError:
        return None
    if not inside.parts or ".." in inside.parts:
        return None
    return unicodedata.normalize("NFC", inside.as_posix())


def heading_line(text: str, name: str) -> int | None:
    """The line (from 0) of the first heading called `name` (any case)."""
    wanted = name.strip().casefold()
    return next((n for n, _, found in headings(text) if found.casefold() == wanted), None)


def first_lines(text: str, lines: int = 12, chars: int = 1000) -> str:
    """The first lines of a note after its frontmatter: what a hover shows of it."""
    body = text
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        body = text[end + 4 :] if end >= 0 else text
    kept = [line for line in body.split("\n", lines * 4)[: lines * 4] if line.strip()][:lines]
    return "\n".join(kept)[:chars]


SHOWN_LINES = 12
SHOWN_CHARS = 1000


def section_lines(text: str, span: tuple[int, int]) -> str:
    """The lines of `span` (a heading's section, a block), as much as a hover shows."""
    lines = text.split("\n", span[1])[span[0] : span[1]]
    kept = [line for line in lines if line.strip()][:SHOWN_LINES]
    return "\n".join(kept)[:SHOWN_CHARS]


def destination(relpath: str, folder: str) -> str:
    """The path of `relpath` from a note in `folder`, as a Markdown link's target: in `<>`
    when it holds what a bare one cannot, percent-encoded as `url_path`."""
    path = url_path(posixpath.relpath(relpath, folder))
    return f"<{path}>" if any(ch in path for ch in " ()") else path


def markdown_link(label: str, relpath: str, folder: str) -> str:
    """A Markdown link saying `label`, to `relpath` from a note in `folder`."""
    for ch in "\\[]":
        label = label.replace(ch, "\\" + ch)
    return f"[{label}]({destination(relpath, folder)})"
