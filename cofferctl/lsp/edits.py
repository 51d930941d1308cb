"""Edits the editor applies (Coffer writes no file of the user's): links rewritten when a
note or a heading is renamed, a note made for a broken link, a plain mention made a link.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Any

from cofferctl.jsonrpc import INVALID_PARAMS, RpcError
from cofferctl.lsp import text
from cofferctl.lsp.notes import HEADING_READ_BYTES, Note, Notes, param, read_start
from cofferd.markdown_grammar import headings

MENTION_MAX_CHARS = 200
_AT_START = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}


class Edits(Notes):
    """Renames and code actions."""

    def code_actions(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """For each broken link in the range: create the note it names (the editor makes
        the file, with a heading; Coffer writes nothing). For a note's name, title or
        alias written plainly (selected, or the word under the cursor): link to it."""
        uri = param(param(params, "textDocument", dict), "uri", str)
        span = param(params, "range", dict)
        first = param(param(span, "start", dict), "line", int)
        last = param(param(span, "end", dict), "line", int)
        note = self.notes.get(uri)
        if note is None or note.root is None or note.relpath is None:
            return []
        actions = []
        for link in note.links:
            if link["relative_path"] is not None or not first <= link["line"] - 1 <= last:
                continue
            relpath = text.new_note_path(link["type"], link["target"], note.relpath)
            if relpath is None:
                continue
            made = text.uri_of(note.root / relpath)
            title = relpath.rsplit("/", 1)[-1].rsplit(".", 1)[0]
            actions.append(
                {
                    "title": f"Create the note {relpath}",
                    "kind": "quickfix",
                    "edit": {
                        "documentChanges": [
                            {"kind": "create", "uri": made, "options": {"ignoreIfExists": True}},
                            {
                                "textDocument": {"uri": made, "version": None},
                                "edits": [{"range": _AT_START, "newText": f"# {title}\n"}],
                            },
                        ]
                    },
                }
            )
        actions += self._mention_actions(note, param(span, "start", dict), param(span, "end", dict))
        return actions

    def _mention_actions(
        self, note: Note, start: dict[str, Any], end: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """The selected text (or the word under the cursor) made a link to the note whose
        name, title or alias it is."""
        line_no = param(start, "line", int)
        lines = note.text.split("\n")
        if note.kb is None or line_no != param(end, "line", int) or not 0 <= line_no < len(lines):
            return []
        line = lines[line_no]
        first = text.index_of(line, param(start, "character", int), self.encoding)
        last = text.index_of(line, param(end, "character", int), self.encoding)
        first, last = text.mention(line, first, last)
        mention = line[first:last]
        inside = any(
            link["line"] == line_no + 1 and link["start"] < last and first < link["end"]
            for link in note.links
        )
        if not mention.strip() or inside or len(mention) > MENTION_MAX_CHARS:
            return []
        wanted = mention.casefold()
        answer = self._named(note.kb, mention)
        for named in answer["names"]:
            stem = named["relative_path"].rsplit("/", 1)[-1].rsplit(".", 1)[0]
            if wanted not in {n.casefold() for n in (stem, named["title"], *named["aliases"])}:
                continue
            link = named["link"]
            said = {wanted, f"{wanted}.md", f"{wanted}.markdown"}  # as the KB writes links
            if answer["link_style"].get("markdown"):
                folder = posixpath.dirname(note.relpath or "") or "."
                written = text.markdown_link(mention, named["relative_path"], folder)
            elif link.casefold() in said:
                written = f"[[{link}]]"
            else:
                written = f"[[{link}|{mention}]]"
            span = {
                "start": {"line": line_no, "character": text.columns(line, first, self.encoding)},
                "end": {"line": line_no, "character": text.columns(line, last, self.encoding)},
            }
            edit = {"changes": {note.uri: [{"range": span, "newText": written}]}}
            return [
                {"title": f"Link to {named['relative_path']}", "kind": "quickfix", "edit": edit}
            ]
        return []

    def rename(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """Rename the heading under the cursor: the heading, and every link to it from
        other notes (`[[note#heading]]`, `[x](note.md#heading)`)."""
        uri = param(param(params, "textDocument", dict), "uri", str)
        line_no = param(param(params, "position", dict), "line", int)
        new_name = param(params, "newName", str).strip()
        note = self.notes.get(uri)
        if note is None or note.kb is None or note.relpath is None or note.root is None:
            return None
        heading = next((h for h in headings(note.text) if h[0] == line_no), None)
        if heading is None or not new_name or "\n" in new_name:
            raise RpcError(INVALID_PARAMS, "put the cursor on a heading to rename it")
        lines = note.text.split("\n")
        line = lines[line_no]
        at = line.rindex(heading[2])
        here = {
            "range": {
                "start": {"line": line_no, "character": text.columns(line, at, self.encoding)},
                "end": {
                    "line": line_no,
                    "character": text.columns(line, at + len(heading[2]), self.encoding),
                },
            },
            "newText": new_name,
        }
        changes = {uri: [here]}
        for source, edits in self._links_to(
            note, lambda written, link: text.reheaded(written, link, heading[2], new_name)
        ).items():
            changes.setdefault(source, []).extend(edits)
        return {"changes": changes}

    def will_rename_files(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """Before the editor renames notes: every link to each, in every note, rewritten to
        its new place (the editor applies the edit; Coffer writes nothing)."""
        changes: dict[str, list[dict[str, Any]]] = {}
        for rename in param(params, "files", list):
            if isinstance(rename, dict):
                old, new = param(rename, "oldUri", str), param(rename, "newUri", str)
                for uri, edits in self._relinked(old, new).items():
                    changes.setdefault(uri, []).extend(edits)
        return {"changes": changes} if changes else None

    def _relinked(self, old_uri: str, new_uri: str) -> dict[str, list[dict[str, Any]]]:
        """The edits that make every link to the note at `old_uri` lead to `new_uri`."""
        old, new = Note(old_uri, ""), Note(new_uri, "")
        self._place(old)
        self._place(new)
        if old.kb is None or old.kb != new.kb or new.relpath is None:
            return {}
        moved_to = new.relpath
        return self._links_to(
            old, lambda written, link: text.relinked(written, link, link["source"], moved_to)
        )

    def _links_to(
        self, note: Note, rewrite: Callable[[str, dict[str, Any]], str | None]
    ) -> dict[str, list[dict[str, Any]]]:
        """Edits of every link to `note` in the notes that link to it, each link rewritten
        by `rewrite(written, link)` (None: left as it is)."""
        if note.kb is None or note.relpath is None or note.root is None:
            return {}
        kb, relpath, root = note.kb, note.relpath, note.root
        found = self._ask(lambda: self.client.get(self.client.document(kb, relpath, "/links")))
        sources = sorted({b["relative_path"] for b in found["backlinks"]}) if found else []
        edits: dict[str, list[dict[str, Any]]] = {}
        for source in sources:
            uri = text.uri_of(root / source)
            opened = self.notes.get(uri)
            content = opened.text if opened else read_start(root / source, HEADING_READ_BYTES)
            body = {"relative_path": source, "text": content}
            seen = self._ask(
                lambda body=body: self.client.post(self.client.kb(kb, "/inspect"), body)
            )
            lines = content.split("\n")
            for link in seen["links"] if isinstance(seen, dict) else []:
                if link["relative_path"] != relpath:
                    continue
                line = lines[link["line"] - 1]
                written = line[link["start"] : link["end"]]
                rewritten = rewrite(written, {**link, "source": source})
                if rewritten is None or rewritten == written:
                    continue
                span = {
                    "start": {
                        "line": link["line"] - 1,
                        "character": text.columns(line, link["start"], self.encoding),
                    },
                    "end": {
                        "line": link["line"] - 1,
                        "character": text.columns(line, link["end"], self.encoding),
                    },
                }
                edits.setdefault(uri, []).append({"range": span, "newText": rewritten})
        return edits
