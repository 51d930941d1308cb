"""The REST API (seed wire contract; docs/openapi.yaml) over aiohttp.

Long on purpose: one route table, so that every endpoint and its handler can be checked against the
contract in one place; each handler only parses, calls one service and shapes the answer
(bodies in json_shapes, queries in query_params, errors in error_envelope, uploads in uploads).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web
from pydantic import BaseModel, ValidationError

from coffer_kernel import __version__
from coffer_kernel.locations import InvalidTreePath, check_relpath, normalize_relpath
from cofferd.domain.config import effective_settings
from cofferd.domain.errors import ValidationFailed
from cofferd.domain.models import KB_KIND
from cofferd.domain.query_syntax import MAX_PHRASE_TOKENS, MAX_QUERY_TERMS
from cofferd.domain.validation import validation_failed
from cofferd.surfaces.core import Coffer
from cofferd.surfaces.http.error_envelope import error_middleware, error_response
from cofferd.surfaces.http.json_shapes import (
    AddDocument,
    AttachKB,
    CreateKB,
    EditDocument,
    GrepRequest,
    InspectNote,
    Invocation,
    OpenWeb,
    SearchAllRequest,
    SearchRequest,
    UpdateKB,
    document_json,
    ingest_json,
    json_response,
    kb_json,
    passage_json,
    reindex_json,
    resource_json,
    trashed_json,
)
from cofferd.surfaces.http.peercred import peer_uid
from cofferd.surfaces.http.query_params import (
    AddQuery,
    AuditQuery,
    BacklinksQuery,
    DocumentQuery,
    DocumentsQuery,
    InvocationsQuery,
    NamesQuery,
    PageQuery,
    PathsQuery,
    ResourcesQuery,
    query_middleware,
    with_query,
)
from cofferd.surfaces.http.server import CofferApplication
from cofferd.surfaces.http.uploads import receive_upload

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 1024 * 1024
ACTOR_HEADER = "X-Coffer-Actor"

COFFER: web.AppKey[Coffer] = web.AppKey("coffer", Coffer)
STATUS: web.AppKey[Callable[[], Awaitable[dict[str, Any]]]] = web.AppKey("status")


class WebSwitch(Protocol):
    """The web page's listener (web_listener), as the API turns it on and off."""

    async def open(self, port: int | None = None, kb: str | None = None) -> dict[str, Any]: ...

    async def close(self) -> bool: ...


WEB: web.AppKey[WebSwitch] = web.AppKey("web", WebSwitch)


# -- helpers -----------------------------------------------------------------------------


def _actor(request: web.Request) -> str:
    return request.headers.get(ACTOR_HEADER, "user")[:100] or "user"


async def _json(request: web.Request, model: type[BaseModel]) -> Any:
    if not request.can_read_body:
        raise ValidationFailed("a JSON request body is required")
    raw = await request.read()
    try:
        data = json.loads(raw)
    except RecursionError:
        raise ValidationFailed("the request body nests too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationFailed(f"request body is not valid JSON: {exc}") from None
    if _ESCAPED_SURROGATE.search(raw) and _has_lone_surrogate(data):
        # "\ud800" is valid JSON, but no file or database can hold a lone surrogate
        raise ValidationFailed("the request holds text with an unpaired surrogate")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_failed("invalid request body", exc, model) from None


# A lone surrogate can only come from a `\uD800`-`\uDFFF` escape (raw bytes that encode
# one are not UTF-8, and json refuses them): most bodies are cleared by this one scan.
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def _has_lone_surrogate(data: Any) -> bool:
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(value, dict):
            stack += value.keys()
            stack += value.values()
        elif isinstance(value, list):
            stack += value
    return False


def _kind(request: web.Request) -> str:
    kind = request.match_info["kind"]
    if kind != KB_KIND:
        raise ValidationFailed(f"unknown resource kind {kind!r}", field="kind")
    return kind


# -- handlers ----------------------------------------------------------------------------

routes = web.RouteTableDef()


@routes.get("/api/v1/health")
async def health(request: web.Request) -> web.Response:
    return json_response({"status": "ok", "version": __version__})


@routes.get("/api/v1/document_changes")
async def document_changes(request: web.Request) -> web.Response:
    """Each KB's docs folder and its count of document changes: what an editor polls to
    place the notes it opens and to know when to look at them again (its other files, the
    images links lead to, counted in)."""
    coffer = request.app[COFFER]
    changes = await coffer.graph.changes()
    kbs = [
        {
            "name": kb.name,
            "docs_path": str(coffer.locations.docs_folder(kb.name)),
            "document_changes": changes.get(kb.name, 0),
        }
        for kb in coffer.kbs.list()
    ]
    return json_response({"knowledge_bases": kbs})


@routes.get("/api/v1/status")
async def status(request: web.Request) -> web.Response:
    return json_response(await request.app[STATUS]())


@routes.get("/api/v1/knowledge_bases")
async def list_kbs(request: web.Request) -> web.Response:
    kbs = request.app[COFFER].kbs.list()
    return json_response({"knowledge_bases": [kb_json(k) for k in kbs]})


@routes.post("/api/v1/knowledge_bases")
async def create_kb(request: web.Request) -> web.Response:
    body = await _json(request, CreateKB)
    coffer = request.app[COFFER]
    folder = Path(body.path) if body.path is not None else None
    kb = await coffer.kbs.create(body.name, body.config, folder=folder, actor=_actor(request))
    return json_response(kb_json(kb), status=201)


@routes.post("/api/v1/knowledge_bases/{name}/attach")
async def attach_kb(request: web.Request) -> web.Response:
    body = await _json(request, AttachKB)
    coffer, name = request.app[COFFER], request.match_info["name"]
    folder = Path(body.path) if body.path is not None else None
    kb = await coffer.kbs.attach(name, folder, actor=_actor(request))
    coffer.indexing.request_full(name)
    return json_response(kb_json(kb))


@routes.get("/api/v1/knowledge_bases/{name}")
async def get_kb(request: web.Request) -> web.Response:
    coffer = request.app[COFFER]
    kb = await coffer.embeddings.choice.follow(coffer.kbs.get(request.match_info["name"]))
    return json_response(
        {
            **kb_json(kb),
            "effective": effective_settings(kb.config),
            "model_choice": coffer.embeddings.choice.describe(kb),
        }
    )


@routes.patch("/api/v1/knowledge_bases/{name}")
async def update_kb(request: web.Request) -> web.Response:
    body = await _json(request, UpdateKB)
    coffer, name = request.app[COFFER], request.match_info["name"]
    update = await coffer.kbs.update_config(name, body.config, actor=_actor(request))
    kb = await coffer.embeddings.choice.follow(update.kb, now=True)  # its text may choose
    coffer.embeddings.wake()  # a new model or provider is followed at once
    return json_response(
        {
            **kb_json(kb),
            "reindex": reindex_json(update.reindex),
            "rechunked": update.rechunked,
            "reindexing": update.reindexing,
            "warnings": update.warnings,
            "notices": update.notices,
            "model_languages": await coffer.embeddings.coverage(kb),
            "model_choice": coffer.embeddings.choice.describe(kb),
        }
    )


async def _delete_kb(request: web.Request, name: str) -> web.Response:
    coffer = request.app[COFFER]
    coffer.kbs.get(name)
    coffer.indexing.forget(name)
    kb = await coffer.kbs.delete(name, actor=_actor(request))
    await coffer.conversions.forget(name)  # once no pass can convert for it any more
    return json_response({"deleted": kb_json(kb)})


@routes.delete("/api/v1/knowledge_bases/{name}")
async def delete_kb(request: web.Request) -> web.Response:
    return await _delete_kb(request, request.match_info["name"])


@routes.get("/api/v1/knowledge_bases/{name}/documents")
@with_query(DocumentsQuery)
async def list_documents(request: web.Request, query: DocumentsQuery) -> web.Response:
    views, total = await request.app[COFFER].documents.list(
        request.match_info["name"], q=query.q, limit=query.limit, offset=query.offset
    )
    return json_response(
        {
            "documents": [document_json(v) for v in views],
            "total": total,
            "limit": query.limit,
            "offset": query.offset,
        }
    )


@routes.get("/api/v1/knowledge_bases/{name}/documents/{doc_id}")
@with_query(DocumentQuery)
async def get_document(request: web.Request, query: DocumentQuery) -> web.Response:
    view = await request.app[COFFER].documents.get(
        request.match_info["name"], request.match_info["doc_id"], file_text=query.file_text
    )
    return json_response(document_json(view))


@routes.get("/api/v1/knowledge_bases/{name}/documents/{doc_id}/links")
@with_query(PageQuery)
async def document_links(request: web.Request, query: PageQuery) -> web.Response:
    graph = request.app[COFFER].graph
    found = await graph.links(
        request.match_info["name"], request.match_info["doc_id"], query.limit, query.offset
    )
    return json_response(found)


@routes.get("/api/v1/knowledge_bases/{name}/links/broken")
@with_query(PageQuery)
async def broken_links(request: web.Request, query: PageQuery) -> web.Response:
    graph = request.app[COFFER].graph
    return json_response(await graph.broken(request.match_info["name"], query.limit, query.offset))


@routes.post("/api/v1/knowledge_bases/{name}/inspect")
async def inspect_note(request: web.Request) -> web.Response:
    body = await _json(request, InspectNote)
    try:
        relpath = normalize_relpath(check_relpath(body.relative_path))
    except InvalidTreePath as exc:
        raise ValidationFailed(str(exc), field="relative_path") from exc
    graph = request.app[COFFER].graph
    return json_response(await graph.inspect(request.match_info["name"], relpath, body.text))


@routes.get("/api/v1/knowledge_bases/{name}/backlinks")
@with_query(BacklinksQuery)
async def file_backlinks(request: web.Request, query: BacklinksQuery) -> web.Response:
    graph = request.app[COFFER].graph
    found = await graph.backlinks(request.match_info["name"], query.file, query.limit, query.offset)
    return json_response(found)


@routes.get("/api/v1/knowledge_bases/{name}/names")
@with_query(NamesQuery)
async def complete_names(request: web.Request, query: NamesQuery) -> web.Response:
    graph = request.app[COFFER].graph
    return json_response(await graph.complete(request.match_info["name"], query.q, query.limit))


@routes.get("/api/v1/knowledge_bases/{name}/conflicts")
@with_query(PageQuery)
async def conflicts(request: web.Request, query: PageQuery) -> web.Response:
    found, total = await request.app[COFFER].documents.conflicts(
        request.match_info["name"], limit=query.limit, offset=query.offset
    )
    return json_response(
        {"conflicts": found, "total": total, "limit": query.limit, "offset": query.offset}
    )


@routes.get("/api/v1/knowledge_bases/{name}/tags")
@with_query(PageQuery)
async def tags(request: web.Request, query: PageQuery) -> web.Response:
    graph = request.app[COFFER].graph
    return json_response(await graph.tags(request.match_info["name"], query.limit, query.offset))


@routes.get("/api/v1/knowledge_bases/{name}/paths")
@with_query(PathsQuery)
async def document_paths(request: web.Request, query: PathsQuery) -> web.Response:
    graph = request.app[COFFER].graph
    return json_response(await graph.paths(request.match_info["name"], query.limit, query.offset))


@routes.post("/api/v1/knowledge_bases/{name}/documents")
@with_query(AddQuery)
async def add_document(request: web.Request, query: AddQuery) -> web.Response:
    coffer = request.app[COFFER]
    name, actor = request.match_info["name"], _actor(request)
    if request.content_type == "multipart/form-data":
        result = await receive_upload(request, coffer, name, actor, replace=query.replace)
    else:
        body = await _json(request, AddDocument)
        if (body.source_path is None) == (body.content is None):
            raise ValidationFailed("give exactly one of source_path or content")
        if body.content is not None:
            result = await coffer.ingest.add_markdown(
                name, body.content, body.title, actor=actor, folder=body.folder
            )
        else:
            assert body.source_path is not None
            result = await coffer.ingest.add_path(
                name,
                body.source_path,
                replace=body.replace or query.replace,
                track=body.track_source,
                actor=actor,
                folder=body.folder,
            )
    return json_response(ingest_json(result), status=201 if result.status == "added" else 200)


@routes.post("/api/v1/knowledge_bases/{name}/documents/{doc_id}/reconvert")
async def reconvert(request: web.Request) -> web.Response:
    result = await request.app[COFFER].originals.reconvert(
        request.match_info["name"], request.match_info["doc_id"], actor=_actor(request)
    )
    return json_response(ingest_json(result))


@routes.post("/api/v1/knowledge_bases/{name}/documents/{doc_id}/update-source")
async def update_source(request: web.Request) -> web.Response:
    result = await request.app[COFFER].originals.update_source(
        request.match_info["name"], request.match_info["doc_id"], actor=_actor(request)
    )
    return json_response(ingest_json(result))


@routes.post("/api/v1/knowledge_bases/{name}/check-sources")
async def check_sources(request: web.Request) -> web.Response:
    report = await request.app[COFFER].originals.check_sources(
        request.match_info["name"], actor=_actor(request)
    )
    return json_response(report.as_dict())


@routes.put("/api/v1/knowledge_bases/{name}/documents/{doc_id}")
async def edit_document(request: web.Request) -> web.Response:
    body = await _json(request, EditDocument)
    view = await request.app[COFFER].documents.edit(
        request.match_info["name"],
        request.match_info["doc_id"],
        body.content,
        actor=_actor(request),
        expected_sha256=body.expected_sha256,
    )
    return json_response(document_json(view))


@routes.delete("/api/v1/knowledge_bases/{name}/documents/{doc_id}")
async def delete_document(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    doc, trashed = await request.app[COFFER].trash.delete(
        name, request.match_info["doc_id"], actor=_actor(request)
    )
    return json_response(
        {
            "deleted": {"id": doc.id, "relative_path": doc.path},
            "trash": {
                "id": trashed.entry.id,
                "expires_at": trashed.expires_at,
                "restore": f"cofferctl restore {shlex.quote(name)} {trashed.entry.id}",
            },
        }
    )


@routes.get("/api/v1/knowledge_bases/{name}/trash")
@with_query(PageQuery)
async def list_trash(request: web.Request, query: PageQuery) -> web.Response:
    trash = request.app[COFFER].trash
    items, total = await trash.list(request.match_info["name"], query.limit, query.offset)
    return json_response(
        {"retention_days": trash.retention_days, "items": [trashed_json(t) for t in items],
         "total": total, "limit": query.limit, "offset": query.offset}
    )  # fmt: skip


@routes.post("/api/v1/knowledge_bases/{name}/trash/{trash_id}/restore")
async def restore_from_trash(request: web.Request) -> web.Response:
    view = await request.app[COFFER].trash.restore(
        request.match_info["name"], request.match_info["trash_id"], actor=_actor(request)
    )
    return json_response({"restored": document_json(view)})


@routes.post("/api/v1/knowledge_bases/{name}/reindex")
async def reindex(request: web.Request) -> web.Response:
    coffer, name = request.app[COFFER], request.match_info["name"]
    result = await coffer.kbs.reindex(name, actor=_actor(request))
    await coffer.embeddings.retry_now(name)
    await coffer.conversions.prune(name)
    return json_response(result.as_dict())


@routes.get("/api/v1/knowledge_bases/{name}/skipped")
@with_query(PageQuery)
async def skipped(request: web.Request, query: PageQuery) -> web.Response:
    coffer = request.app[COFFER]
    kb = coffer.kbs.get(request.match_info["name"])
    items, total = await coffer.reindexer.skipped(kb.name, query.limit, query.offset)
    return json_response(
        {"items": items, "total": total, "limit": query.limit, "offset": query.offset}
    )


QUERY_CUT = (
    f"the query holds more than {MAX_QUERY_TERMS} terms (or a phrase of more than "
    f"{MAX_PHRASE_TOKENS} words): only its first ones were searched for"
)


def _indexing(coffer: Coffer, kb: str) -> dict[str, Any]:
    """`{"indexing": {"done", "total"}}` while the KB's index may lack files (its files
    being indexed, its first pass since the start not over, or a pass its settings asked
    for not over: `because` says which; `total` is null until its files are counted), for
    a search answer to say that it may be incomplete; else `{}`."""
    progress = coffer.progress.get(kb)
    pending = coffer.kbs.pending.get(kb)
    because = {"because": pending.why} if pending is not None else {}
    if progress is not None and progress.phase == "indexing" and progress.total:
        return {"indexing": {"done": progress.done, "total": progress.total, **because}}
    if coffer.indexing.first_pass_pending(kb) or pending is not None:
        return {"indexing": {"done": 0, "total": None, **because}}
    return {}


@routes.post("/api/v1/knowledge_bases/{name}/search")
async def search(request: web.Request) -> web.Response:
    body = await _json(request, SearchRequest)
    coffer, name = request.app[COFFER], request.match_info["name"]
    result = await coffer.retrieval.search(
        name, body.query, body.top_k, body.search_filters(), body.mode
    )
    return json_response(
        {
            "mode": result.mode,
            "fallback": result.fallback,
            **({"query_cut": QUERY_CUT} if result.query_cut else {}),
            **_indexing(coffer, name),
            "passages": [passage_json(p) for p in result.passages],
        }
    )


@routes.post("/api/v1/search")
async def search_all(request: web.Request) -> web.Response:
    body = await _json(request, SearchAllRequest)
    coffer = request.app[COFFER]
    passages, per_kb = await coffer.retrieval.search_all(
        body.query, body.top_k, body.knowledge_bases, body.search_filters(), body.mode
    )
    modes = {answer.mode for answer in per_kb.values()}
    cut = any(answer.query_cut for answer in per_kb.values())
    return json_response(
        {
            "mode": modes.pop() if len(modes) == 1 else "mixed",
            **({"query_cut": QUERY_CUT} if cut else {}),
            "knowledge_bases": {
                name: {"mode": answer.mode, "fallback": answer.fallback, **_indexing(coffer, name)}
                for name, answer in per_kb.items()
            },
            "passages": [passage_json(p) for p in passages],
        }
    )


@routes.post("/api/v1/knowledge_bases/{name}/grep")
async def grep(request: web.Request) -> web.Response:
    body = await _json(request, GrepRequest)
    result = await request.app[COFFER].retrieval.grep(
        request.match_info["name"], body.pattern, body.max_matches, body.ignore_case
    )
    return json_response(
        {
            "hits": [
                {
                    "document_id": h.document_id,
                    "path": h.file,
                    "relative_path": h.path,
                    "line_number": h.line_number,
                    "line": h.line,
                    **({"page": h.page, "location": h.location} if h.page is not None else {}),
                }
                for h in result.hits
            ],
            "truncated": result.truncated,
        }
    )


@routes.get("/api/v1/knowledge_bases/{name}/metrics")
async def metrics(request: web.Request) -> web.Response:
    return json_response(await request.app[COFFER].kbs.metrics(request.match_info["name"]))


@routes.get("/api/v1/audit")
@with_query(AuditQuery)
async def audit(request: web.Request, query: AuditQuery) -> web.Response:
    events = await request.app[COFFER].activity.events(
        query.kb or None, query.limit, event=query.event or None, actor=query.actor or None
    )
    return json_response({"events": events})


@routes.post("/api/v1/mcp_invocations")
async def record_invocation(request: web.Request) -> web.Response:
    body = await _json(request, Invocation)
    await request.app[COFFER].activity.record_invocation(
        body.client, body.tool, body.duration_ms, body.outcome
    )
    return json_response({"recorded": True}, status=201)


@routes.get("/api/v1/mcp_invocations")
@with_query(InvocationsQuery)
async def list_invocations(request: web.Request, query: InvocationsQuery) -> web.Response:
    invocations = await request.app[COFFER].activity.invocations(
        query.limit, client=query.client or None, tool=query.tool or None
    )
    return json_response({"invocations": invocations})


@routes.post("/api/v1/web")
async def open_web(request: web.Request) -> web.Response:
    """Start the web page (on loopback; a free port unless one is given) if it is off, and
    answer its URL with a new one-time key."""
    body = await _json(request, OpenWeb)
    if body.kb is not None:
        request.app[COFFER].kbs.get(body.kb)
    return json_response(await request.app[WEB].open(body.port, body.kb))


@routes.delete("/api/v1/web")
async def close_web(request: web.Request) -> web.Response:
    return json_response({"stopped": await request.app[WEB].close()})


# -- kind-agnostic resources (seed) --------------------------------------------------------


@routes.get("/api/v1/resources")
@with_query(ResourcesQuery)
async def list_resources(request: web.Request, query: ResourcesQuery) -> web.Response:
    kbs = request.app[COFFER].kbs.list()  # the one kind there is
    return json_response({"resources": [resource_json(k) for k in kbs]})


@routes.get("/api/v1/resources/{kind}/{name}")
async def get_resource(request: web.Request) -> web.Response:
    _kind(request)
    return json_response(resource_json(request.app[COFFER].kbs.get(request.match_info["name"])))


@routes.delete("/api/v1/resources/{kind}/{name}")
async def delete_resource(request: web.Request) -> web.Response:
    _kind(request)
    return await _delete_kb(request, request.match_info["name"])


async def _set_enabled(request: web.Request, enabled: bool) -> web.Response:
    _kind(request)
    coffer = request.app[COFFER]
    kb, result = await coffer.kbs.set_enabled(
        request.match_info["name"], enabled, actor=_actor(request)
    )
    return json_response({**resource_json(kb), "reindex": reindex_json(result)})


@routes.post("/api/v1/resources/{kind}/{name}/enable")
async def enable_resource(request: web.Request) -> web.Response:
    return await _set_enabled(request, True)


@routes.post("/api/v1/resources/{kind}/{name}/disable")
async def disable_resource(request: web.Request) -> web.Response:
    return await _set_enabled(request, False)


# -- the application -----------------------------------------------------------------------


def peer_check_middleware(uid: int) -> Any:
    @web.middleware
    async def check_peer(request: web.Request, handler: Any) -> web.StreamResponse:
        sock = request.transport.get_extra_info("socket") if request.transport else None
        if sock is None or peer_uid(sock) != uid:
            log.warning("refused a connection from another user")
            response = error_response(
                403, "FORBIDDEN", "only the user running cofferd may talk to it"
            )
            response.force_close()
            return response
        result: web.StreamResponse = await handler(request)
        return result

    return check_peer


def create_app(
    coffer: Coffer, status_fn: Callable[[], Awaitable[dict[str, Any]]], web_switch: WebSwitch
) -> web.Application:
    app = CofferApplication(
        client_max_size=MAX_BODY_BYTES,
        middlewares=[error_middleware, peer_check_middleware(os.getuid()), query_middleware],
    )
    app[COFFER] = coffer
    app[STATUS] = status_fn
    app[WEB] = web_switch
    app.add_routes(routes)
    return app
