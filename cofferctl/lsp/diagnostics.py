"""Diagnostics: each open note's links placed and resolved by cofferd (`POST .../inspect`
of its unsaved text), published as broken, ambiguous, a merge marker or a conflict copy;
a link to a heading or block its note does not have, with the nearest heading suggested.

All of it runs on one thread of its own, never on the thread that reads the editor's
messages: a change only records the note's text and schedules it (`schedule`). Changes
are debounced by a generation counter (the note's `version`): an inspection is of the
latest text when it starts, and its answer is dropped when a later change came meanwhile
(that change's own inspection follows), so typing fast never queues stale inspections.
The same thread follows the daemon: every `REFRESH_S` it asks whether a KB's documents
changed (a note made, removed or renamed elsewhere) and looks at its open notes again;
that question is also the probe that tells a stalled daemon answers again (asked even
before `initialized` while the daemon is stalled).
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from coffer_kernel.link_targets import fragment_of, has_fragments, missing_fragment
from coffer_kernel.markdown_grammar import MARKDOWN_SUFFIX
from cofferctl.lsp import files, text
from cofferctl.lsp.daemon import Daemon
from cofferctl.lsp.stdio import Transport, log
from cofferctl.lsp.workspace import HeldLinks, Note, Workspace

ERROR, WARNING, INFORMATION = 1, 2, 3  # diagnostic severities
SOURCE = "coffer"
REFRESH_S = 0.5  # how often the daemon is asked whether its index changed
UNANSWERED = -1  # a count of changes no KB has: the note's inspection got no answer
FRAGMENT_NOTES = 32  # notes read a run to check the headings and blocks links name
FRAGMENT_READ_BYTES = 1024 * 1024  # of each
DEBOUNCE_S = 0.0  # a change waits this long for the next (the first after a pause: none)


class Diagnostics:
    def __init__(self, workspace: Workspace, daemon: Daemon, transport: Transport) -> None:
        self.workspace, self.daemon, self.transport = workspace, daemon, transport
        self._due: dict[str, float] = {}  # the notes to look at, and from when
        self._wake = threading.Condition()
        self._refreshing = False
        threading.Thread(target=self._run, name="lsp-diagnostics", daemon=True).start()

    def schedule(self, uri: str, delay: float = DEBOUNCE_S) -> None:
        """Look at the note at `uri` again (a later call postpones an earlier one)."""
        with self._wake:
            self._due[uri] = time.monotonic() + delay
            self._wake.notify()

    def follow_the_daemon(self) -> None:
        """Start following the daemon's index (after `initialized`; once)."""
        with self._wake:
            self._refreshing = True
            self._wake.notify()

    def _run(self) -> None:
        next_refresh = time.monotonic() + REFRESH_S
        while True:
            with self._wake:
                while True:
                    now = time.monotonic()
                    ready = [uri for uri, at in self._due.items() if at <= now]
                    refresh = now >= next_refresh
                    if refresh and not (self._refreshing or self.daemon.stalled):
                        refresh, next_refresh = False, now + REFRESH_S  # (stalled: a probe)
                    if ready or refresh:
                        break
                    until = min(min(self._due.values(), default=math.inf), next_refresh)
                    self._wake.wait(max(0.0, until - now))
                for uri in ready:
                    del self._due[uri]
            for uri in ready:
                self._guarded(self.inspect, uri)
            if refresh:
                self._guarded(self.refresh)
                next_refresh = time.monotonic() + REFRESH_S

    def _guarded(self, work: Any, *args: Any) -> None:
        try:
            work(*args)
        except Exception as exc:  # noqa: BLE001 - a bug of ours must not end the diagnostics
            log(f"diagnostics failed: {exc!r}")

    def inspect(self, uri: str) -> None:
        """Place the note, have cofferd inspect its text, publish what it found (when no
        later change came meanwhile)."""
        ws = self.workspace
        note = ws.get(uri)
        if note is None:  # closed: what was published of it is withdrawn
            self._publish(uri, [])
            return
        if not note.placed:
            ws.place(note)
        with ws.lock:
            version, body, kb, relpath = note.version, note.text, note.kb, note.relpath
            too_large = note.too_large
        found = None
        if too_large is None and kb is not None and relpath is not None:
            found = self.daemon.inspect(kb, relpath, body)
        with ws.lock:
            if ws.notes.get(uri) is not note or note.version != version:
                return  # closed, or changed since: a later inspection follows
            note.inspected = version
            if found is not None:
                ws.set_links(note, HeldLinks(found["links"]))
                note.changes = found["document_changes"]
            elif too_large is None and kb is not None:
                note.changes = UNANSWERED  # looked at again once the daemon answers
            ws.lock.notify_all()
        if too_large is not None:
            at = {"line": 1, "start": 0, "end": 0}
            self._publish(uri, [self._diagnostic([], at, INFORMATION, too_large, "too-large")])
        elif found is not None:
            self._publish(uri, self._diagnostics(note, body.split("\n"), found))

    def refresh(self) -> None:
        """Follow the daemon: a note whose KB's documents changed is looked at again; one
        in no KB is placed when a KB comes to hold it; one whose KB is gone is let go."""
        ws = self.workspace
        before = ws.folders
        ws.kb_folders(refresh=True, probe=True)
        if ws.folders is before:  # no answer
            return
        with ws.lock:
            notes = list(ws.notes.values())
        for note in notes:
            if note.kb is None:
                if ws.folders != before:
                    ws.place(note, ask_again=False)
                    self.schedule(note.uri)
            elif note.kb not in ws.kb_changes:
                with ws.lock:
                    note.kb = note.relpath = note.root = note.folder = note.changes = None
                    ws.set_links(note, HeldLinks())
                self._publish(note.uri, [])
            elif note.changes is not None and note.changes != ws.kb_changes[note.kb]:
                self.schedule(note.uri)

    def _publish(self, uri: str, diagnostics: list[dict[str, Any]]) -> None:
        self.transport.notify(
            "textDocument/publishDiagnostics", {"uri": uri, "diagnostics": diagnostics}
        )

    def _diagnostics(
        self, note: Note, lines: list[str], found: dict[str, Any]
    ) -> list[dict[str, Any]]:
        out = []
        for link in found["links"]:
            if link["relative_path"] is None and link.get("kind") != "outside":
                named = link["target"].split("#", 1)[0]
                what = "note" if link["type"] == "wiki" and not _other_file(named) else "file"
                message = f"no {what} in {note.kb} is named {link['target']!r}"
                out.append(self._diagnostic(lines, link, WARNING, message, "broken-link"))
            elif link["ambiguous"]:
                others = ", ".join(link["candidates"][1:])
                message = (
                    f"{link['target']!r} names several notes: {link['relative_path']} "
                    f"(taken), {others}"
                )
                out.append(self._diagnostic(lines, link, INFORMATION, message, "ambiguous-link"))
        out += self._missing_fragments(note, lines, found["links"])
        for line in found["merge_markers"]:
            span = {
                "line": line,
                "start": 0,
                "end": len(lines[line - 1]) if line <= len(lines) else 0,
            }
            out.append(self._diagnostic(lines, span, ERROR, "a git merge marker", "merge-marker"))
        for copy in found["conflict_copies"]:
            message = f"a sync tool's conflict copy of this note is beside it: {copy}"
            at = {"line": 1, "start": 0, "end": 0}
            out.append(self._diagnostic(lines, at, WARNING, message, "conflict-copy"))
        return out

    def _missing_fragments(
        self, note: Note, lines: list[str], links: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """A link to a heading or block its note does not have, with the nearest heading
        suggested. The notes linked to are read inside the KB (`files`), each once a run,
        at most `FRAGMENT_NOTES` of them and `FRAGMENT_READ_BYTES` of each."""
        read: dict[str, str] = {}
        out = []
        for link in links:
            relpath = link["relative_path"]
            fragment = fragment_of(link["type"], link["target"])
            if relpath is None or fragment is None or link.get("kind") == "file":
                continue
            if not has_fragments(relpath):
                continue  # a PDF's #page=3: the viewer's to read
            if relpath not in read:
                if len(read) >= FRAGMENT_NOTES:
                    continue
                read[relpath] = files.read_start(note.folder, relpath, FRAGMENT_READ_BYTES)
            content = read[relpath]
            missing = missing_fragment(content, fragment) if content else None
            if missing is not None:
                message, code = missing.message(relpath), f"missing-{missing.what}"
                out.append(self._diagnostic(lines, link, WARNING, message, code))
        return out

    def _diagnostic(
        self, lines: list[str], span: dict[str, Any], severity: int, message: str, code: str
    ) -> dict[str, Any]:
        line_no = span["line"] - 1
        line = lines[line_no] if 0 <= line_no < len(lines) else ""
        encoding = self.workspace.encoding
        return {
            "range": {
                "start": {
                    "line": line_no,
                    "character": text.columns(line, span["start"], encoding),
                },
                "end": {"line": line_no, "character": text.columns(line, span["end"], encoding)},
            },
            "severity": severity,
            "source": SOURCE,
            "code": code,
            "message": message,
        }


def _other_file(name: str) -> bool:
    """Whether a wiki link's name is a file's other than a note's (`pic.png`, not `v1.2`)."""
    suffix = name.rpartition("/")[2].rpartition(".")[2]
    return (
        "." in name.rpartition("/")[2]
        and suffix.isalnum()
        and not suffix.isdigit()
        and MARKDOWN_SUFFIX.search(name) is None
    )
