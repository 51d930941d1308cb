"""Code actions, as edits the editor applies (Coffer writes no file of the user's): a note
made for a broken link, and a plain mention of a note (its name, title or alias, selected
or under the cursor) made a link to it, written the way the KB writes links."""

from __future__ import annotations

import posixpath
from typing import Any

from coffer_kernel.markdown_grammar import MARKDOWN_SUFFIX
from cofferctl.lsp import files, text
from cofferctl.lsp.daemon import Daemon
from cofferctl.lsp.workspace import Note, Workspace, param, uri_param

MENTION_MAX_CHARS = 200
_AT_START = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}


class CodeActions:
    def __init__(self, workspace: Workspace, daemon: Daemon) -> None:
        self.workspace, self.daemon = workspace, daemon

    def code_actions(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """For each broken link in the range: create the note it names (the editor makes
        the file, with a heading), only where that file would really be inside the KB. For
        a note's name, title or alias written plainly: link to it."""
        uri = uri_param(params)
        span = param(params, "range", dict)
        first = param(param(span, "start", dict), "line", int)
        last = param(param(span, "end", dict), "line", int)
        note = self.workspace.current(uri)
        if note is None or note.root is None or note.relpath is None:
            return []
        actions = []
        for link in note.links:
            if link.relative_path is not None or not first <= link.line - 1 <= last:
                continue
            relpath = text.new_note_path(link.type, link.target, note.relpath)
            if relpath is None or not files.can_make(note.folder, relpath):
                continue  # it would lead out, through a link, or onto a file there already
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
        actions += self._mention(note, param(span, "start", dict), param(span, "end", dict))
        return actions

    def _mention(
        self, note: Note, start: dict[str, Any], end: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """The selected text (or the word under the cursor) made a link to the note whose
        name, title or alias it is."""
        line_no = param(start, "line", int)
        lines = note.text.split("\n")
        if note.kb is None or line_no != param(end, "line", int) or not 0 <= line_no < len(lines):
            return []
        encoding = self.workspace.encoding
        line = lines[line_no]
        first = text.index_of(line, param(start, "character", int), encoding)
        last = text.index_of(line, param(end, "character", int), encoding)
        first, last = text.mention(line, first, last)
        mention = line[first:last]
        inside = any(
            link.line == line_no + 1 and link.start < last and first < link.end
            for link in note.links
        )
        if not mention.strip() or inside or len(mention) > MENTION_MAX_CHARS:
            return []
        wanted = mention.casefold()
        answer = self.daemon.named(note.kb, mention)
        for named in answer["names"]:
            stem = named["relative_path"].rsplit("/", 1)[-1].rsplit(".", 1)[0]
            if wanted not in {n.casefold() for n in (stem, named["title"], *named["aliases"])}:
                continue
            link = named["link"]
            if answer["link_style"].get("markdown"):
                folder = posixpath.dirname(note.relpath or "") or "."
                written = text.markdown_link(mention, named["relative_path"], folder)
            elif wanted in (
                link.casefold(),
                MARKDOWN_SUFFIX.sub("", link).casefold(),
            ):  # .md or not
                written = f"[[{link}]]"
            else:
                written = f"[[{link}|{mention}]]"
            span = {
                "start": {"line": line_no, "character": text.columns(line, first, encoding)},
                "end": {"line": line_no, "character": text.columns(line, last, encoding)},
            }
            edit = {"changes": {note.uri: [{"range": span, "newText": written}]}}
            return [
                {"title": f"Link to {named['relative_path']}", "kind": "quickfix", "edit": edit}
            ]
        return []
