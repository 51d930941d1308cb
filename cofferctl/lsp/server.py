"""The language server: the protocol's methods over the open notes (`notes`) and the edits
(`edits`): initialization, the notes' text as the editor holds it, navigation, symbols
and completion.
"""

from __future__ import annotations

import os
import posixpath
import sys
import threading
import time
from pathlib import Path
from typing import Any

from cofferctl.client import Client
from cofferctl.lsp import text
from cofferctl.lsp.edits import Edits
from cofferctl.lsp.notes import HEADING_READ_BYTES, Note, param, read_start
from cofferctl.lsp.stdio import Transport, serve
from cofferd import __version__
from cofferd.markdown_grammar import headings

REFRESH_S = 0.5  # how often the daemon is asked whether its index changed
HOVER_READ_BYTES = 64 * 1024
WORKSPACE_SYMBOLS = 20  # passages a symbol search shows
SNIPPET_CHARS = 120
COMPLETIONS = 100
COMPLETION_KINDS = {"note": 17, "path": 17, "heading": 15, "alias": 18, "tag": 14}


class CofferLanguageServer(Edits):
    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        folders = params.get("workspaceFolders") or []
        uris = [f.get("uri") for f in folders if isinstance(f, dict)] or [params.get("rootUri")]
        self.roots = [p for u in uris if isinstance(u, str) and (p := text.path_of(u))]
        general = (params.get("capabilities") or {}).get("general") or {}
        offered = general.get("positionEncodings") or []
        self.encoding = text.UTF32 if text.UTF32 in offered else text.UTF16
        return {
            "capabilities": {
                "positionEncoding": self.encoding,
                "textDocumentSync": {"openClose": True, "change": 1},  # whole text each time
                "definitionProvider": True,
                "codeActionProvider": {"codeActionKinds": ["quickfix"]},
                "renameProvider": True,
                "workspace": {
                    "fileOperations": {
                        "willRename": {"filters": [{"pattern": {"glob": "**/*.{md,markdown}"}}]}
                    }
                },
                "completionProvider": {"triggerCharacters": ["["]},
                "hoverProvider": True,
                "referencesProvider": True,
                "documentSymbolProvider": True,
                "workspaceSymbolProvider": True,
            },
            "serverInfo": {"name": "coffer", "version": __version__},
        }

    def initialized(self, params: dict[str, Any]) -> None:
        """Diagnostics follow the other notes too: the daemon's index is watched for
        writes (a note made, removed or renamed elsewhere), and the open notes are looked
        at again after each."""
        if self._refreshing is None:  # a second `initialized` starts no second one
            self._refreshing = threading.Thread(
                target=self._refresh, name="lsp-refresh", daemon=True
            )
            self._refreshing.start()

    def _refresh(self) -> None:
        while True:
            time.sleep(REFRESH_S)
            self.refresh()

    def did_open(self, params: dict[str, Any]) -> None:
        document = param(params, "textDocument", dict)
        uri, body = param(document, "uri", str), param(document, "text", str)
        note = Note(uri, body)
        self._place(note)
        with self._lock:
            self.notes[uri] = note
            self._inspect(note)

    def did_change(self, params: dict[str, Any]) -> None:
        uri = param(param(params, "textDocument", dict), "uri", str)
        changes = param(params, "contentChanges", list)
        note = self.notes.get(uri)
        if note is None or not changes or not isinstance(changes[-1], dict):
            return
        with self._lock:
            note.text = param(changes[-1], "text", str)  # full sync: the last is whole
            self._inspect(note)

    def did_close(self, params: dict[str, Any]) -> None:
        uri = param(param(params, "textDocument", dict), "uri", str)
        with self._lock:
            closed = self.notes.pop(uri, None)
        if closed is not None:
            self.transport.notify(
                "textDocument/publishDiagnostics", {"uri": uri, "diagnostics": []}
            )

    def definition(self, params: dict[str, Any]) -> dict[str, Any] | None:
        found = self._link_at(params)
        return self._target(*found) if found else None

    def hover(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """On a link: the note it leads to, its path and first lines."""
        found = self._link_at(params)
        target = self._target(*found) if found else None
        if found is None or target is None:
            return None
        path = text.path_of(target["uri"])
        content = read_start(path, HOVER_READ_BYTES) if path else ""
        shown = f"**{found[1]['relative_path']}**\n\n{text.first_lines(content)}"
        return {"contents": {"kind": "markdown", "value": shown}}

    def references(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The notes that link to this one (backlinks), each at the line of its link."""
        uri = param(param(params, "textDocument", dict), "uri", str)
        note = self.notes.get(uri)
        if note is None or note.kb is None or note.relpath is None or note.root is None:
            return []
        kb, relpath, root = note.kb, note.relpath, note.root
        found = self._ask(lambda: self.client.get(self.client.document(kb, relpath, "/links")))
        if not isinstance(found, dict):
            return []
        out = []
        for link in found["backlinks"]:
            start = {"line": max(link["line"] - 1, 0), "character": 0}
            where = text.uri_of(root / link["relative_path"])
            out.append({"uri": where, "range": {"start": start, "end": start}})
        return out

    def document_symbols(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The note's headings, nested by level."""
        uri = param(param(params, "textDocument", dict), "uri", str)
        note = self.notes.get(uri)
        if note is None:
            return []
        lines = note.text.split("\n")
        top: list[dict[str, Any]] = []
        open_: list[tuple[int, dict[str, Any]]] = []  # (level, symbol) of the headings above
        for line_no, level, name in headings(note.text):
            end = text.columns(lines[line_no], len(lines[line_no]), self.encoding)
            span = {
                "start": {"line": line_no, "character": 0},
                "end": {"line": line_no, "character": end},
            }
            symbol = {
                "name": name,
                "kind": 15,
                "range": span,
                "selectionRange": span,
                "children": [],
            }
            while open_ and open_[-1][0] >= level:
                open_.pop()
            (open_[-1][1]["children"] if open_ else top).append(symbol)
            open_.append((level, symbol))
        return top

    def workspace_symbols(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """A Coffer search of the workspace's knowledge bases (each searched as it is set:
        keyword or hybrid), its passages as symbols: a question typed in the editor's
        symbol picker finds the passage."""
        query = param(params, "query", str).strip()
        kbs = self._workspace_kbs()
        if not query or not kbs:
            return []
        body = {"query": query, "top_k": WORKSPACE_SYMBOLS, "knowledge_bases": kbs}
        found = self._ask(lambda: self.client.post("/api/v1/search", body))
        if not isinstance(found, dict):
            return []
        out = []
        for passage in found.get("passages", []):
            start = {"line": max(passage["line_start"] - 1, 0), "character": 0}
            name = " > ".join(passage["heading"]) or passage["title"]
            out.append(
                {
                    "name": f"{name}: {passage['snippet'][:SNIPPET_CHARS]}",
                    "kind": 15,  # a string: a passage of text
                    "location": {
                        "uri": text.uri_of(Path(passage["path"])),
                        "range": {"start": start, "end": start},
                    },
                    "containerName": passage["relative_path"],
                }
            )
        return out

    def _workspace_kbs(self) -> list[str]:
        """The KBs of the open notes, and those whose folders hold or are in the workspace."""
        names = {note.kb for note in self.notes.values() if note.kb}
        roots = [Path(os.path.realpath(root)) for root in self.roots]
        for folder, kb in self._kb_folders(refresh=False):
            if any(folder.is_relative_to(r) or r.is_relative_to(folder) for r in roots):
                names.add(kb)
        return sorted(names)

    def completion(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """Notes after `[[` (best first: the daemon ranks), a note's headings after
        `[[note#`, its aliases after `[[note|`, tags with their counts after `#`."""
        uri = param(param(params, "textDocument", dict), "uri", str)
        position = param(params, "position", dict)
        line_no, column = param(position, "line", int), param(position, "character", int)
        note = self.notes.get(uri)
        lines = note.text.split("\n") if note is not None else []
        if note is None or note.kb is None or not 0 <= line_no < len(lines):
            return None
        line = lines[line_no]
        at = text.index_of(line, column, self.encoding)
        context = text.completion_context(line, at)
        if context is None:
            return None
        kind, start, typed, named = context
        end = at
        closing = "" if kind == "tag" or line.startswith("]", at) else "]]"
        folder = posixpath.dirname(note.relpath or "") or "."
        written: list[str] | None = None  # what each choice writes, when not its label
        if kind == "note":
            answer = self._named(note.kb, typed)
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
            found = self._names(note.kb, typed.rsplit("/", 1)[-1].removesuffix(".md"))
            choices = [
                (
                    text.destination(n["relative_path"], folder),
                    n["relative_path"],
                    n["title"],
                )
                for n in found
            ]
        elif kind == "tag":
            choices = self._tags(note.kb, typed)
        else:
            choices = self._of_note(note, named, kind, typed)
        edit_range = {
            "start": {"line": line_no, "character": text.columns(line, start, self.encoding)},
            "end": {"line": line_no, "character": text.columns(line, end, self.encoding)},
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
        found = self._ask(lambda: self.client.get(self.client.kb(kb, "/tags")))
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
            content = read_start(note.root / target, HEADING_READ_BYTES) if named else note.text
            return [
                (name, target, "") for _, _, name in headings(content) if wanted in name.casefold()
            ]
        stem = target.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        listed = [n for n in self._names(note.kb, stem) if n["relative_path"] == target]
        return [(a, target, "") for n in listed for a in n["aliases"] if wanted in a.casefold()]


def run(client: Client) -> int:
    transport = Transport(sys.stdin.buffer, sys.stdout.buffer)
    server = CofferLanguageServer(client, transport)
    return serve(
        transport,
        requests={
            "textDocument/definition": server.definition,
            "textDocument/completion": server.completion,
            "textDocument/hover": server.hover,
            "textDocument/references": server.references,
            "textDocument/documentSymbol": server.document_symbols,
            "workspace/symbol": server.workspace_symbols,
            "textDocument/codeAction": server.code_actions,
            "workspace/willRenameFiles": server.will_rename_files,
            "textDocument/rename": server.rename,
        },
        notifications={
            "initialized": server.initialized,
            "textDocument/didOpen": server.did_open,
            "textDocument/didChange": server.did_change,
            "textDocument/didClose": server.did_close,
        },
        initialize=server.initialize,
    )
