"""Completion: notes after `[[` (best first: the daemon ranks), a note's headings after
`[[note#`, its aliases after `[[note|`, paths in a Markdown link's `](`, tags with their
counts after `#`. Nothing is offered in code (fenced, indented or inline), where the
daemon reads no link or tag either."""

from __future__ import annotations

import posixpath
from typing import Any

from cofferctl.lsp import files, text
from cofferctl.lsp.daemon import Daemon
from cofferctl.lsp.workspace import HEADING_READ_BYTES, Note, Workspace, param, uri_param
from cofferd.markdown_grammar import headings, prose_lines

COMPLETIONS = 100
COMPLETION_KINDS = {"note": 17, "path": 17, "heading": 15, "alias": 18, "tag": 14}


class Completion:
    def __init__(self, workspace: Workspace, daemon: Daemon) -> None:
        self.workspace, self.daemon = workspace, daemon

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
        if kind == "note":
            answer = self.daemon.named(note.kb, typed)
            found = answer["names"]
            choices = [(n["link"], n["relative_path"], n["title"]) for n in found]
            if answer["link_style"].get("markdown"):  # the KB links notes the Markdown way
                start, closing, typed = start - 2, "", "[[" + typed
                end += 2 if line.startswith("]]", at) else 0  # the brackets the editor closed
                written = [
                    text.markdown_link(n["title"] or n["link"], n["relative_path"], folder)
                    for n in found
                ]
        elif kind == "path":
            closing = "" if line.startswith(")", at) else ")"
            found = self.daemon.names(note.kb, typed.rsplit("/", 1)[-1].removesuffix(".md"))
            choices = [
                (text.destination(n["relative_path"], folder), n["relative_path"], n["title"])
                for n in found
            ]
        elif kind == "tag":
            choices = self._tags(note.kb, typed)
        else:
            choices = self._of_note(note, named, kind, typed)
        edit_range = {
            "start": {"line": line_no, "character": text.columns(line, start, encoding)},
            "end": {"line": line_no, "character": text.columns(line, end, encoding)},
        }
        items = [
            {
                "label": label,
                "kind": COMPLETION_KINDS[kind],
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

    def _tags(self, kb: str, typed: str) -> list[tuple[str, str, str]]:
        found = self.daemon.ask(lambda c: c.get(c.kb(kb, "/tags")))
        tags = found["tags"] if isinstance(found, dict) else []
        wanted = typed.casefold()
        return [
            (t["tag"], f"{t['count']} notes", "")
            for t in tags
            if t["tag"].casefold().startswith(wanted)
        ]

    def _of_note(self, note: Note, named: str, kind: str, typed: str) -> list[tuple[str, str, str]]:
        """The headings or aliases of the note `named` links to (this note when empty)."""
        target = self._resolve(note, named) if named else note.relpath
        if target is None or note.kb is None or note.root is None:
            return []
        wanted = typed.casefold()
        if kind == "heading":
            content = (
                files.read_start(note.folder, target, HEADING_READ_BYTES) if named else note.text
            )
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
