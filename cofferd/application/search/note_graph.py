"""The graph of a knowledge base as a picture draws it: its notes and the files they link to
as nodes, each link resolved as `links` resolves it as an edge (issue 46).

The storage layer reads every document and every link in one query each; the links are
resolved here against the KB's files (off the serving loop), once for all. A KB of more
than `MAX_NODES` nodes is shown by its most linked part, and the answer says so
(`truncated`, `shown`, `total`); a note's neighbourhood is the nodes at most `depth` links
away in either direction, found breadth first and bounded the same way.
"""

from __future__ import annotations

import asyncio
import posixpath
from array import array
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from coffer_kernel.link_targets import DocumentIndexOfPaths
from cofferd.application.indexing.knowledge_bases import KnowledgeBases
from cofferd.application.indexing.other_files import OtherFiles
from cofferd.domain.errors import DocumentNotFound
from cofferd.domain.formats import format_of
from cofferd.domain.index_records import GraphRows
from cofferd.domain.ports import GraphStore

MAX_NODES = 10_000  # what a browser draws and lays out at ease (docs/benchmarks.md)
MAX_EDGES = 100_000
DEPTH_MAX = 3
_PAIR = 1 << 32  # an edge held as one int: more nodes than this no KB holds
_FOLDER = -2  # not known by the link alone: its source's folder decides


@dataclass
class _Node:
    id: str | None  # the document's id; None for a file that is not a document
    path: str
    title: str
    tags: list[str]
    document: bool
    degree: int = 0


@dataclass
class _Whole:
    nodes: list[_Node]
    encoded: array[int]  # each edge once, as source * _PAIR + target (positions in `nodes`)

    @property
    def edges(self) -> Iterator[tuple[int, int]]:
        """(source, target) of each edge."""
        return (divmod(edge, _PAIR) for edge in self.encoded)


class NoteGraph:
    def __init__(self, kbs: KnowledgeBases, store: GraphStore, other_files: OtherFiles) -> None:
        self.kbs = kbs
        self.store = store
        self.other_files = other_files

    async def whole(self, kb: str, max_nodes: int = MAX_NODES) -> dict[str, Any]:
        """The KB's graph, or its `max_nodes` most linked nodes."""
        graph = await self._read(kb)

        def run() -> dict[str, Any]:
            ranked = sorted(
                range(len(graph.nodes)), key=lambda n: (-graph.nodes[n].degree, graph.nodes[n].path)
            )
            return _answer(kb, graph, ranked[:max_nodes], len(ranked))

        return await asyncio.to_thread(run)

    async def around(
        self, kb: str, relpath: str, depth: int, max_nodes: int = MAX_NODES
    ) -> dict[str, Any]:
        """The nodes at most `depth` links from the note at `relpath`, nearest first."""
        graph = await self._read(kb)

        def run() -> dict[str, Any]:
            start = next((n for n, node in enumerate(graph.nodes) if node.path == relpath), None)
            if start is None:
                raise DocumentNotFound(kb, relpath)
            found = _breadth_first(graph, start, min(depth, DEPTH_MAX))
            answer = _answer(kb, graph, found[:max_nodes], len(found))
            return {**answer, "note": relpath, "depth": depth}

        return await asyncio.to_thread(run)

    async def _read(self, kb: str) -> _Whole:
        self.kbs.get(kb)
        files = self.other_files.of(kb).paths
        return await self.store.graph(kb, lambda rows: _resolved(rows, files))


def _resolved(rows: GraphRows, files: frozenset[str]) -> _Whole:
    nodes = [
        _Node(doc_id, path, title, tags.split("\n") if tags else [], True)
        for doc_id, path, title, tags in rows.documents
    ]
    at = {node.path: n for n, node in enumerate(nodes)}
    by_id = {node.id: n for n, node in enumerate(nodes)}
    index = DocumentIndexOfPaths(at, files)

    def node_of(path: str | None) -> int:
        """The node of the file at `path` (-1: none), made for a file that is not a
        document once something links to it."""
        if path is None:
            return -1
        to = at.get(path)
        if to is None:
            to = at[path] = len(nodes)
            nodes.append(_Node(None, path, posixpath.basename(path), [], False))
        return to

    edges: set[int] = set()  # source * _PAIR + target
    # A wiki link's node depends on its source's folder only when several files fit it
    # (its own folder's is taken): the others are kept by its target alone (its key is
    # the target's), the rest by (type, key, target, folder).
    alone: dict[str, int] = {}
    leads: dict[tuple[str, str | None, str, str], int] = {}
    github = index.github_wiki
    for source_id, kind, key, target, alias in rows.links:
        origin = by_id.get(source_id)
        if origin is None:  # written since the documents were read
            continue
        if github and alias is not None:
            key, target, _ = index.read(kind, key, target, alias)
        to = alone.get(target, _FOLDER) if kind == "wiki" else _FOLDER
        if to == _FOLDER:
            source = nodes[origin].path
            asked = (kind, key, target, source.rpartition("/")[0])
            to = leads.get(asked, _FOLDER)
            if to == _FOLDER:
                found = index.resolve_written(kind, key, target, source)
                to = leads[asked] = node_of(found.path)
                if kind == "wiki" and not found.ambiguous and alias is None:
                    alone[target] = to
        if to >= 0 and to != origin:
            edges.add(origin * _PAIR + to)
    encoded = array("q", edges)  # 8 bytes an edge: a KB may hold millions
    del edges
    whole = _Whole(nodes, encoded)
    for s, t in whole.edges:
        nodes[s].degree += 1
        nodes[t].degree += 1
    return whole


def _breadth_first(graph: _Whole, start: int, depth: int) -> list[int]:
    """The nodes at most `depth` edges from `start`, nearest first, then most linked."""
    near: list[list[int]] = [[] for _ in graph.nodes]
    for s, t in graph.edges:
        near[s].append(t)
        near[t].append(s)
    distance = {start: 0}
    queue = deque([start])
    while queue:
        n = queue.popleft()
        if distance[n] == depth:
            continue
        for m in sorted(near[n], key=lambda m: (-graph.nodes[m].degree, graph.nodes[m].path)):
            if m not in distance:
                distance[m] = distance[n] + 1
                queue.append(m)
    return list(distance)


def _answer(kb: str, graph: _Whole, chosen: list[int], total: int) -> dict[str, Any]:
    """The `chosen` nodes (in that order) of `total` that might be, and the edges between
    them."""
    position = {n: p for p, n in enumerate(chosen)}
    edges = [(position[s], position[t]) for s, t in graph.edges if s in position and t in position]
    nodes = [
        {
            "id": node.id,
            "path": node.path,
            "title": node.title or posixpath.basename(node.path),
            "folder": posixpath.dirname(node.path),
            "tags": node.tags,
            "degree": node.degree,
            "is_attachment": not node.document or format_of(node.path) != "md",
            "is_orphan": node.degree == 0,
        }
        for node in (graph.nodes[n] for n in chosen)
    ]
    return {
        "kb": kb,
        "nodes": nodes,
        "edges": edges[:MAX_EDGES],
        "truncated": len(chosen) < total,
        "shown": len(chosen),
        "total": total,
        "edges_shown": min(len(edges), MAX_EDGES),
        "edges_total": len(edges),
    }
