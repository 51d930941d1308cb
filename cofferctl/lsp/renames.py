"""Renames, as edits the editor applies (Coffer writes no file of the user's): a heading
renamed with every link to it (`[[note#heading]]`, `[x](note.md#heading)`), and before the
editor renames notes, every link to each rewritten to its new place.

A rewritten link always names what it meant: each is read back by the grammar before it
is offered (a Markdown link's path and heading percent-encoded as needed); when a link of
its kind cannot name the new name (a wiki link and `|`, `#`, `^`, brackets, a line break;
a heading that is not one line), the rename is refused with an error saying why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cofferctl.jsonrpc import INVALID_PARAMS, RpcError
from cofferctl.lsp import files, text
from cofferctl.lsp.daemon import Daemon
from cofferctl.lsp.workspace import (
    HEADING_READ_BYTES,
    Note,
    Workspace,
    checked_uri,
    param,
    uri_param,
)
from cofferd.markdown_grammar import heading as parsed_heading
from cofferd.markdown_grammar import headings

Rewrite = Callable[[str, dict[str, Any]], "str | None"]
REQUEST_FAILED = -32803  # LSP: the request was well formed, and cannot be done


class Renames:
    def __init__(self, workspace: Workspace, daemon: Daemon) -> None:
        self.workspace, self.daemon = workspace, daemon

    def rename(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """Rename the heading under the cursor: the heading, and every link to it from
        other notes."""
        uri = uri_param(params)
        line_no = param(param(params, "position", dict), "line", int)
        new_name = param(params, "newName", str).strip()
        note = self.workspace.current(uri, placed_only=True)
        if note is None or note.kb is None or note.relpath is None or note.root is None:
            return None
        heading = next((h for h in headings(note.text) if h[0] == line_no), None)
        if heading is None or not new_name:
            raise RpcError(INVALID_PARAMS, "put the cursor on a heading to rename it")
        breaks = sorted({ch for ch in new_name if ch in text.LINE_BREAKS})
        if breaks:
            raise RpcError(
                REQUEST_FAILED,
                f"a heading is one line: the new name holds {', '.join(map(repr, breaks))}",
            )
        if parsed_heading("#" * heading[1] + " " + new_name) != (heading[1], new_name):
            raise RpcError(
                REQUEST_FAILED,
                f"{new_name!r} would not read back as that heading (closing #s, or too long)",
            )
        encoding = self.workspace.encoding
        line = note.text.split("\n")[line_no]
        at = line.rindex(heading[2])
        here = {
            "range": {
                "start": {"line": line_no, "character": text.columns(line, at, encoding)},
                "end": {
                    "line": line_no,
                    "character": text.columns(line, at + len(heading[2]), encoding),
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
                old = checked_uri(param(rename, "oldUri", str))
                new = checked_uri(param(rename, "newUri", str))
                for uri, edits in self._relinked(old, new).items():
                    changes.setdefault(uri, []).extend(edits)
        return {"changes": changes} if changes else None

    def _relinked(self, old_uri: str, new_uri: str) -> dict[str, list[dict[str, Any]]]:
        """The edits that make every link to the note at `old_uri` lead to `new_uri`."""
        old = Note(old_uri, "")
        old.kb, old.relpath, old.root, old.folder = self.workspace.where(old_uri)
        new_kb, moved_to, _, _ = self.workspace.where(new_uri)
        if old.kb is None or old.kb != new_kb or moved_to is None:
            return {}
        return self._links_to(
            old, lambda written, link: text.relinked(written, link, link["source"], moved_to)
        )

    def _links_to(self, note: Note, rewrite: Rewrite) -> dict[str, list[dict[str, Any]]]:
        """Edits of every link to `note` in the notes that link to it, each link rewritten
        by `rewrite(written, link)` (None: left as it is)."""
        if note.kb is None or note.relpath is None or note.root is None:
            return {}
        kb, relpath, root, folder = note.kb, note.relpath, note.root, note.folder
        found = self.daemon.ask(lambda c: c.get(c.document(kb, relpath, "/links")))
        sources = sorted({b["relative_path"] for b in found["backlinks"]}) if found else []
        encoding = self.workspace.encoding
        edits: dict[str, list[dict[str, Any]]] = {}
        for source in sources:
            uri = text.uri_of(root / source)
            opened = self.workspace.get(uri)
            content = (
                opened.text
                if opened is not None and opened.held
                else files.read_start(folder, source, HEADING_READ_BYTES)
            )
            seen = self.daemon.inspect(kb, source, content)
            lines = content.split("\n")
            for link in seen["links"] if seen else []:
                if link["relative_path"] != relpath:
                    continue
                line = lines[link["line"] - 1]
                written = line[link["start"] : link["end"]]
                try:
                    rewritten = rewrite(written, {**link, "source": source})
                except text.Unwritable as exc:
                    raise RpcError(
                        REQUEST_FAILED, f"{source}, line {link['line']}: {exc}"
                    ) from None
                if rewritten is None or rewritten == written:
                    continue
                span = {
                    "start": {
                        "line": link["line"] - 1,
                        "character": text.columns(line, link["start"], encoding),
                    },
                    "end": {
                        "line": link["line"] - 1,
                        "character": text.columns(line, link["end"], encoding),
                    },
                }
                edits.setdefault(uri, []).append({"range": span, "newText": rewritten})
        return edits
