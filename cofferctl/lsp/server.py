"""The language server's work: notes open in the editor, what cofferd says of each
(`POST .../inspect` on its unsaved text) published as diagnostics, and go to definition on
a link. A note belongs to the knowledge base whose docs folder holds it (`status` names
them); a note in none is left alone.
"""

from __future__ import annotations

import os
import posixpath
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cofferctl.client import ApiError, Client, DaemonUnreachable, ProtocolError
from cofferctl.jsonrpc import INVALID_PARAMS, RpcError
from cofferctl.lsp import text
from cofferctl.lsp.stdio import Transport, log, serve
from cofferd import __version__

ERROR, WARNING, INFORMATION = 1, 2, 3  # diagnostic severities
_AT_START = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
SOURCE = "coffer"
REFRESH_S = 0.5  # how often the daemon is asked whether its index changed
HEADING_READ_BYTES = 16 * 1024 * 1024  # as far as cofferd indexes a note
HOVER_READ_BYTES = 64 * 1024
WORKSPACE_SYMBOLS = 20  # passages a symbol search shows
COMPLETIONS = 100
MENTION_MAX_CHARS = 200
COMPLETION_KINDS = {
    "note": 17,
    "path": 17,
    "heading": 15,
    "alias": 18,
    "tag": 14,
}  # file, string, ...
SNIPPET_CHARS = 120


@dataclass
class Note:
    """A note open in the editor: its text as the editor holds it."""

    uri: str
    text: str
    kb: str | None = None
    relpath: str | None = None
    root: Path | None = None  # the KB's docs folder, as the editor's path names it
    links: list[dict[str, Any]] = field(default_factory=list)  # from the last inspection
    writes: int | None = None  # the index's writes when it was last inspected


class CofferLanguageServer:
    def __init__(self, client: Client, transport: Transport) -> None:
        self.client = client
        self.transport = transport
        self.encoding = text.UTF16
        self.notes: dict[str, Note] = {}
        self.roots: list[Path] = []  # the workspace's folders
        self._folders: list[tuple[Path, str]] | None = None  # (docs folder, KB), real paths
        self._unreachable_said = False
        self._lock = threading.Lock()  # one look at a note at a time: the last is published last
        self._refreshing: threading.Thread | None = None

    # -- the protocol's methods -------------------------------------------------------------

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
            health = self._ask(lambda: self.client.get("/api/v1/health"))
            writes = health.get("index_writes") if isinstance(health, dict) else None
            if writes is None:
                continue
            with self._lock:
                for note in list(self.notes.values()):
                    if note.writes is not None and note.writes != writes:
                        self._inspect(note)

    def did_open(self, params: dict[str, Any]) -> None:
        document = _field(params, "textDocument", dict)
        uri, body = _field(document, "uri", str), _field(document, "text", str)
        note = Note(uri, body)
        self._place(note)
        with self._lock:
            self.notes[uri] = note
            self._inspect(note)

    def did_change(self, params: dict[str, Any]) -> None:
        uri = _field(_field(params, "textDocument", dict), "uri", str)
        changes = _field(params, "contentChanges", list)
        note = self.notes.get(uri)
        if note is None or not changes or not isinstance(changes[-1], dict):
            return
        with self._lock:
            note.text = _field(changes[-1], "text", str)  # full sync: the last is whole
            self._inspect(note)

    def did_close(self, params: dict[str, Any]) -> None:
        uri = _field(_field(params, "textDocument", dict), "uri", str)
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
        content = _read(path, HOVER_READ_BYTES) if path else ""
        shown = f"**{found[1]['relative_path']}**\n\n{text.first_lines(content)}"
        return {"contents": {"kind": "markdown", "value": shown}}

    def references(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The notes that link to this one (backlinks), each at the line of its link."""
        uri = _field(_field(params, "textDocument", dict), "uri", str)
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
        uri = _field(_field(params, "textDocument", dict), "uri", str)
        note = self.notes.get(uri)
        if note is None:
            return []
        lines = note.text.split("\n")
        top: list[dict[str, Any]] = []
        open_: list[tuple[int, dict[str, Any]]] = []  # (level, symbol) of the headings above
        for line_no, level, name in text.headings(note.text):
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
        query = _field(params, "query", str).strip()
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

    def code_actions(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """For each broken link in the range: create the note it names (the editor makes
        the file, with a heading; Coffer writes nothing). For a note's name, title or
        alias written plainly (selected, or the word under the cursor): link to it."""
        uri = _field(_field(params, "textDocument", dict), "uri", str)
        span = _field(params, "range", dict)
        first = _field(_field(span, "start", dict), "line", int)
        last = _field(_field(span, "end", dict), "line", int)
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
        actions += self._mention_actions(
            note, _field(span, "start", dict), _field(span, "end", dict)
        )
        return actions

    def _mention_actions(
        self, note: Note, start: dict[str, Any], end: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """The selected text (or the word under the cursor) made a link to the note whose
        name, title or alias it is."""
        line_no = _field(start, "line", int)
        lines = note.text.split("\n")
        if note.kb is None or line_no != _field(end, "line", int) or not 0 <= line_no < len(lines):
            return []
        line = lines[line_no]
        first = text.index_of(line, _field(start, "character", int), self.encoding)
        last = text.index_of(line, _field(end, "character", int), self.encoding)
        first, last = text.mention(line, first, last)
        mention = line[first:last]
        inside = any(
            link["line"] == line_no + 1 and link["start"] < last and first < link["end"]
            for link in note.links
        )
        if not mention.strip() or inside or len(mention) > MENTION_MAX_CHARS:
            return []
        wanted = mention.casefold()
        for named in self._names(note.kb, mention):
            stem = named["relative_path"].rsplit("/", 1)[-1].rsplit(".", 1)[0]
            if wanted not in {n.casefold() for n in (stem, named["title"], *named["aliases"])}:
                continue
            link = named["link"]
            written = f"[[{link}]]" if wanted == link.casefold() else f"[[{link}|{mention}]]"
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
        uri = _field(_field(params, "textDocument", dict), "uri", str)
        line_no = _field(_field(params, "position", dict), "line", int)
        new_name = _field(params, "newName", str).strip()
        note = self.notes.get(uri)
        if note is None or note.kb is None or note.relpath is None or note.root is None:
            return None
        heading = next((h for h in text.headings(note.text) if h[0] == line_no), None)
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
        for rename in _field(params, "files", list):
            if isinstance(rename, dict):
                old, new = _field(rename, "oldUri", str), _field(rename, "newUri", str)
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
            content = opened.text if opened else _read(root / source, HEADING_READ_BYTES)
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

    def _link_at(self, params: dict[str, Any]) -> tuple[Note, dict[str, Any]] | None:
        """The open note and its link at the position asked about."""
        uri = _field(_field(params, "textDocument", dict), "uri", str)
        position = _field(params, "position", dict)
        line_no, column = _field(position, "line", int), _field(position, "character", int)
        note = self.notes.get(uri)
        if note is None or note.root is None:
            return None
        lines = note.text.split("\n")
        if not 0 <= line_no < len(lines):
            return None
        at = text.index_of(lines[line_no], column, self.encoding)
        for link in note.links:
            if link["line"] == line_no + 1 and link["start"] <= at < link["end"]:
                return note, link
        return None

    def completion(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """Notes after `[[` (best first: the daemon ranks), a note's headings after
        `[[note#`, its aliases after `[[note|`, tags with their counts after `#`."""
        uri = _field(_field(params, "textDocument", dict), "uri", str)
        position = _field(params, "position", dict)
        line_no, column = _field(position, "line", int), _field(position, "character", int)
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
        closing = "" if kind == "tag" or line.startswith("]", at) else "]]"
        if kind == "note":
            found = self._names(note.kb, typed)
            choices = [(n["link"], n["relative_path"], n["title"]) for n in found]
        elif kind == "path":
            closing = "" if line.startswith(")", at) else ")"
            found = self._names(note.kb, typed.rsplit("/", 1)[-1].removesuffix(".md"))
            folder = posixpath.dirname(note.relpath or "") or "."
            choices = [
                (
                    _destination(posixpath.relpath(n["relative_path"], folder)),
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
            "end": {"line": line_no, "character": column},
        }
        items = [
            {
                "label": label,
                "kind": COMPLETION_KINDS[kind],
                "detail": detail,
                **({"labelDetails": {"description": more}} if more else {}),
                "filterText": typed,  # ranked here already: the editor keeps each
                "sortText": f"{rank:04d}",
                "textEdit": {"range": edit_range, "newText": label + closing},
            }
            for rank, (label, detail, more) in enumerate(choices[:COMPLETIONS])
        ]
        return {"isIncomplete": True, "items": items}

    def _names(self, kb: str, typed: str) -> list[dict[str, Any]]:
        found = self._ask(lambda: self.client.get(self.client.kb(kb, "/names"), q=typed))
        return found["names"] if isinstance(found, dict) else []

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
            content = _read(note.root / target, HEADING_READ_BYTES) if named else note.text
            return [
                (name, target, "")
                for _, _, name in text.headings(content)
                if wanted in name.casefold()
            ]
        stem = target.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        listed = [n for n in self._names(note.kb, stem) if n["relative_path"] == target]
        return [(a, target, "") for n in listed for a in n["aliases"] if wanted in a.casefold()]

    def _resolve(self, note: Note, named: str) -> str | None:
        """The note a wiki link naming `named` leads to from `note` (the daemon resolves)."""
        kb, body = note.kb or "", {"relative_path": note.relpath, "text": f"[[{named}]]"}
        found = self._ask(lambda: self.client.post(self.client.kb(kb, "/inspect"), body))
        links = found["links"] if isinstance(found, dict) else []
        return links[0]["relative_path"] if links else None

    # -- what the daemon says ---------------------------------------------------------------

    def _place(self, note: Note) -> None:
        """Which KB's docs folder holds the note, and where in it."""
        path = text.path_of(note.uri)
        if path is None:
            return
        real = Path(os.path.realpath(path))
        known = self._folders is not None
        for refresh in (False, True) if known else (False,):  # a KB made since: asked again
            for folder, kb in self._kb_folders(refresh):
                relpath = text.relative(real, folder)
                if relpath is not None:
                    note.kb, note.relpath = kb, relpath
                    # the folder as the editor names it: a jump stays under that name
                    parts = len(Path(relpath).parts)
                    note.root = path.parents[parts - 1] if parts else path
                    return

    def _kb_folders(self, refresh: bool) -> list[tuple[Path, str]]:
        if self._folders is None or refresh:
            status = self._ask(lambda: self.client.get("/api/v1/status"))
            kbs = status.get("knowledge_bases", []) if isinstance(status, dict) else []
            self._folders = [
                (Path(os.path.realpath(kb["docs_path"])), kb["name"])
                for kb in kbs
                if kb.get("docs_path")
            ]
        return self._folders

    def _inspect(self, note: Note) -> None:
        if note.kb is None or note.relpath is None:
            return
        kb, relpath = note.kb, note.relpath
        body = {"relative_path": relpath, "text": note.text}
        found = self._ask(lambda: self.client.post(self.client.kb(kb, "/inspect"), body))
        if not isinstance(found, dict):
            return
        note.links = found["links"]
        note.writes = found["index_writes"]
        self.transport.notify(
            "textDocument/publishDiagnostics",
            {"uri": note.uri, "diagnostics": self._diagnostics(note, found)},
        )

    def _diagnostics(self, note: Note, found: dict[str, Any]) -> list[dict[str, Any]]:
        lines = note.text.split("\n")
        out = []
        for link in found["links"]:
            if link["relative_path"] is None:
                what = "note" if link["type"] == "wiki" else "file"
                message = f"no {what} in {note.kb} is named {link['target']!r}"
                out.append(self._diagnostic(lines, link, WARNING, message, "broken-link"))
            elif link["ambiguous"]:
                others = ", ".join(link["candidates"][1:])
                message = (
                    f"{link['target']!r} names several notes: {link['relative_path']} "
                    f"(taken), {others}"
                )
                out.append(self._diagnostic(lines, link, INFORMATION, message, "ambiguous-link"))
        for line in found["merge_markers"]:
            span = {
                "line": line,
                "start": 0,
                "end": len(lines[line - 1]) if line <= len(lines) else 0,
            }
            out.append(self._diagnostic(lines, span, ERROR, "a git merge marker", "merge-marker"))
        for copy in found["conflict_copies"]:
            message = f"a sync tool's conflict copy of this note is beside it: {copy}"
            out.append(
                self._diagnostic(
                    lines, {"line": 1, "start": 0, "end": 0}, WARNING, message, "conflict-copy"
                )
            )
        return out

    def _diagnostic(
        self, lines: list[str], span: dict[str, Any], severity: int, message: str, code: str
    ) -> dict[str, Any]:
        line_no = span["line"] - 1
        line = lines[line_no] if 0 <= line_no < len(lines) else ""
        return {
            "range": {
                "start": {
                    "line": line_no,
                    "character": text.columns(line, span["start"], self.encoding),
                },
                "end": {
                    "line": line_no,
                    "character": text.columns(line, span["end"], self.encoding),
                },
            },
            "severity": severity,
            "source": SOURCE,
            "code": code,
            "message": message,
        }

    def _target(self, note: Note, link: dict[str, Any]) -> dict[str, Any] | None:
        if link["relative_path"] is None or note.root is None:
            return None
        path = note.root / link["relative_path"]
        line = 0
        _, hash_, heading = link["target"].partition("#")
        if hash_ and heading:
            line = text.heading_line(_read(path, HEADING_READ_BYTES), heading) or 0
        start = {"line": line, "character": 0}
        return {"uri": text.uri_of(path), "range": {"start": start, "end": start}}

    def _ask(self, call: Any) -> Any:
        """What the daemon answers; None (logged, said once) when it cannot answer."""
        try:
            return call()
        except DaemonUnreachable as exc:
            if not self._unreachable_said:
                self._unreachable_said = True
                message = f"cofferd is not reachable: {exc}"
                self.transport.notify("window/showMessage", {"type": 1, "message": message})
            log(str(exc))
        except (ApiError, ProtocolError) as exc:
            log(f"cofferd refused: {exc}")
        return None


def _destination(path: str) -> str:
    """A path as a Markdown link's target: in `<>` when it holds what a bare one cannot."""
    return f"<{path}>" if any(ch in path for ch in " ()") else path


def _read(path: Path, limit: int) -> str:
    """The start of a note the editor may jump to ('' when it cannot be read)."""
    try:
        with path.open("rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def _field(params: dict[str, Any], name: str, kind: type) -> Any:
    value = params.get(name) if isinstance(params, dict) else None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RpcError(INVALID_PARAMS, f"`{name}` must be a {kind.__name__}")
    return value


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
