"""Completion: notes after `[[` (best first: the daemon ranks; nothing when nothing matches),
each alias that matches what was typed as a choice of its own that writes `[[note|alias]]`
(`[alias](path.md)` where the KB links the Markdown way), a note's headings after
`[[note#`, its block ids (`^id` at a block's end) after `[[note#^`, its aliases after
`[[note|`, paths in a Markdown link's `](`, tags with their counts after `#`; after `![[`
or `![...](` the vault's attachments first (images, PDFs, any file not a note), written
the way the vault embeds (`![[pic.png]]`, or `![pic](img/my%20pic.png)` where it links
the Markdown way). Nothing is offered in code (fenced, indented or inline), where the
daemon reads no link or tag either."""

from __future__ import annotations

import posixpath
import unicodedata
from typing import Any

from coffer_kernel.link_targets import block_ids
from coffer_kernel.markdown_grammar import MARKDOWN_SUFFIX, headings, prose_lines
from cofferctl import api
from cofferctl.lsp import files, text
from cofferctl.lsp.daemon import Daemon
from cofferctl.lsp.workspace import HEADING_READ_BYTES, Note, Workspace, param, uri_param

COMPLETIONS = 100
COMPLETION_KINDS = {
    "note": 17, "path": 17, "heading": 15, "alias": 18, "tag": 14, "block": 18, "file": 17,
}  # fmt: skip
BLOCK_SHOWN_CHARS = 60  # of the block's line, beside its id
WORD_SEPARATORS = " -_/."  # what starts a word in a name, as the daemon ranks
NO_MATCH = 4  # what `_match` says of a name that does not hold what was typed
NOT_IN_WIKI_ALIAS = "[]|\n"  # an alias holding these cannot be written after `[[note|`


class Completion:
    def __init__(self, workspace: Workspace, daemon: Daemon) -> None:
        self.workspace, self.daemon = workspace, daemon
        # per KB: (its count of changes, its attachments by path, how many share each name)
        self._files: dict[str, tuple[int, list[str], dict[str, int]]] = {}

    def completion(self, params: dict[str, Any]) -> dict[str, Any] | None:
        uri = uri_param(params)
        position = param(params, "position", dict)
        line_no, column = param(position, "line", int), param(position, "character", int)
        note = self.workspace.current(uri, placed_only=True)
        lines = note.text.split("\n") if note is not None else []
        if note is None or note.kb is None or not 0 <= line_no < len(lines):
            return None
        encoding = self.workspace.encoding
        line = lines[line_no]
        at = text.index_of(line, column, encoding)
        context = text.completion_context(line, at)
        if context is None or _in_code(note.text, line_no, line, at, context[0], context[1]):
            return None
        kind, start, typed, named = context
        end = at
        closing = "" if kind == "tag" or line.startswith("]", at) else "]]"
        folder = posixpath.dirname(note.relpath or "") or "."
        written: list[str] | None = None  # what each choice writes, when not its label
        kinds: list[str] | None = None  # each choice's kind, when not `kind`
        if kind == "note":
            answer = self.daemon.named(note.kb, typed)
            markdown = bool(answer["link_style"].get("markdown"))
            choices, written, kinds = [], [], []
            for n, alias in _with_aliases(answer["names"], typed, markdown):
                label = alias if alias is not None else n["link"]
                choices.append(
                    (label, n["relative_path"], n["title"] if alias is None else n["link"])
                )
                kinds.append("note" if alias is None else "alias")
                if markdown:
                    shown = alias if alias is not None else n["title"] or n["link"]
                    written.append(text.markdown_link(shown, n["relative_path"], folder))
                else:
                    written.append(n["link"] + ("" if alias is None else "|" + alias))
            if start >= 3 and line[start - 3] == "!":  # `![[`: attachments first
                attached = self._attachments(note.kb, typed.rsplit("/", 1)[-1])
                names = self._files[note.kb][2] if attached else {}
                choices[:0] = [(posixpath.basename(f), f, "") for f in attached]
                kinds[:0] = ["file"] * len(attached)
                written[:0] = [
                    _embedded(f, folder, markdown, names[_fold(posixpath.basename(f))] > 1)
                    for f in attached
                ]
                if not markdown and any(w.startswith("[") for w in written[: len(attached)]):
                    written = [w if w.startswith("[") else "[[" + w + "]]" for w in written]
                    markdown = True  # some name no wiki link can hold: every choice whole
            if markdown:  # the KB links notes the Markdown way
                start, closing, typed = start - 2, "", "[[" + typed
                end += 2 if line.startswith("]]", at) else 0  # the brackets the editor closed
        elif kind == "path":
            closing = "" if line.startswith(")", at) else ")"
            found = self.daemon.names(note.kb, MARKDOWN_SUFFIX.sub("", typed.rsplit("/", 1)[-1]))
            choices = [
                (text.destination(n["relative_path"], folder), n["relative_path"], n["title"])
                for n in found
            ]
            if line.rfind("![", 0, start) > line.rfind("]", 0, start - 2):  # `![alt](`
                attached = self._attachments(note.kb, typed.rsplit("/", 1)[-1])
                kinds = ["file"] * len(attached) + ["path"] * len(choices)
                choices[:0] = [(_embed_path(f, folder), f, "") for f in attached]
        elif kind == "tag":
            choices = self._tags(note.kb, typed)
        else:
            choices = self._of_note(note, named, kind, typed)
            if kind == "heading" and typed.startswith("^"):
                kinds = ["block"] * len(choices)
        edit_range = {
            "start": {"line": line_no, "character": text.columns(line, start, encoding)},
            "end": {"line": line_no, "character": text.columns(line, end, encoding)},
        }
        items = [
            {
                "label": label,
                "kind": COMPLETION_KINDS[kinds[rank] if kinds else kind],
                "detail": detail,
                **({"labelDetails": {"description": more}} if more else {}),
                "filterText": typed,  # ranked here already: the editor keeps each
                "sortText": f"{rank:04d}",
                "textEdit": {
                    "range": edit_range,
                    "newText": (written[rank] if written else label) + closing,
                },
            }
            for rank, (label, detail, more) in enumerate(choices[:COMPLETIONS])
        ]
        return {"isIncomplete": True, "items": items}

    def _attachments(self, kb: str, typed: str) -> list[str]:
        """The KB's files that are not notes (images, PDFs, any other) whose name holds what
        was typed, best first; the list is read again only when the KB's files changed."""
        changes = self.workspace.kb_changes.get(kb)
        held = self._files.get(kb)
        if held is None or changes is None or held[0] != changes:
            answer = self.daemon.ask(lambda c: api.paths(c, kb))
            if not isinstance(answer, dict):
                return []
            found = sorted(
                [p for p in answer["paths"] if not MARKDOWN_SUFFIX.search(p)] + answer["files"]
            )
            names: dict[str, int] = {}
            for path in found:
                name = _fold(posixpath.basename(path))
                names[name] = names.get(name, 0) + 1
            held = (answer["document_changes"], found, names)
            self._files[kb] = held
        q = _fold(typed.strip())
        ranked = [(_match(posixpath.basename(p), q) if q else 0, p) for p in held[1]]
        return [p for score, p in sorted(ranked) if score < NO_MATCH][:COMPLETIONS]

    def _tags(self, kb: str, typed: str) -> list[tuple[str, str, str]]:
        found = self.daemon.ask(lambda c: api.tags(c, kb))
        tags = found["tags"] if isinstance(found, dict) else []
        wanted = typed.casefold()
        return [
            (t["tag"], f"{t['count']} notes", "")
            for t in tags
            if t["tag"].casefold().startswith(wanted)
        ]

    def _of_note(self, note: Note, named: str, kind: str, typed: str) -> list[tuple[str, str, str]]:
        """The headings, block ids (`typed` starting with `^`) or aliases of the note
        `named` links to (this note when empty)."""
        target = self._resolve(note, named) if named else note.relpath
        if target is None or note.kb is None or note.root is None:
            return []
        wanted = typed.casefold()
        if kind == "heading":
            content = (
                files.read_start(note.folder, target, HEADING_READ_BYTES) if named else note.text
            )
            if typed.startswith("^"):
                return _blocks(content, target, wanted[1:])
            return [
                (name, target, "") for _, _, name in headings(content) if wanted in name.casefold()
            ]
        stem = target.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        listed = [n for n in self.daemon.names(note.kb, stem) if n["relative_path"] == target]
        return [(a, target, "") for n in listed for a in n["aliases"] if wanted in a.casefold()]

    def _resolve(self, note: Note, named: str) -> str | None:
        """The note a wiki link naming `named` leads to from `note` (the daemon resolves)."""
        found = self.daemon.inspect(note.kb or "", note.relpath or "", f"[[{named}]]")
        links = found["links"] if found else []
        return links[0]["relative_path"] if links else None


def _embedded(path: str, folder: str, markdown: bool, shared_name: bool) -> str:
    """What embedding the file at `path` writes after `![[`: its name (its path when
    another file shares the name), or `[name](path)` where the vault links the Markdown way
    or the name cannot be in a wiki link (the `!` typed stays before it)."""
    name = path if shared_name else posixpath.basename(path)
    if markdown or any(ch in name for ch in text.WIKI_NAME_REFUSED + text.LINE_BREAKS):
        label = " ".join(
            "".join(" " if ch in "[]\\" else ch for ch in posixpath.basename(path)).split()
        )
        return f"[{label}]({_embed_path(path, folder)})"
    return name


def _embed_path(path: str, folder: str) -> str:
    """The path of `path` from a note in `folder`, percent-encoded as a Markdown embed's."""
    return text.url_fragment(posixpath.relpath(path, folder), spaces=False)


def _with_aliases(
    found: list[dict[str, Any]], typed: str, markdown: bool
) -> list[tuple[dict[str, Any], str | None]]:
    """The daemon's notes, best first, each with its aliases that match what was typed
    (alias None: the note itself); an alias before its note when it matches better than
    the note's file name, title or path do (`file` typed: `File formats` before
    `Accepted file formats`)."""
    q = _fold(typed.strip())
    if not q:
        return [(n, None) for n in found]
    listed: list[tuple[dict[str, Any], str | None]] = []
    for n in found:
        own = min(_match(t, q) for t in (n["link"], n["title"], n["relative_path"]))
        ranked: list[tuple[int, int, str | None]] = [(own, 0, None)]
        for number, alias in enumerate(n["aliases"], 1):
            if not isinstance(alias, str) or not alias.strip() or "\n" in alias:
                continue
            if not markdown and any(ch in alias for ch in NOT_IN_WIKI_ALIAS):
                continue
            if (score := _match(alias, q)) < NO_MATCH:
                ranked.append((score, number, alias))
        listed.extend((n, alias) for _, _, alias in sorted(ranked, key=lambda r: r[:2]))
    return listed


def _match(name: str, q: str) -> int:
    """How `name` holds `q` (folded): 0 it starts so, 1 a word does, 2 it holds it,
    3 its letters in that order, `NO_MATCH` not at all."""
    folded = _fold(name)
    if folded.startswith(q):
        return 0
    if any(separator + q in folded for separator in WORD_SEPARATORS):
        return 1
    if q in folded:
        return 2
    at = 0
    for letter in q:
        at = folded.find(letter, at) + 1
        if not at:
            return NO_MATCH
    return 3


def _fold(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


def _blocks(content: str, target: str, wanted: str) -> list[tuple[str, str, str]]:
    """The block ids of `content` (`^id` ending a line of prose) holding `wanted`, each with the
    start of its line."""
    found = []
    for _, block_id, line in block_ids(content):
        if wanted in block_id.casefold():
            shown = line[: line.rindex("^" + block_id)].strip()[:BLOCK_SHOWN_CHARS]
            found.append(("^" + block_id, target, shown))
    return found


def _in_code(note_text: str, line_no: int, line: str, at: int, kind: str, start: int) -> bool:
    """Whether what is being typed is in code, by the grammar the daemon reads links and
    tags with: its line in fenced or indented code, or its opener in a code span."""
    opener = {"tag": start - 1, "path": start - 2}.get(kind, line.rfind("[[", 0, at))
    for number, prose in prose_lines(note_text):
        if number == line_no:
            return prose[opener] != line[opener]
        if number > line_no:
            break
    return True
