"""Navigation: go to the note (and heading or block: `fragments`) a link leads to, hover a
link to see that section or block (else the note's first lines), and the notes that link
to this one (references: its backlinks).
What is shown of another note is read through `files`: inside its KB's root only."""

from __future__ import annotations

from typing import Any

from cofferctl.lsp import files, fragments, text
from cofferctl.lsp.daemon import Daemon
from cofferctl.lsp.workspace import (
    HEADING_READ_BYTES,
    HeldLink,
    Note,
    Workspace,
    param,
    uri_param,
)

HOVER_READ_BYTES = 64 * 1024


class Navigation:
    def __init__(self, workspace: Workspace, daemon: Daemon) -> None:
        self.workspace, self.daemon = workspace, daemon

    def definition(self, params: dict[str, Any]) -> dict[str, Any] | None:
        found = self.link_at(params)
        return target(*found) if found else None

    def hover(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """On a link: the note it leads to, its path, and the section or block it names
        (else its first lines)."""
        found = self.link_at(params)
        relpath = found[1].relative_path if found else None
        if found is None or relpath is None:
            return None
        note, link = found
        fragment = fragments.fragment_of(link.type, link.target)
        limit = HEADING_READ_BYTES if fragment else HOVER_READ_BYTES
        content = files.read_start(note.folder, relpath, limit)
        span = fragments.span_of(content, fragment) if fragment else None
        part = fragments.shown(content, span) if span else text.first_lines(content)
        named = f"#{fragment}" if span else ""
        shown = f"**{relpath}**{named}\n\n{part}"
        return {"contents": {"kind": "markdown", "value": shown}}

    def references(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The notes that link to this one (backlinks), each at the line of its link."""
        note = self.workspace.current(uri_param(params), placed_only=True)
        if note is None or note.kb is None or note.relpath is None or note.root is None:
            return []
        kb, relpath, root = note.kb, note.relpath, note.root
        found = self.daemon.ask(lambda c: c.get(c.document(kb, relpath, "/links")))
        if not isinstance(found, dict):
            return []
        out = []
        for link in found["backlinks"]:
            start = {"line": max(link["line"] - 1, 0), "character": 0}
            where = text.uri_of(root / link["relative_path"])
            out.append({"uri": where, "range": {"start": start, "end": start}})
        return out

    def link_at(self, params: dict[str, Any]) -> tuple[Note, HeldLink] | None:
        """The open note and its link at the position asked about."""
        uri = uri_param(params)
        position = param(params, "position", dict)
        line_no, column = param(position, "line", int), param(position, "character", int)
        note = self.workspace.current(uri)
        if note is None or note.root is None:
            return None
        lines = note.text.split("\n")
        if not 0 <= line_no < len(lines):
            return None
        at = text.index_of(lines[line_no], column, self.workspace.encoding)
        for link in note.links:
            if link.line == line_no + 1 and link.start <= at < link.end:
                return note, link
        return None


def target(note: Note, link: HeldLink) -> dict[str, Any] | None:
    """Where a link leads: its note, at the heading or block it names."""
    if link.relative_path is None or note.root is None:
        return None
    line = 0
    fragment = fragments.fragment_of(link.type, link.target)
    if fragment:
        content = files.read_start(note.folder, link.relative_path, HEADING_READ_BYTES)
        span = fragments.span_of(content, fragment)
        line = span[0] if span else 0
    start = {"line": line, "character": 0}
    uri = text.uri_of(note.root / link.relative_path)
    return {"uri": uri, "range": {"start": start, "end": start}}
