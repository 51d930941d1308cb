"""The notes open in the editor, as every feature reads them: each note's text as the editor
holds it, which knowledge base holds it (`document_changes` names their folders) and its
links as cofferd last placed and resolved them; the workspace's folders and the client's
position encoding. A note in no knowledge base is left alone.

The reading thread records the editor's text (`open`, `change`, `close`) and never waits;
the diagnostics thread places and inspects notes; request workers read them, and
`current` lets one wait (bounded) for the inspection of the text it is asked about.
Memory is bounded: the open notes hold at most `OPEN_TEXT_MAX_CHARS` of text together,
their links counted in (`HeldLinks`: compact); a note beyond it, or longer than cofferd
indexes one, is not followed and its diagnostic says why; a closed note is let go, and
the memory it held given back to the system.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cofferctl import api
from cofferctl.jsonrpc import INVALID_PARAMS, RpcError
from cofferctl.lsp import text
from cofferctl.lsp.daemon import TIMEOUT_S, Daemon

HEADING_READ_BYTES = 16 * 1024 * 1024  # as far as cofferd indexes a note
NOTE_MAX_CHARS = HEADING_READ_BYTES  # a longer note's links are not checked
OPEN_TEXT_MAX_CHARS = 256 * 1024 * 1024  # the text of every open note, together
LINK_CHARS = 16  # what one link held counts for, in that budget (see HeldLinks)
GIVE_BACK_CHARS = 8 * 1024 * 1024  # closed notes' text after which memory is given back


@dataclass(frozen=True, slots=True)
class HeldLink:
    """A link of an open note, as the features read it (the rest of cofferd's answer, a
    dict per link, is let go once the diagnostics are made)."""

    line: int  # from 1
    start: int  # in the line, in characters
    end: int
    type: str
    target: str
    relative_path: str | None  # where it leads; None: broken
    document: bool = True  # False: a file that is not a document (an image, a canvas)


class HeldLinks:
    """The links of an open note from its last inspection, held compactly (three numbers
    in an array, two shared strings and a byte each; cofferd's answer, a dict per link, is
    let go once the diagnostics are made): a `HeldLink` is made for each as they are read."""

    __slots__ = ("_files", "_kinds", "_paths", "_spans", "_targets")

    def __init__(self, found: Iterable[dict[str, Any]] = ()) -> None:
        intern = sys.intern  # the same few types, targets and paths, once each
        self._spans = array("q")
        self._kinds: list[str] = []
        self._targets: list[str] = []
        self._paths: list[str | None] = []
        self._files = bytearray()  # 1: the link leads to a file that is not a document
        for link in found:
            self._spans.extend((link["line"], link["start"], link["end"]))
            self._kinds.append(intern(link["type"]))
            self._targets.append(intern(link["target"]))
            path = link["relative_path"]
            self._paths.append(intern(path) if path is not None else None)
            self._files.append(link.get("kind") == "file")

    def __len__(self) -> int:
        return len(self._kinds)

    def __iter__(self) -> Iterator[HeldLink]:
        spans = self._spans
        for n, (kind, target, path) in enumerate(
            zip(self._kinds, self._targets, self._paths, strict=True)
        ):
            line, start, end = spans[3 * n], spans[3 * n + 1], spans[3 * n + 2]
            yield HeldLink(line, start, end, kind, target, path, not self._files[n])


@dataclass
class Note:
    """A note open in the editor: its text as the editor holds it."""

    uri: str
    text: str
    kb: str | None = None
    relpath: str | None = None
    root: Path | None = None  # the KB's docs folder as URIs name it (see `Workspace.where`)
    folder: Path | None = None  # the KB's docs folder as cofferd reports it: reads go there
    links: HeldLinks = field(default_factory=HeldLinks)  # from the last inspection
    changes: int | None = None  # its KB's count of document changes when last inspected
    version: int = 0  # counts the editor's changes: an inspection of an older one is dropped
    inspected: int = -1  # the version the links are of (or that could not be inspected)
    placed: bool = False  # looked for in the knowledge bases
    held: bool = True  # False: over a memory budget, its text is not kept
    too_large: str | None = None  # why its links are not checked


Where = tuple[str | None, str | None, Path | None, Path | None]
NOWHERE: Where = (None, None, None, None)


class Workspace:
    """The open notes, and where each is."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.encoding = text.UTF16
        self.roots: list[Path] = []  # the workspace's folders
        self.notes: dict[str, Note] = {}
        self.lock = threading.Condition()  # notes and their fields; notified on inspection
        self._folders: list[tuple[Path, str]] | None = None  # (docs folder, KB), real paths
        self.kb_changes: dict[str, int] = {}  # each KB's count of document changes
        self._open_chars = 0
        self._closed_chars = 0

    # -- the editor's text (the reading thread: nothing here waits on the daemon) --

    def open(self, uri: str, body: str) -> Note:
        with self.lock:
            old = self.notes.pop(uri, None)
            if old is not None:
                self._open_chars -= self._held(old)
            note = Note(uri, "")
            self.notes[uri] = note
            self._hold(note, body)
            return note

    def change(self, uri: str, body: str) -> Note | None:
        with self.lock:
            note = self.notes.get(uri)
            if note is not None:
                self._open_chars -= self._held(note)
                note.version += 1
                self._hold(note, body)
            return note

    def close(self, uri: str) -> Note | None:
        with self.lock:
            note = self.notes.pop(uri, None)
            if note is not None:
                self._open_chars -= self._held(note)
                self._closed_chars += self._held(note)
                note.text, note.links = "", HeldLinks()
                self.lock.notify_all()
        if self._closed_chars > GIVE_BACK_CHARS:
            self._closed_chars = 0
            _give_memory_back()
        return note

    def set_links(self, note: Note, links: HeldLinks) -> None:
        """The note's links from an inspection (under `lock`), counted in the budget."""
        self._open_chars += (len(links) - len(note.links)) * LINK_CHARS
        note.links = links

    def _held(self, note: Note) -> int:
        return len(note.text) + len(note.links) * LINK_CHARS

    def _hold(self, note: Note, body: str) -> None:
        """Keep `body` as the note's text when the budgets allow it."""
        note.too_large = None
        if len(body) > NOTE_MAX_CHARS:
            note.too_large = (
                f"this note is over {NOTE_MAX_CHARS // (1024 * 1024)} MiB: Coffer checks "
                "the links of shorter notes (as far as cofferd indexes one)"
            )
        elif self._open_chars + len(body) > OPEN_TEXT_MAX_CHARS:
            note.too_large = (
                f"the open notes hold over {OPEN_TEXT_MAX_CHARS // (1024 * 1024)} MiB of "
                "text: Coffer does not follow this one (close some notes)"
            )
        note.held = note.too_large is None
        note.text = body if note.held else ""
        if not note.held:
            note.links = HeldLinks()
        self._open_chars += self._held(note)

    # -- what the features read --

    def get(self, uri: str) -> Note | None:
        with self.lock:
            return self.notes.get(uri)

    def current(self, uri: str, placed_only: bool = False) -> Note | None:
        """The open note, once its current text is inspected (or only placed in its KB);
        waits at most a daemon call's bound, then gives it as it is."""
        deadline = time.monotonic() + TIMEOUT_S + 0.5
        with self.lock:
            while (note := self.notes.get(uri)) is not None and note.held:
                done = note.placed if placed_only else note.inspected >= note.version
                left = deadline - time.monotonic()
                if done or left <= 0 or self.daemon.stalled:
                    break
                self.lock.wait(left)
            return note

    # -- the knowledge bases (the diagnostics thread and request workers) --

    def place(self, note: Note, ask_again: bool = True) -> None:
        """Which KB's docs folder holds the note, and where in it."""
        where = self.where(note.uri, ask_again)
        with self.lock:
            note.kb, note.relpath, note.root, note.folder = where
            note.placed = True
            self.lock.notify_all()

    def where(self, uri: str, ask_again: bool = True) -> Where:
        """(KB, path in it, its docs folder as URIs name it, as cofferd reports it) of
        `uri`. URIs keep the editor's name of the folder (a jump stays under it) only when
        that name really is the KB's folder; a note reached through a link of the editor's
        own (a linked folder inside the KB, say) is named from the KB's real folder."""
        path = text.path_of(uri)
        if path is None:
            return NOWHERE
        real = Path(os.path.realpath(path))
        again = ask_again and self._folders is not None  # a KB made since the last answer
        for refresh in (False, True) if again else (False,):
            for folder, kb in self.kb_folders(refresh):
                relpath = text.relative(real, folder)
                if relpath is not None:
                    parts = len(relpath.split("/"))
                    named = path.parents[parts - 1]
                    root = named if os.path.realpath(named) == str(folder) else folder
                    return kb, relpath, root, folder
        return NOWHERE

    def kb_folders(self, refresh: bool, probe: bool = False) -> list[tuple[Path, str]]:
        if self._folders is None or refresh:
            found = self.daemon.ask(api.document_changes, probe=probe)
            if not isinstance(found, dict):
                return self._folders or []
            kbs = found["knowledge_bases"]
            self._folders = [(Path(os.path.realpath(kb["docs_path"])), kb["name"]) for kb in kbs]
            self.kb_changes = {kb["name"]: kb["document_changes"] for kb in kbs}
        return self._folders

    @property
    def folders(self) -> list[tuple[Path, str]] | None:
        return self._folders

    def workspace_kbs(self) -> list[str]:
        """The KBs of the open notes, and those whose folders hold or are in the workspace."""
        with self.lock:
            names = {note.kb for note in self.notes.values() if note.kb}
        roots = [Path(os.path.realpath(root)) for root in self.roots]
        for folder, kb in self.kb_folders(refresh=False):
            if any(folder.is_relative_to(r) or r.is_relative_to(folder) for r in roots):
                names.add(kb)
        return sorted(names)


def _give_memory_back() -> None:
    """Return freed memory to the system (glibc keeps the freed text of closed notes in
    its arenas otherwise)."""
    import ctypes  # only when notes are closed: not on every start
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name:
        try:
            trim = ctypes.CDLL(name).malloc_trim
        except (OSError, AttributeError):
            return
        trim(0)


def param(params: dict[str, Any], name: str, kind: type) -> Any:
    """A client's parameter of that type, or an "invalid params" error answer."""
    value = params.get(name) if isinstance(params, dict) else None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RpcError(INVALID_PARAMS, f"`{name}` must be a {kind.__name__}")
    return value


def uri_param(params: dict[str, Any]) -> str:
    """The `textDocument.uri` of a request: a URI whose path holds a NUL is refused."""
    uri: str = param(param(params, "textDocument", dict), "uri", str)
    checked_uri(uri)
    return uri


def checked_uri(uri: str) -> str:
    if "\0" in uri or "%00" in uri:
        raise RpcError(INVALID_PARAMS, "a URI holding NUL (%00) names no file")
    return uri
