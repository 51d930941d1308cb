"""Renames, as edits the editor applies (Coffer writes no file of the user's): a heading
renamed with every link to it (`[[note#heading]]`, `[x](note.md#heading)`), and before the
editor renames notes, every link to each rewritten to its new place.

A rewritten link always names what it meant: each is read back by the grammar before it
is offered (a Markdown link's path and heading percent-encoded as needed). Any name the
file system allows is written: a wiki link to a note renamed to a name no wiki link can
hold (`|`, `#`, `^`, brackets, a line break) becomes a Markdown link with the name
percent-encoded. A folder renamed renames every file under it. A heading that cannot be
written (not one line; a wiki link and `|`, brackets) is refused with an error saying why."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from coffer_kernel.link_targets import (
    DocumentIndexOfPaths,
    github_slugs,
    key_of,
    markdown_key,
    outside_path,
    wiki_key,
)
from coffer_kernel.markdown_grammar import (
    MARKDOWN_SUFFIX,
    Definitions,
    headings,
    markdown_links,
    prose_lines,
    wiki_links,
)
from coffer_kernel.markdown_grammar import heading as parsed_heading
from cofferctl import api
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

Rewrite = Callable[[str, dict[str, Any]], "str | None"]
REQUEST_FAILED = -32803  # LSP: the request was well formed, and cannot be done
RIVALS_MAX = 50  # notes named as a renamed note will be, whose links are looked at


class Renames:
    def __init__(self, workspace: Workspace, daemon: Daemon) -> None:
        self.workspace, self.daemon = workspace, daemon

    def rename(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """Rename the heading under the cursor: the heading, every link to it from other
        notes, and the note's own `[[#heading]]` links."""
        uri = uri_param(params)
        line_no = param(param(params, "position", dict), "line", int)
        new_name = param(params, "newName", str).strip()
        note = self.workspace.current(uri, placed_only=True)
        if note is None or note.kb is None or note.relpath is None or note.root is None:
            return None
        listed = list(headings(note.text))
        place = next((n for n, h in enumerate(listed) if h[0] == line_no), None)
        heading = listed[place] if place is not None else None
        if heading is None or place is None or not new_name:
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
        names = [name for _, _, name in listed]
        # GitHub's anchors before and after: a repeated name's `-1` may move to another
        anchors = {
            old: new
            for old, new in zip(
                github_slugs(names),
                github_slugs([*names[:place], new_name, *names[place + 1 :]]),
                strict=True,
            )
            if old != new
        }
        line = note.text.split("\n")[line_no]
        at = line.rindex(heading[2])
        here = self._edit(line, line_no, at, at + len(heading[2]), new_name)
        changes = {uri: [here]}
        lines = note.text.split("\n")
        for number, start, end, kind, target in same_note_links(note.text):
            written = lines[number][start:end]
            link = {"type": kind, "target": target}
            try:
                rewritten = text.reheaded(written, link, heading[2], new_name, anchors)
            except text.Unwritable as exc:
                raise RpcError(REQUEST_FAILED, f"line {number + 1}: {exc}") from None
            if rewritten is not None and rewritten != written:
                changes[uri].append(self._edit(lines[number], number, start, end, rewritten))
        for source, edits in self._links_to(
            note, lambda written, link: text.reheaded(written, link, heading[2], new_name, anchors)
        ).items():
            changes.setdefault(source, []).extend(edits)
        return {"changes": changes}

    def will_rename_files(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """Before the editor renames notes: every link that would lead elsewhere once they
        are renamed, in every note (the renamed ones too), rewritten to lead where it led
        (the editor applies the edit; Coffer writes nothing)."""
        moves: dict[str, dict[str, str]] = {}  # per KB: old path -> new path (or folder)
        places: dict[str, tuple[Path, Path]] = {}  # per KB: (root as URIs name it, folder)
        for rename in param(params, "files", list):
            if isinstance(rename, dict):
                old_kb, old, root, folder = self.workspace.where(
                    checked_uri(param(rename, "oldUri", str))
                )
                new_kb, new, _, _ = self.workspace.where(checked_uri(param(rename, "newUri", str)))
                if old_kb and old_kb == new_kb and old and new and root and folder:
                    moves.setdefault(old_kb, {})[old.rstrip("/")] = new.rstrip("/")
                    places[old_kb] = (root, folder)
        changes: dict[str, list[dict[str, Any]]] = {}
        for kb, moved in moves.items():
            for uri, edits in self._relinked(kb, *places[kb], moved).items():
                changes.setdefault(uri, []).extend(edits)
        return {"changes": changes} if changes else None

    def _relinked(
        self, kb: str, root: Path, folder: Path, renamed: dict[str, str]
    ) -> dict[str, list[dict[str, Any]]]:
        """The edits that keep every link of the KB leading where it leads once the notes
        and folders in `renamed` (old path -> new path) are renamed: those to a renamed
        note, those of a renamed note (a Markdown link's path is from its folder), and those
        the new names would take over (`[[Settings]]` when a note becomes the root's
        `Settings.md`). A renamed folder renames every file under it."""
        answer = self.daemon.ask(lambda c: api.paths(c, kb))
        if not isinstance(answer, dict):
            return {}
        paths: list[str] = answer["paths"]
        others: list[str] = answer.get("files", [])  # images...: links lead to them too
        moved = files_moved(renamed, [*paths, *others])
        if not moved:
            return {}
        after = DocumentIndexOfPaths(
            (moved.get(p, p) for p in paths), (moved.get(f, f) for f in others)
        )
        notes = set(paths)
        sources = {old for old in moved if old in notes}
        new_names = {key_of(new).rsplit("/", 1)[-1] for new in moved.values()}
        rivals = [
            p
            for p in [*paths, *others]
            if p not in moved and key_of(p).rsplit("/", 1)[-1] in new_names
        ]
        for linked in [*moved, *rivals[:RIVALS_MAX]]:
            sources |= self._backlinks(kb, linked)
        edits: dict[str, list[dict[str, Any]]] = {}
        for source in sorted(sources):
            where = moved.get(source, source)  # the linking note's place once renamed
            leads = self._leads_to(after, source, where, moved)
            for uri, more in self._rewritten(kb, root, folder, source, leads).items():
                edits.setdefault(uri, []).extend(more)
        return edits

    def _leads_to(
        self, after: DocumentIndexOfPaths, source: str, where: str, moved: dict[str, str]
    ) -> Rewrite:
        """How a link of the note at `source`, which will be at `where`, is rewritten: when
        once renamed it would lead elsewhere than its note (at its new place), to the
        shortest form that leads there; a path out of the KB's folder, to the same place
        from the new folder."""

        def rewrite(written: str, link: dict[str, Any]) -> str | None:
            if link["kind"] == "outside":
                out = outside_path(link["target"], posixpath.dirname(source))
                if out is None or posixpath.dirname(where) == posixpath.dirname(source):
                    return None
                return text.relinked(written, link, where, out)
            meant = moved.get(link["relative_path"], link["relative_path"])
            if link["type"] == "wiki":
                key = wiki_key(link["target"])
            else:
                key = markdown_key(link["target"], posixpath.dirname(where))
            if after.resolve_written(link["type"], key, link["target"], where).path == meant:
                return None  # it leads there as it is (a path leading out: rewritten)
            name = None
            if link["type"] == "wiki":
                name = shortest_name(after, meant, link["target"], where)
            return text.relinked(written, link, where, meant, wiki_name=name)

        return rewrite

    def _backlinks(self, kb: str, relpath: str) -> set[str]:
        """The notes linking to the file at `relpath` (a note, an image: any file)."""
        found = self.daemon.ask(lambda c: api.backlinks(c, kb, relpath))
        return {b["relative_path"] for b in found["backlinks"]} if found else set()

    def _links_to(self, note: Note, rewrite: Rewrite) -> dict[str, list[dict[str, Any]]]:
        """Edits of every link to `note` in the notes that link to it, each link rewritten
        by `rewrite(written, link)` (None: left as it is)."""
        if note.kb is None or note.relpath is None or note.root is None or note.folder is None:
            return {}
        relpath = note.relpath

        def only_to_note(written: str, link: dict[str, Any]) -> str | None:
            return rewrite(written, link) if link["relative_path"] == relpath else None

        edits: dict[str, list[dict[str, Any]]] = {}
        for source in sorted(self._backlinks(note.kb, relpath)):
            found = self._rewritten(note.kb, note.root, note.folder, source, only_to_note)
            for uri, more in found.items():
                edits.setdefault(uri, []).extend(more)
        return edits

    def _rewritten(
        self, kb: str, root: Path, folder: Path, source: str, rewrite: Rewrite
    ) -> dict[str, list[dict[str, Any]]]:
        """The edits of the links of the note at `source` (as the editor holds it, else as
        read inside the KB) that `rewrite(written, link)` rewrites (None: left as it is)."""
        uri = text.uri_of(root / source)
        opened = self.workspace.get(uri)
        content = (
            opened.text
            if opened is not None and opened.held
            else files.read_start(folder, source, HEADING_READ_BYTES)
        )
        seen = self.daemon.inspect(kb, source, content)
        lines = content.split("\n")
        edits = []
        angles: list[bool] = []  # the note's Markdown style, read once if needed
        for link in seen["links"] if seen else []:
            if link["relative_path"] is None and link["kind"] != "outside":
                continue
            if link["type"] == "wiki":
                angles = angles or [text.angle_brackets(content)]
                link = {**link, "note_angles": angles[0]}
            line = lines[link["line"] - 1]
            written = line[link["start"] : link["end"]]
            try:
                rewritten = rewrite(written, link)
            except text.Unwritable as exc:
                raise RpcError(REQUEST_FAILED, f"{source}, line {link['line']}: {exc}") from None
            if rewritten is None or rewritten == written:
                continue
            edits.append(self._edit(line, link["line"] - 1, link["start"], link["end"], rewritten))
        return {uri: edits} if edits else {}

    def _edit(self, line: str, line_no: int, start: int, end: int, new: str) -> dict[str, Any]:
        encoding = self.workspace.encoding
        return {
            "range": {
                "start": {"line": line_no, "character": text.columns(line, start, encoding)},
                "end": {"line": line_no, "character": text.columns(line, end, encoding)},
            },
            "newText": new,
        }


def files_moved(renamed: dict[str, str], paths: list[str]) -> dict[str, str]:
    """Where each file of `paths` goes once the files and folders in `renamed` (old path ->
    new path) are renamed, for those that move: a file renamed itself, or one under a
    renamed folder (the deepest renamed folder holding it says where)."""
    moved: dict[str, str] = {}
    for path in paths:
        if path in renamed:
            moved[path] = renamed[path]
            continue
        parts = path.split("/")
        for n in range(len(parts) - 1, 0, -1):
            old = "/".join(parts[:n])
            if old in renamed:
                moved[path] = "/".join([renamed[old], *parts[n:]])
                break
    return moved


def shortest_name(after: DocumentIndexOfPaths, meant: str, target: str, source: str) -> str:
    """The shortest trailing part of `meant`'s path that a wiki link in the note at `source`
    names it by alone once the notes are renamed (its whole path when every shorter one
    leads elsewhere or is ambiguous; one in `source`'s folder is not ambiguous, it is the
    one taken), with its suffix when the link wrote one (`[[Plan.md]]`). In a GitHub wiki a
    link that named its page by title (`[[Page Name]]`) names the new one so too."""
    name = target.split("#", 1)[0].strip()
    suffixed = MARKDOWN_SUFFIX.search(name) is not None
    parts = meant.split("/")
    found_form = meant
    for n in range(len(parts) - 1, 0, -1):
        form = "/".join(parts[n:])
        found = after.resolve_key("wiki", key_of(form), source)
        if found.path == meant and (
            not found.ambiguous or posixpath.dirname(meant) == posixpath.dirname(source)
        ):
            found_form = form
            break
    written = found_form if suffixed else MARKDOWN_SUFFIX.sub("", found_form)
    if after.github_wiki and " " in name and "/" not in written and not suffixed:
        title = written.replace("-", " ")
        if after.resolve_key("wiki", key_of(title), source).path == meant:
            return title
    return written


def same_note_links(body: str) -> Iterator[tuple[int, int, int, str, str]]:
    """(line, start, end, type, target) of each link of `body` to a heading of the note
    itself (`[[#Budget]]`, `[x](#budget)`, `[b]: #budget`), read by the grammar (none in
    code)."""
    definitions = Definitions()
    for number, line in prose_lines(body):
        definition = definitions.read(number, line)
        if definition is not None:
            target = line[definition.target_start : definition.target_end].strip("<>").strip()
            if target.startswith("#"):
                yield number, definition.start, definition.end, "definition", target
            continue
        if "#" not in line:
            continue
        for start, end, target in wiki_links(line):
            if target.startswith("#"):
                yield number, start, end, "wiki", target
        for start, end, written in markdown_links(line):
            target = written.strip("<>").strip()
            if target.startswith("#"):
                yield number, start, end, "markdown", target
