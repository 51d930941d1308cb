"""The web page (issue 46): a second aiohttp application, served on loopback beside the API.

Its JSON calls are the API's own routes (the same handlers, at the same paths: no second
search, no logic in the page), only those that read; its pages are HTML rendered here with
every value escaped, and a small script (web_static/) that paints results with DOM calls.
Who may use it is web_access's concern.
"""

from __future__ import annotations

import html
import mimetypes
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from aiohttp import web
from pydantic import Field

from cofferd.surfaces.core import Coffer
from cofferd.surfaces.http import api, web_graph, web_note, web_shell, web_status
from cofferd.surfaces.http.error_envelope import error_middleware
from cofferd.surfaces.http.query_params import Query, query_middleware, with_query
from cofferd.surfaces.http.server import CofferApplication
from cofferd.surfaces.http.web_access import Access, add_headers, guard_middleware

STATIC = resources.files("cofferd.surfaces.http") / "web_static"
ASSETS = (
    frozenset({"search.js", "page.css", "icon.svg", "note.js", "note.css"})
    | web_graph.ASSETS
    | web_status.ASSETS
)
MAX_BODY_BYTES = 64 * 1024  # a search or a grep
CACHED = {"Cache-Control": "private, max-age=300"}  # the page's own files, not notes
SEARCH_MODES = ("keyword", "hybrid", "vector")  # offered when a knowledge base enables them

# The API's handlers the page calls, at the API's own paths (api.routes): reads only (a
# search is a POST, but changes nothing).
READ_HANDLERS = (
    api.health,
    api.status,
    api.list_kbs,
    api.tags,
    api.search,
    api.search_all,
    api.grep,
    api.skipped,
    api.conflicts,
    api.broken_links,
    api.audit,
    api.list_invocations,
)


class PageQuery(Query):
    kb: str | None = Field(default=None, max_length=64)  # the knowledge base chosen at first
    q: str = Field(default="", max_length=2000)  # a search to run at once (a note's tag)
    tags: str = Field(default="", max_length=2000)


# -- pages ---------------------------------------------------------------------------------


async def search_page(request: web.Request, query: PageQuery) -> web.Response:
    coffer = request.app[api.COFFER]
    enabled = [kb for kb in coffer.kbs.list() if kb.enabled]
    kbs = [kb.name for kb in enabled]
    chosen = query.kb if query.kb in kbs else ("" if len(kbs) != 1 else kbs[0])
    kb_options = web_shell.options([("", "every knowledge base"), *((k, k) for k in kbs)], chosen)
    offered = {mode for kb in enabled for mode in kb.config.enabled_modes}
    modes = web_shell.options(
        [
            ("search", "search"),  # each knowledge base's own mode
            *((m, m) for m in SEARCH_MODES if m in offered),
            ("grep", "grep"),
        ],
        "search",
    )
    body = f"""
{web_shell.header(chosen)}
<main>
<form id="search" role="search" autocomplete="off">
  <input id="q" name="q" type="search" placeholder="search your notes" autofocus
    aria-label="what to look for" maxlength="2000" value="{html.escape(query.q)}">
  <select id="kb" name="kb" aria-label="knowledge base">{kb_options}</select>
  <select id="mode" name="mode" aria-label="how">{modes}</select>
  <details id="filters"{" open" if query.tags else ""}><summary>filters</summary>
    <label>folder <input id="folder" name="folder" placeholder="projects/coffer"></label>
    <label>tags <input id="tags" name="tags" placeholder="project, urgent"
      value="{html.escape(query.tags)}"></label>
    <label>formats <input id="formats" name="formats" placeholder="md, pdf"></label>
    <label>since <input id="since" name="since" type="date"></label>
    <label>until <input id="until" name="until" type="date"></label>
  </details>
</form>
<p id="said" role="status" aria-live="polite"></p>
<ol id="results"></ol>
</main>"""
    return web_shell.page("search", body, scripts=("search.js",))


async def asset(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    if name not in ASSETS:
        raise web.HTTPNotFound()
    data = (STATIC / name).read_bytes()
    kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return web.Response(body=data, content_type=kind, charset="utf-8", headers=CACHED)


# -- the application -----------------------------------------------------------------------


def create_web_app(
    coffer: Coffer, status_fn: Callable[[], Awaitable[dict[str, Any]]], access: Access
) -> web.Application:
    app = CofferApplication(
        client_max_size=MAX_BODY_BYTES,
        middlewares=[error_middleware, guard_middleware(access), query_middleware],
    )
    app[api.COFFER] = coffer
    app[api.STATUS] = status_fn
    app.on_response_prepare.append(add_headers)
    app.router.add_get("/", with_query(PageQuery)(search_page))
    app.router.add_get("/note/{kb}/{path:.+}", web_note.note_page)
    app.router.add_get("/file/{kb}/{path:.+}", web_note.file_of_note)
    app.router.add_get("/static/{name:.+}", asset)  # only ASSETS: vendor/ too
    web_graph.add_graph_routes(app, coffer)
    web_status.add_status_routes(app)
    for route in api.routes:
        if isinstance(route, web.RouteDef) and route.handler in READ_HANDLERS:
            app.router.add_route(route.method, route.path, route.handler)
    return app
