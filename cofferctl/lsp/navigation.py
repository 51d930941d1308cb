"""Navigation: go to the note or file (and heading or block: `fragments`) a link leads to,
hover a link to see that section or block (else the note's first lines; of any other file,
an image or a PDF, what it is and its size), and the notes that link to this one
(references: its backlinks).
What is shown of another file is read through `files`: inside its KB's root only."""

from __future__ import annotations

import mimetypes
import posixpath
from typing import Any

from coffer_kernel.link_targets import fragment_of, has_fragments, span_of
from cofferctl import api
from cofferctl.lsp import files, text
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
        (else its first lines); on a link to another file, what it is and its size."""
        found = self.link_at(params)
        relpath = found[1].relative_path if found else None
        if found is None or relpath is None:
            return None
        note, link = found
        if not has_fragments(relpath):
            return {"contents": {"kind": "markdown", "value": about_file(note, relpath)}}
        fragment = fragment_of(link.type, link.target)
        limit = HEADING_READ_BYTES if fragment else HOVER_READ_BYTES
        content = files.read_start(note.folder, relpath, limit)
        span = span_of(content, fragment) if fragment else None
        part = text.section_lines(content, span) if span else text.first_lines(content)
        named = f"#{fragment}" if span else ""
        shown = f"**{relpath}**{named}\n\n{part}"
        return {"contents": {"kind": "markdown", "value": shown}}

    def references(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The notes that link to this one (backlinks), each at the line of its link."""
        note = self.workspace.current(uri_param(params), placed_only=True)
        if note is None or note.kb is None or note.relpath is None or note.root is None:
            return []
        kb, relpath, root = note.kb, note.relpath, note.root
        found = self.daemon.ask(lambda c: api.document_links(c, kb, relpath))
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
    fragment = fragment_of(link.type, link.target)
    if fragment and has_fragments(link.relative_path):
        content = files.read_start(note.folder, link.relative_path, HEADING_READ_BYTES)
        span = span_of(content, fragment)
        line = span[0] if span else 0
    start = {"line": line, "character": 0}
    uri = text.uri_of(note.root / link.relative_path)
    return {"uri": uri, "range": {"start": start, "end": start}}


KINDS = {".canvas": "Obsidian canvas", ".pdf": "PDF document", ".base": "Obsidian base"}
IMAGE_SHOWN_BYTES = 20 * 1024 * 1024  # an image larger is described, not shown


def about_file(note: Note, relpath: str) -> str:
    """What a hover says of a file that is not a note: its path, what it is, its size (and
    the image itself, for an editor that shows one)."""
    st = files.file_stat(note.folder, relpath)
    kind = kind_of(relpath)
    size = f"{human_size(st.st_size)}" if st else "not readable"
    said = f"**{relpath}**\n\n{kind}, {size}"
    if st and kind.endswith(" image") and note.root and st.st_size <= IMAGE_SHOWN_BYTES:
        said += f"\n\n![{posixpath.basename(relpath)}]({text.uri_of(note.root / relpath)})"
    return said


def kind_of(relpath: str) -> str:
    """What a file is, by its extension: "PNG image", "PDF document", "MP3 audio"."""
    ext = posixpath.splitext(relpath)[1].lower()
    if ext in KINDS:
        return KINDS[ext]
    mime = mimetypes.guess_type("x" + ext, strict=False)[0] if ext else None
    major = mime.split("/", 1)[0] if mime else ""
    if major in ("image", "audio", "video", "text"):
        return f"{ext[1:].upper()} {major}"
    return f"{ext[1:].upper()} file" if ext else "a file"


def human_size(size: int) -> str:
    """`512 bytes`, `12.3 KiB`, `4.0 MiB`."""
    if size < 1024:
        return f"{size} bytes"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"
