"""Links and tags of a knowledge base: outgoing links, backlinks, broken links, tag counts,
and what an editor shows of a note being written (its links resolved, merge markers).

Links are resolved when asked, against the documents there are then (domain.links), so a
rename or a new document is reflected at once, and a backlink survives its target's move
when the link's name still fits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from cofferd.application.completion import NameIndex
from cofferd.application.documents import Documents, place
from cofferd.application.knowledge_bases import KnowledgeBases
from cofferd.domain.conflicts import merge_marker_lines
from cofferd.domain.links import DocumentIndexOfPaths, key_of, links_of
from cofferd.domain.ports import DocsTree, GraphStore, LinkRow

T = TypeVar("T")


class Graph:
    def __init__(
        self, kbs: KnowledgeBases, documents: Documents, store: GraphStore, tree: DocsTree
    ) -> None:
        self.kbs = kbs
        self.documents = documents
        self.store = store
        self.tree = tree
        self._keys = _PerWrite(store.writes, self._read_keys)
        self._names = _PerWrite(store.writes, self._read_names)

    async def links(self, kb: str, ref: str) -> dict[str, Any]:
        """What a document links to (resolved, or None when broken) and what links to it."""
        doc = await self.documents.find(kb, ref)
        ids = await self.store.document_paths(kb)
        outgoing = await self.store.links_from(kb, doc.id)
        incoming = await self.store.links_named(kb, key_of(doc.path).rsplit("/", 1)[-1])
        # resolving is CPU work over every path of the KB: off the serving loop
        return await asyncio.to_thread(self._links, kb, doc.id, doc.path, ids, outgoing, incoming)

    def _links(
        self,
        kb: str,
        doc_id: str,
        doc_path: str,
        ids: dict[str, str],
        outgoing: list[LinkRow],
        incoming: list[LinkRow],
    ) -> dict[str, Any]:
        index = DocumentIndexOfPaths(ids)
        links = []
        for _, _, link in outgoing:
            found = index.resolve(link)
            links.append(
                {
                    "target": link.target,
                    "type": link.type,
                    "line": link.line,
                    "document_id": ids[found.path] if found.path else None,
                    "relative_path": found.path,
                    "ambiguous": found.ambiguous,
                }
            )
        back = [row for row in incoming if index.resolve(row[2]).path == doc_path]
        where = self.tree.places(kb, [path for _, path, _ in back])
        backlinks = [
            {"document_id": source_id, **place(where, source_path), "line": link.line,
             "target": link.target}
            for source_id, source_path, link in back
        ]  # fmt: skip
        return {"document_id": doc_id, "outgoing": links, "backlinks": backlinks}

    async def broken(self, kb: str) -> list[dict[str, Any]]:
        """Every link that leads to no document."""
        self.kbs.get(kb)
        ids = await self.store.document_paths(kb)
        rows = await self.store.all_links(kb)
        return await asyncio.to_thread(self._broken, kb, ids, rows)

    def _broken(self, kb: str, ids: dict[str, str], rows: list[LinkRow]) -> list[dict[str, Any]]:
        index = DocumentIndexOfPaths(ids)
        broken = [row for row in rows if index.resolve(row[2]).path is None]
        where = self.tree.places(kb, [path for _, path, _ in broken])
        return [
            {"document_id": source_id, **place(where, source_path), "line": link.line,
             "target": link.target, "type": link.type}
            for source_id, source_path, link in broken
        ]  # fmt: skip

    async def tags(self, kb: str) -> list[dict[str, Any]]:
        self.kbs.get(kb)
        return [{"tag": tag, "count": count} for tag, count in await self.store.tag_counts(kb)]

    async def inspect(self, kb: str, relpath: str, text: str) -> dict[str, Any]:
        """What an editor shows of the note at `relpath` as it is being written (`text`,
        not saved yet): each link with where it is and what it leads to (nothing: broken;
        several documents: ambiguous, with them all), git's merge markers, and the sync
        tools' conflict copies of it."""
        self.kbs.get(kb)
        writes = self.store.writes()  # before the read: a later write makes this one stale
        index = await self._keys.get(kb)
        copies = sorted(
            path
            for path, copy in self.documents.reindexer.conflicts(kb).items()
            if copy.original == relpath
        )
        found = await asyncio.to_thread(_inspect, index, relpath, text)
        return {**found, "conflict_copies": copies, "index_writes": writes}

    async def complete(self, kb: str, typed: str, limit: int) -> list[dict[str, Any]]:
        """The notes an editor offers for what was typed after `[[`, best first."""
        self.kbs.get(kb)
        index = await self._names.get(kb)
        found = await asyncio.to_thread(index.complete, typed, limit)
        return [
            {"relative_path": n.path, "title": n.title, "aliases": list(n.aliases), "link": n.link}
            for n in found
        ]

    async def _read_keys(self, kb: str) -> DocumentIndexOfPaths:
        paths = await self.store.document_paths(kb)
        return await asyncio.to_thread(DocumentIndexOfPaths, paths)

    async def _read_names(self, kb: str) -> NameIndex:
        rows = await self.store.names(kb)
        return await asyncio.to_thread(NameIndex, rows, self._names.kept(kb))


class _PerWrite(Generic[T]):
    """A value read for each KB, kept until the index is next written to."""

    def __init__(self, writes: Callable[[], int], read: Callable[[str], Awaitable[T]]) -> None:
        self._writes = writes
        self._read = read
        self._kept: dict[str, tuple[int, T]] = {}

    def kept(self, kb: str) -> T | None:
        """The value last read for `kb`, whether or not it is out of date."""
        kept = self._kept.get(kb)
        return kept[1] if kept else None

    async def get(self, kb: str) -> T:
        writes = self._writes()
        kept = self._kept.get(kb)
        if kept is not None and kept[0] == writes:
            return kept[1]
        value = await self._read(kb)
        self._kept[kb] = (writes, value)
        return value


def _inspect(index: DocumentIndexOfPaths, relpath: str, text: str) -> dict[str, Any]:
    links = []
    for link in links_of(text, relpath):
        found = index.resolve(link)
        links.append(
            {
                "type": link.type,
                "target": link.target,
                "line": link.line,
                "start": link.start,
                "end": link.end,
                "relative_path": found.path,
                "ambiguous": found.ambiguous,
                "candidates": list(found.candidates),
            }
        )
    return {"links": links, "merge_markers": merge_marker_lines(text)}
