"""Links and tags of a knowledge base: outgoing links, backlinks, broken links, tag counts.

Links are resolved when asked, against the documents there are then (domain.links), so a
rename or a new document is reflected at once, and a backlink survives its target's move
when the link's name still fits.
"""

from __future__ import annotations

from typing import Any

from cofferd.application.documents import Documents, place
from cofferd.application.knowledge_bases import KnowledgeBases
from cofferd.domain.links import DocumentIndexOfPaths, key_of
from cofferd.domain.ports import DocsTree, GraphStore


class Graph:
    def __init__(
        self, kbs: KnowledgeBases, documents: Documents, store: GraphStore, tree: DocsTree
    ) -> None:
        self.kbs = kbs
        self.documents = documents
        self.store = store
        self.tree = tree

    async def _paths(self, kb: str) -> tuple[DocumentIndexOfPaths, dict[str, str]]:
        ids = await self.store.document_paths(kb)
        return DocumentIndexOfPaths(ids), ids

    async def links(self, kb: str, ref: str) -> dict[str, Any]:
        """What a document links to (resolved, or None when broken) and what links to it."""
        doc = await self.documents.find(kb, ref)
        index, ids = await self._paths(kb)
        outgoing = []
        for _, _, link in await self.store.links_from(kb, doc.id):
            found = index.resolve(link)
            outgoing.append(
                {
                    "target": link.target,
                    "type": link.type,
                    "line": link.line,
                    "document_id": ids[found.path] if found.path else None,
                    "relative_path": found.path,
                    "ambiguous": found.ambiguous,
                }
            )
        backlinks = [
            {"document_id": source_id, **place(self.tree, kb, source_path), "line": link.line,
             "target": link.target}
            for source_id, source_path, link in await self.store.links_named(
                kb, key_of(doc.path).rsplit("/", 1)[-1]
            )
            if index.resolve(link).path == doc.path
        ]  # fmt: skip
        return {"document_id": doc.id, "outgoing": outgoing, "backlinks": backlinks}

    async def broken(self, kb: str) -> list[dict[str, Any]]:
        """Every link that leads to no document."""
        self.kbs.get(kb)
        index, _ = await self._paths(kb)
        return [
            {"document_id": source_id, **place(self.tree, kb, source_path), "line": link.line,
             "target": link.target, "type": link.type}
            for source_id, source_path, link in await self.store.all_links(kb)
            if index.resolve(link).path is None
        ]  # fmt: skip

    async def tags(self, kb: str) -> list[dict[str, Any]]:
        self.kbs.get(kb)
        return [{"tag": tag, "count": count} for tag, count in await self.store.tag_counts(kb)]
