"""Links and tags of a knowledge base: outgoing links, backlinks, broken links, tag counts,
and what an editor shows of a note being written (its links resolved, merge markers).

Links are resolved when asked, against the files there are then (domain.links): the
documents, and the other files the Reindexer's scans list (images, canvases: `other_files`,
at most `OTHER_FILES_LISTED` a KB), so a rename or a new file is reflected at once, and a
backlink survives its target's move when the link's name still fits. A broken link is one
that leads to no file, or to a note without the heading or block it names (`links
--broken` reads each note linked so, once, one at a time, at most `FRAGMENT_NOTES` of them
a call).

A KB's count of changes (what an editor polls) counts its documents' changes and its
other files' together.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Generic, TypeVar

from coffer_kernel.bounds import OFFSET_MAX
from coffer_kernel.link_targets import (
    DocumentIndexOfPaths,
    MissingFragment,
    Resolution,
    anchor_of,
    fragment_of,
    has_fragments,
    key_of,
    missing_fragment,
    names_leading_to,
)
from cofferd.application.documents.documents import Documents, place
from cofferd.application.indexing.knowledge_bases import KnowledgeBases
from cofferd.application.reading.note_names import LinkStyle, NameIndex
from cofferd.domain.conflicts import merge_marker_lines
from cofferd.domain.errors import DocumentNotFound
from cofferd.domain.index_records import LinkRow
from cofferd.domain.links import as_read, links_of
from cofferd.domain.ports import DocsTree, GraphStore

T = TypeVar("T")
log = logging.getLogger(__name__)
LINK_STYLE_SAMPLE = 2000  # links read to learn how a KB writes them
FRAGMENT_NOTES = 5000  # notes read by one `broken` to check the headings and blocks named
ALL = OFFSET_MAX  # a list's whole, when the daemon asks
ANCHOR_NOTES = 200  # notes read by one `anchors` (the links of a note shown)


class Graph:
    def __init__(
        self, kbs: KnowledgeBases, documents: Documents, store: GraphStore, tree: DocsTree
    ) -> None:
        self.kbs = kbs
        self.documents = documents
        self.store = store
        self.tree = tree
        self.other_files = documents.reindexer.other_files
        live = lambda: {kb.name for kb in kbs.list()}  # noqa: E731
        self._keys = _PerChange(self.changes, self._read_keys, live)
        self._names = _PerChange(store.document_changes, self._read_names, live)

    async def changes(self) -> dict[str, int]:
        """Each KB's count of changes of its documents' names and of its other files."""
        counts = await self.store.document_changes()
        for kb in self.kbs.list():
            counts[kb.name] = counts.get(kb.name, 0) + self.other_files.of(kb.name).changes
        return counts

    def _index(self, kb: str, paths: Iterable[str]) -> DocumentIndexOfPaths:
        """What links of `kb` resolve against: its documents at `paths`, its other files."""
        return DocumentIndexOfPaths(paths, self.other_files.of(kb).paths)

    async def links(self, kb: str, ref: str, limit: int = ALL, offset: int = 0) -> dict[str, Any]:
        """What a document links to (resolved, or None when broken: all of them, a
        document's links are within its budget) and a page of what links to it (`total`
        counts them all)."""
        doc = await self.documents.find(kb, ref)
        ids = await self.store.document_paths(kb)
        outgoing = await self.store.links_from(kb, doc.id)
        incoming = await self.store.links_named(kb, _names_of(doc.path))
        # resolving is CPU work over every path of the KB: off the serving loop
        found = await asyncio.to_thread(self._links, kb, doc.id, doc.path, ids, outgoing, incoming)
        back = found.pop("backlinks")
        where = await asyncio.to_thread(_places_of, self.tree, kb, back[offset : offset + limit])
        return {**found, "backlinks": where, "total": len(back), "limit": limit, "offset": offset}

    def _links(
        self,
        kb: str,
        doc_id: str,
        doc_path: str,
        ids: dict[str, str],
        outgoing: list[LinkRow],
        incoming: list[LinkRow],
    ) -> dict[str, Any]:
        index = self._index(kb, ids)
        links = []
        for _, _, written in outgoing:
            link = as_read(written, index)
            found = index.resolve(link, doc_path)
            links.append(
                {
                    "target": link.target,
                    "type": link.type,
                    "line": link.line,
                    "document_id": ids.get(found.path) if found.path else None,
                    "relative_path": found.path,
                    "kind": _kind(found),
                    "ambiguous": found.ambiguous,
                }
            )
        backlinks = _backlinks(index, doc_path, incoming)
        return {"document_id": doc_id, "outgoing": links, "backlinks": backlinks}

    async def backlinks(
        self, kb: str, relpath: str, limit: int = ALL, offset: int = 0
    ) -> dict[str, Any]:
        """A page of the links to the file at `relpath`, a document or any other (an
        image): what an editor rewrites when it renames the file; `total` counts them all.
        Only links whose name fits are read (by the index); only the page's are placed."""
        self.kbs.get(kb)
        ids = await self.store.document_paths(kb)
        held = self.other_files.of(kb).paths
        if relpath not in ids and relpath not in held:
            raise DocumentNotFound(kb, relpath)
        incoming = await self.store.links_named(kb, _names_of(relpath))

        def run() -> tuple[list[dict[str, Any]], int]:
            back = _backlinks(self._index(kb, ids), relpath, incoming)
            return _places_of(self.tree, kb, back[offset : offset + limit]), len(back)

        kind = "document" if relpath in ids else "file"
        found, total = await asyncio.to_thread(run)
        return {"relative_path": relpath, "kind": kind, "backlinks": found,
                "total": total, "limit": limit, "offset": offset}  # fmt: skip

    async def broken(self, kb: str, limit: int = ALL, offset: int = 0) -> dict[str, Any]:
        """A page of the links that lead to no file, or to a note without the heading or
        block it names (with the nearest heading suggested); `total` counts them all. Every
        link is resolved (what a link leads to depends on every file there is), only the
        page's are placed."""
        self.kbs.get(kb)
        ids = await self.store.document_paths(kb)
        rows = await self.store.all_links(kb)
        return await asyncio.to_thread(self._broken, kb, ids, rows, limit, offset)

    def _broken(
        self, kb: str, ids: dict[str, str], rows: list[LinkRow], limit: int, offset: int
    ) -> dict[str, Any]:
        index = self._index(kb, ids)
        rows = _as_read(index, rows)
        problems: dict[int, dict[str, Any]] = {}  # by the row's place in `rows`
        to_check: dict[str, list[tuple[int, str]]] = {}  # note -> (row, fragment)
        for n, (_, source, link) in enumerate(rows):
            found = index.resolve(link, source)
            if found.outside:
                continue  # out of the KB's folder: listed as "outside", not broken
            if found.path is None:
                what = "note" if link.type == "wiki" else "file"
                problems[n] = {"problem": "missing-file", "message": f"no {what} is named so"}
                continue
            fragment = fragment_of(link.type, link.target)
            if fragment is not None and found.document and has_fragments(found.path):
                to_check.setdefault(found.path, []).append((n, fragment))
        unchecked, read = 0, 0
        for path, checks in to_check.items():  # each note read once, then let go
            if read >= FRAGMENT_NOTES:
                unchecked += len(checks)
                continue
            read += 1
            content = self.tree.read(kb, path)
            text = content.data.decode("utf-8", "replace") if content else ""
            for n, fragment in checks if text else ():
                missing = missing_fragment(text, fragment)
                if missing is not None:
                    problems[n] = {
                        "problem": f"missing-{missing.what}",
                        "message": missing.message(path),
                        "leads_to": path,
                        "suggestion": missing.nearest,
                    }
        broken = [(*rows[n], problems[n]) for n in sorted(problems)][offset : offset + limit]
        where = self.tree.places(kb, [path for _, path, _, _ in broken])
        links = [
            {"document_id": source_id, **place(where, source_path), "line": link.line,
             "target": link.target, "type": link.type, **problem}
            for source_id, source_path, link, problem in broken
        ]  # fmt: skip
        return {
            "links": links,
            "total": len(problems),
            "limit": limit,
            "offset": offset,
            "fragments_unchecked": unchecked,
            "files_not_held": self.other_files.of(kb).left_out,
        }

    async def anchors(
        self, kb: str, wanted: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], str | MissingFragment]:
        """For each (note, fragment) a link names, the anchor of its heading or block in the
        note, or what is missing there; each note read once, at most `ANCHOR_NOTES` of them
        (the others' are left out of the answer)."""
        self.kbs.get(kb)
        by_note: dict[str, list[str]] = {}
        for path, fragment in wanted:
            if has_fragments(path):
                by_note.setdefault(path, []).append(fragment)

        def run() -> dict[tuple[str, str], str | MissingFragment]:
            found: dict[tuple[str, str], str | MissingFragment] = {}
            for path, fragments in list(by_note.items())[:ANCHOR_NOTES]:
                content = self.tree.read(kb, path)
                text = content.data.decode("utf-8", "replace") if content else ""
                for fragment in fragments:
                    anchor = anchor_of(text, fragment)
                    if anchor is not None:
                        found[path, fragment] = anchor
                    elif (missing := missing_fragment(text, fragment)) is not None:
                        found[path, fragment] = missing
            return found

        return await asyncio.to_thread(run)

    async def tags(self, kb: str, limit: int = ALL, offset: int = 0) -> dict[str, Any]:
        """A page of the tags, most used first, and how many there are."""
        self.kbs.get(kb)
        counts, total = await self.store.tag_counts(kb, limit, offset)
        tags = [{"tag": tag, "count": count} for tag, count in counts]
        return {"tags": tags, "total": total, "limit": limit, "offset": offset}

    async def paths(self, kb: str, limit: int = ALL, offset: int = 0) -> dict[str, Any]:
        """A page of the documents' paths then of the other files' (in order), what links
        resolve against (an editor computes what the links a rename writes will lead to);
        `total` counts both; and the KB's count of changes (a client paging through sees
        whether they changed meanwhile)."""
        self.kbs.get(kb)
        changes = (await self.changes()).get(kb, 0)
        paths, documents = await self.store.path_page(kb, limit, offset)
        held = self.other_files.of(kb).paths
        first = max(0, offset - documents)
        files = sorted(held)[first : first + limit - len(paths)] if len(paths) < limit else []
        return {"paths": paths, "files": files, "document_changes": changes,
                "total": documents + len(held), "limit": limit, "offset": offset}  # fmt: skip

    async def inspect(self, kb: str, relpath: str, text: str) -> dict[str, Any]:
        """What an editor shows of the note at `relpath` as it is being written (`text`,
        not saved yet): each link with where it is and what it leads to (nothing: broken;
        several documents: ambiguous, with them all), git's merge markers, and the sync
        tools' conflict copies of it."""
        self.kbs.get(kb)
        changes, index = await self._keys.get(kb)
        copies = sorted(
            path
            for path, copy in self.documents.reindexer.conflicts(kb).items()
            if copy.original == relpath
        )
        found = await asyncio.to_thread(_inspect, index, relpath, text)
        return {**found, "conflict_copies": copies, "document_changes": changes}

    async def complete(self, kb: str, typed: str, limit: int) -> dict[str, Any]:
        """The notes an editor offers for what was typed after `[[`, best first, and how
        the KB writes links. Right after the KB's notes changed, they come from the names
        read before (`fresh` false) while the new ones are read: ask again soon."""
        self.kbs.get(kb)
        index, fresh = await self._names.get_soon(kb)
        found = await asyncio.to_thread(index.complete, typed, limit)
        names = [
            {"relative_path": n.path, "title": n.title, "aliases": list(n.aliases), "link": n.link}
            for n in found
        ]
        return {"names": names, "link_style": index.style.as_dict(), "fresh": fresh}

    async def _read_keys(self, kb: str) -> DocumentIndexOfPaths:
        paths = await self.store.document_paths(kb)
        return await asyncio.to_thread(self._index, kb, paths)

    async def _read_names(self, kb: str) -> NameIndex:
        rows = await self.store.names(kb)
        style = LinkStyle.learn(await self.store.links_sample(kb, LINK_STYLE_SAMPLE))
        return await asyncio.to_thread(NameIndex, rows, style, self._names.kept(kb))


class _PerChange(Generic[T]):
    """A value read for each KB, kept while the KB's documents do not change (their
    count of changes, read before the value, stays the same). Values of KBs gone are
    dropped."""

    def __init__(
        self,
        changes: Callable[[], Awaitable[dict[str, int]]],
        read: Callable[[str], Awaitable[T]],
        live: Callable[[], set[str]],
    ) -> None:
        self._changes = changes
        self._read = read
        self._live = live
        self._kept: dict[str, tuple[int, T]] = {}
        self._reading: dict[str, asyncio.Task[Any]] = {}

    def kept(self, kb: str) -> T | None:
        """The value last read for `kb`, whether or not it is out of date."""
        kept = self._kept.get(kb)
        return kept[1] if kept else None

    async def get(self, kb: str) -> tuple[int, T]:
        """The KB's count of changes, and the value as it is at that count or later."""
        changes = (await self._changes()).get(kb, 0)
        kept = self._kept.get(kb)
        if kept is not None and kept[0] == changes:
            return kept
        return await self._read_at(kb, changes)

    async def get_soon(self, kb: str) -> tuple[T, bool]:
        """The value, and whether it is current; one out of date is answered at once
        while the current one is read in the background."""
        changes = (await self._changes()).get(kb, 0)
        kept = self._kept.get(kb)
        if kept is None:
            return (await self._read_at(kb, changes))[1], True
        if kept[0] != changes and kb not in self._reading:
            reading = asyncio.create_task(self._read_at(kb, changes), name=f"read-{kb}")
            self._reading[kb] = reading
            reading.add_done_callback(lambda task: self._read_done(kb, task))
        return kept[1], kept[0] == changes

    async def _read_at(self, kb: str, changes: int) -> tuple[int, T]:
        value = (changes, await self._read(kb))
        live = self._live()
        self._kept = {k: v for k, v in self._kept.items() if k in live}
        if kb in live:
            self._kept[kb] = value
        return value

    def _read_done(self, kb: str, task: asyncio.Task[Any]) -> None:
        self._reading.pop(kb, None)
        if not task.cancelled() and task.exception() is not None:
            log.warning("reading %s again failed: %s", kb, task.exception())


def _names_of(relpath: str) -> tuple[str, ...]:
    """The names of the links that may lead to the file at `relpath`."""
    return names_leading_to(key_of(relpath).rsplit("/", 1)[-1])


def _backlinks(index: DocumentIndexOfPaths, relpath: str, incoming: list[LinkRow]) -> list[LinkRow]:
    """The links among `incoming` that lead to the file at `relpath`."""
    return [
        row for row in _as_read(index, incoming) if index.resolve(row[2], row[1]).path == relpath
    ]


def _as_read(index: DocumentIndexOfPaths, rows: list[LinkRow]) -> list[LinkRow]:
    """The links of `rows` as the KB of `index` reads them (`links.as_read`)."""
    if not index.github_wiki:
        return rows
    return [(source_id, source, as_read(link, index)) for source_id, source, link in rows]


def _places_of(tree: DocsTree, kb: str, back: list[LinkRow]) -> list[dict[str, Any]]:
    where = tree.places(kb, [path for _, path, _ in back])
    return [
        {"document_id": source_id, **place(where, source_path), "line": link.line,
         "target": link.target}
        for source_id, source_path, link in back
    ]  # fmt: skip


def _inspect(index: DocumentIndexOfPaths, relpath: str, text: str) -> dict[str, Any]:
    links = []
    for written in links_of(text, relpath):
        link = as_read(written, index)
        found = index.resolve(link, relpath)
        links.append(
            {
                "type": link.type,
                "target": link.target,
                "line": link.line,
                "start": link.start,
                "end": link.end,
                "relative_path": found.path,
                "kind": _kind(found),
                "ambiguous": found.ambiguous,
                "candidates": list(found.candidates),
                "text_first": link.text_first,
            }
        )
    return {"links": links, "merge_markers": merge_marker_lines(text)}


def _kind(found: Resolution) -> str | None:
    """What a link leads to: a "document", another "file", "outside" the KB's folder, or
    nothing (None: broken)."""
    if found.path is None:
        return "outside" if found.outside else None
    return "document" if found.document else "file"
