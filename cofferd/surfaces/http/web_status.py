"""The web page's status and activity (issue 46 §6): the knowledge bases, the passes under
way with their progress and time left, problems, the worker, converter and model
processes, a knowledge base's skipped files, conflicts and broken links, the audit trail
and the MCP invocations.

The page is HTML with no data in it; its script (web_static/status.js) polls the API's
`GET /api/v1/status` about once a second and reads the lists from the API's own routes
(`skipped`, `conflicts`, `links/broken`, `audit`, `mcp_invocations`: web_page's
READ_HANDLERS), painting every value as text.
"""

from __future__ import annotations

from aiohttp import web
from pydantic import Field

from cofferd.surfaces.http import api, web_shell
from cofferd.surfaces.http.query_params import Query, with_query

ASSETS = frozenset({"status.js"})  # in web_static/, served by web_page


class StatusPageQuery(Query):
    kb: str | None = Field(default=None, max_length=64)  # whose files are listed


def _listing(name: str, title: str) -> str:
    """A paged list the script fills: its count, its items and a button for more."""
    return (
        f'<section class="listing"><h3>{title} <span id="{name}-said" class="count"></span>'
        f'</h3><ul id="{name}" class="rows"></ul>'
        f'<button type="button" id="{name}-more" hidden>more</button></section>'
    )


async def status_page(request: web.Request, query: StatusPageQuery) -> web.Response:
    coffer = request.app[api.COFFER]
    kbs = [kb.name for kb in coffer.kbs.list()]
    kb = query.kb if query.kb in kbs else (kbs[0] if kbs else "")
    named = [(k, k) for k in kbs]
    kb_options = web_shell.options(named, kb)
    body = f"""
{web_shell.header(kb)}
<main class="status-page">
<p id="said" role="status" aria-live="polite">reading the status…</p>
<section><h2>Knowledge bases</h2>
<table id="kbs" class="grid"><thead><tr><th>knowledge base</th><th>state</th>
  <th>documents</th><th>degraded</th><th>skipped</th><th>conflicts</th><th>vectors</th></tr>
</thead><tbody></tbody></table></section>
<section><h2>Under way</h2><ul id="passes" class="rows"></ul></section>
<section><h2>Problems</h2><ul id="problems" class="rows"></ul></section>
<section><h2>Processes</h2><table id="processes" class="grid"><tbody></tbody></table></section>
<section id="files"><h2>Files of
  <select id="kb" aria-label="knowledge base">{kb_options}</select></h2>
{_listing("skipped", "Skipped")}
{_listing("conflicts", "Conflicts")}
{_listing("broken", "Broken links")}
</section>
<section><h2>Audit trail</h2>
<form id="audit-form" class="filters" autocomplete="off">
  <select id="audit-kb" name="kb" aria-label="knowledge base">
    {web_shell.options([("", "every knowledge base"), *named], "")}</select>
  <input id="audit-event" name="event" maxlength="100" placeholder="event"
    aria-label="only this event">
  <input id="audit-actor" name="actor" maxlength="100" placeholder="actor"
    aria-label="only this actor">
  <button type="submit">filter</button>
</form>
<table id="audit" class="grid"><thead><tr><th>time</th><th>actor</th><th>event</th>
  <th>knowledge base</th><th>document</th></tr></thead><tbody></tbody></table></section>
<section><h2>MCP invocations</h2>
<form id="calls-form" class="filters" autocomplete="off">
  <input id="calls-client" name="client" maxlength="100" placeholder="agent"
    aria-label="only this agent">
  <input id="calls-tool" name="tool" maxlength="100" placeholder="tool"
    aria-label="only this tool">
  <button type="submit">filter</button>
</form>
<table id="calls" class="grid"><thead><tr><th>time</th><th>agent</th><th>tool</th>
  <th>ms</th><th>outcome</th></tr></thead><tbody></tbody></table></section>
</main>"""
    return web_shell.page("status", body, scripts=("status.js",))


def add_status_routes(app: web.Application) -> None:
    app.router.add_get("/status", with_query(StatusPageQuery)(status_page))
