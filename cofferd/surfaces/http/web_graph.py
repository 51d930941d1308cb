"""The web page's graph (issue 46): a knowledge base's notes and links, or a note's
neighbourhood, drawn by sigma.js over graphology in WebGL (web_static/graph.js, the
libraries in web_static/vendor/), laid out by ForceAtlas2 in a worker.

The page is HTML with no data in it; its script asks `GET /api/v1/knowledge_bases/{name}/
graph` (application.search.note_graph) for the nodes and edges, behind the web page's
guard like every route of it.
"""

from __future__ import annotations

import html

from aiohttp import web
from pydantic import Field

from coffer_kernel.locations import InvalidTreePath, check_relpath, normalize_relpath
from cofferd.application.search.note_graph import DEPTH_MAX, MAX_NODES, NoteGraph
from cofferd.domain.errors import PathRefused
from cofferd.surfaces.core import Coffer
from cofferd.surfaces.http import api, web_shell
from cofferd.surfaces.http.json_shapes import json_response
from cofferd.surfaces.http.query_params import Query, QueryInt, with_query

VENDOR = ("sigma.min.js", "graphology.umd.min.js", "forceatlas2-iterate.js")
# in web_static/, served by web_page; the libraries in its vendor/ folder
ASSETS = frozenset({"graph.js", "graph-layout.js", *(f"vendor/{name}" for name in VENDOR)})
NOTE_GRAPH = web.AppKey("note_graph", NoteGraph)


class GraphQuery(Query):
    note: str | None = Field(default=None, min_length=1, max_length=600)  # its neighbourhood
    depth: QueryInt = Field(default=1, ge=1, le=DEPTH_MAX)
    limit: QueryInt = Field(default=MAX_NODES, ge=1, le=MAX_NODES)  # the most linked first


class GraphPageQuery(Query):
    note: str | None = Field(default=None, max_length=600)
    depth: QueryInt = Field(default=1, ge=1, le=DEPTH_MAX)
    kb: str | None = Field(default=None, max_length=64)


async def graph_json(request: web.Request, query: GraphQuery) -> web.Response:
    graphs, kb = request.app[NOTE_GRAPH], request.match_info["name"]
    if query.note is None:
        return json_response(await graphs.whole(kb, query.limit))
    relpath = _relpath(query.note)
    return json_response(await graphs.around(kb, relpath, query.depth, query.limit))


def _relpath(given: str) -> str:
    try:
        return normalize_relpath(check_relpath(given))
    except InvalidTreePath as exc:
        raise PathRefused(f"not a path inside the knowledge base: {exc}") from None


async def graph_page(request: web.Request, query: GraphPageQuery) -> web.Response:
    coffer = request.app[api.COFFER]
    kbs = [kb.name for kb in coffer.kbs.list() if kb.enabled]
    kb = query.kb if query.kb in kbs else (kbs[0] if kbs else "")
    kb_options = web_shell.options([(k, k) for k in kbs], kb)
    depths = web_shell.options(
        [(str(d), str(d)) for d in range(1, DEPTH_MAX + 1)], str(query.depth)
    )
    note = html.escape(query.note or "")
    body = f"""
{web_shell.header(kb)}
<form id="graph-form" class="graph-bar" autocomplete="off">
  <select id="kb" name="kb" aria-label="knowledge base">{kb_options}</select>
  <input id="note" name="note" value="{note}" placeholder="a note's path: its neighbourhood"
    aria-label="a note's path" maxlength="600">
  <label>depth <select id="depth" name="depth">{depths}</select></label>
  <button type="submit">show</button>
  <label>colour by <select id="colour"><option value="folder">folder</option>
    <option value="tag">tag</option></select></label>
  <select id="folder" aria-label="folder"><option value="">every folder</option></select>
  <select id="tag" aria-label="tag"><option value="">every tag</option></select>
  <label><input id="orphans" type="checkbox"> hide orphans</label>
  <label><input id="attachments" type="checkbox"> hide attachments</label>
</form>
<p id="said" role="status" aria-live="polite">reading the graph…</p>
<div id="graph" data-kb="{html.escape(kb)}"></div>
<ul id="legend" class="legend"></ul>"""
    scripts = ("vendor/graphology.umd.min.js", "vendor/sigma.min.js", "graph.js")
    return web_shell.page("graph", body, scripts=scripts, body_class="graph-page")


def add_graph_routes(app: web.Application, coffer: Coffer) -> None:
    graph = coffer.graph
    app[NOTE_GRAPH] = NoteGraph(graph.kbs, graph.store, graph.other_files)
    app.router.add_get("/graph", with_query(GraphPageQuery)(graph_page))
    app.router.add_get("/api/v1/knowledge_bases/{name}/graph", with_query(GraphQuery)(graph_json))
