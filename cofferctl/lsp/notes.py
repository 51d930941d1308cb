"""What cofferd says of the notes open in the editor: which knowledge base each is in
(`document_changes` names their folders), its links placed and resolved (`POST .../inspect` of its
unsaved text) and published as diagnostics, and the daemon's answers, with the one place
that says when it cannot answer. A note in no knowledge base is left alone.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cofferctl.client import ApiError, Client, DaemonUnreachable, ProtocolError
from cofferctl.jsonrpc import INVALID_PARAMS, RpcError
from cofferctl.lsp import text
from cofferctl.lsp.stdio import Transport, log

ERROR, WARNING, INFORMATION = 1, 2, 3  # diagnostic severities
SOURCE = "coffer"
HEADING_READ_BYTES = 16 * 1024 * 1024  # as far as cofferd indexes a note


@dataclass
class Note:
    """A note open in the editor: its text as the editor holds it."""

    uri: str
    text: str
    kb: str | None = None
    relpath: str | None = None
    root: Path | None = None  # the KB's docs folder, as the editor's path names it
    links: list[dict[str, Any]] = field(default_factory=list)  # from the last inspection
    changes: int | None = None  # its KB's count of document changes when last inspected


class Notes:
    """The open notes, and the daemon asked about them."""

    def __init__(self, client: Client, transport: Transport) -> None:
        self.client = client
        self.transport = transport
        self.encoding = text.UTF16
        self.notes: dict[str, Note] = {}
        self.roots: list[Path] = []  # the workspace's folders
        self._folders: list[tuple[Path, str]] | None = None  # (docs folder, KB), real paths
        self._changes: dict[str, int] = {}  # each KB's count of document changes
        self._unreachable_said = False
        self._lock = threading.Lock()  # one look at a note at a time: the last is published last
        self._refreshing: threading.Thread | None = None

    def _place(self, note: Note, ask_again: bool = True) -> None:
        """Which KB's docs folder holds the note, and where in it."""
        path = text.path_of(note.uri)
        if path is None:
            return
        real = Path(os.path.realpath(path))
        again = ask_again and self._folders is not None  # a KB made since the last answer
        for refresh in (False, True) if again else (False,):
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
            found = self._ask(lambda: self.client.get("/api/v1/document_changes"))
            if not isinstance(found, dict):
                return self._folders or []
            kbs = found["knowledge_bases"]
            self._folders = [(Path(os.path.realpath(kb["docs_path"])), kb["name"]) for kb in kbs]
            self._changes = {kb["name"]: kb["document_changes"] for kb in kbs}
        return self._folders

    def refresh(self) -> None:
        """Follow the daemon: a note whose KB's documents changed is looked at again; one
        in no KB is placed when a KB comes to hold it; one whose KB is gone is let go."""
        before = self._folders
        self._kb_folders(refresh=True)
        if self._folders is before:  # no answer
            return
        with self._lock:
            for note in list(self.notes.values()):
                if note.kb is None:
                    if self._folders != before:
                        self._place(note, ask_again=False)
                        self._inspect(note)
                elif note.kb not in self._changes:
                    note.kb = note.relpath = note.root = note.changes = None
                    note.links = []
                    self._publish(note, [])
                elif note.changes is not None and note.changes != self._changes[note.kb]:
                    self._inspect(note)

    def _inspect(self, note: Note) -> None:
        if note.kb is None or note.relpath is None:
            return
        kb, relpath = note.kb, note.relpath
        body = {"relative_path": relpath, "text": note.text}
        found = self._ask(lambda: self.client.post(self.client.kb(kb, "/inspect"), body))
        if not isinstance(found, dict):
            return
        note.links = found["links"]
        note.changes = found["document_changes"]
        self._publish(note, self._diagnostics(note, found))

    def _publish(self, note: Note, diagnostics: list[dict[str, Any]]) -> None:
        self.transport.notify(
            "textDocument/publishDiagnostics", {"uri": note.uri, "diagnostics": diagnostics}
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
            line = text.heading_line(read_start(path, HEADING_READ_BYTES), heading) or 0
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

    def _link_at(self, params: dict[str, Any]) -> tuple[Note, dict[str, Any]] | None:
        """The open note and its link at the position asked about."""
        uri = param(param(params, "textDocument", dict), "uri", str)
        position = param(params, "position", dict)
        line_no, column = param(position, "line", int), param(position, "character", int)
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

    def _named(self, kb: str, typed: str) -> dict[str, Any]:
        """The daemon's notes for what was typed, best first, and the KB's link style."""
        found = self._ask(lambda: self.client.get(self.client.kb(kb, "/names"), q=typed))
        return found if isinstance(found, dict) else {"names": [], "link_style": {}}

    def _names(self, kb: str, typed: str) -> list[dict[str, Any]]:
        names: list[dict[str, Any]] = self._named(kb, typed)["names"]
        return names

    def _resolve(self, note: Note, named: str) -> str | None:
        """The note a wiki link naming `named` leads to from `note` (the daemon resolves)."""
        kb, body = note.kb or "", {"relative_path": note.relpath, "text": f"[[{named}]]"}
        found = self._ask(lambda: self.client.post(self.client.kb(kb, "/inspect"), body))
        links = found["links"] if isinstance(found, dict) else []
        return links[0]["relative_path"] if links else None


def read_start(path: Path, limit: int) -> str:
    """The start of a note the editor may jump to ('' when it cannot be read)."""
    try:
        with path.open("rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def param(params: dict[str, Any], name: str, kind: type) -> Any:
    """A client's parameter of that type, or an "invalid params" error answer."""
    value = params.get(name) if isinstance(params, dict) else None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RpcError(INVALID_PARAMS, f"`{name}` must be a {kind.__name__}")
    return value
