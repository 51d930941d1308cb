"""`cofferctl mcp`: an MCP server on stdio that bridges every tool call to cofferd.

One writer and one index however many agents connect: tools only talk to the running
daemon over its socket. Writes are audited with the agent as the actor
(`agent:<client name>` from MCP initialization); every call is recorded in
`mcp_invocations` (tool, client, time, duration, outcome; never arguments or contents).
Imported only by this command, so the rest of cofferctl stays fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from cofferctl.client import ApiError, Client, DaemonUnreachable

T = TypeVar("T")
DEFAULT_KB = "notes"
INSTRUCTIONS = """\
Coffer is the user's local knowledge base: Markdown documents in knowledge bases (KBs).
Use `search` first to find what the user knows about a topic (ranked passages), `grep`
for exact strings or patterns, `get_document` to read a whole document. Record what you
learn with `add_document` (Markdown) and keep it current with `edit_document`. The user
reads and edits the same files, so write clear Markdown with a title."""

server = MCPServer(name="coffer", instructions=INSTRUCTIONS)
_socket: Path | None = None


def client_name(ctx: Context[Any, Any] | None) -> str:
    try:
        info = ctx.session.client_params.client_info if ctx is not None else None
    except AttributeError:
        info = None
    name = getattr(info, "name", None)
    return f"agent:{name}" if name else "agent"


def bridged(tool: str) -> Callable[[Callable[..., Any]], Callable[..., Awaitable[Any]]]:
    """Run a (blocking) call against the daemon off the event loop; record it; turn
    daemon errors into tool errors that carry the API's code and message."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(fn)
        async def call(*args: Any, ctx: Context[Any, Any] | None = None, **kwargs: Any) -> Any:
            actor = client_name(ctx)
            assert _socket is not None
            client = Client(_socket, actor=actor, timeout=300)
            started = time.perf_counter()
            outcome = "ok"
            try:
                return await asyncio.to_thread(fn, client, *args, **kwargs)
            except DaemonUnreachable:
                outcome = "DAEMON_UNREACHABLE"
                raise ToolError(
                    "DAEMON_UNREACHABLE: cofferd is not running; start it with `cofferd` "
                    "(or `cofferctl service install` to start it with the OS)"
                ) from None
            except ApiError as exc:
                outcome = exc.code
                raise ToolError(f"{exc.code}: {exc.message}") from None
            finally:
                if outcome != "DAEMON_UNREACHABLE":
                    record = {
                        "client": actor,
                        "tool": tool,
                        "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                        "outcome": outcome,
                    }
                    await asyncio.to_thread(_record, client, record)

        # What MCP sees: the tool's own parameters (no `client`) plus the request context.
        signature = inspect.signature(fn)
        params = list(signature.parameters.values())[1:]
        context = inspect.Parameter(
            "ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context, default=None
        )
        setattr(call, "__signature__", signature.replace(parameters=[*params, context]))  # noqa: B010
        call.__annotations__ = {
            **{k: v for k, v in fn.__annotations__.items() if k != "client"},
            "ctx": Context,
        }
        del call.__wrapped__
        return call

    return wrap


def _record(client: Client, record: dict[str, Any]) -> None:
    # the call itself succeeded or failed on its own terms; its log entry is best effort
    with contextlib.suppress(ApiError, DaemonUnreachable, OSError):
        client.post("/api/v1/mcp_invocations", record)


def _document(doc: dict[str, Any], with_content: bool) -> dict[str, Any]:
    keys = ["id", "title", "path", "relative_path", "source_mode", "updated_at", "metadata",
            "content_sha256"]  # fmt: skip
    out = {k: doc[k] for k in keys if k in doc}
    if with_content:
        out["content"] = doc.get("content", "")
    return out


@server.tool(
    description="Search a knowledge base, or every one with kb='*'. Returns the best-matching "
    "passages (document_id, knowledge_base, title, text, score, path, line_start) and the "
    'mode that answered. Query syntax: "exact phrase", -excluded. Filters (all optional): '
    "folder (inside docs/), tags (documents with all of them), updated_after/updated_before "
    "(ISO 8601 date or time, UTC), source_mode (converted or edited)."
)
@bridged("search")
def search(
    client: Client,
    query: str,
    kb: str = DEFAULT_KB,
    top_k: int = 10,
    folder: str | None = None,
    tags: list[str] | None = None,
    updated_after: str | None = None,
    updated_before: str | None = None,
    source_mode: str | None = None,
) -> dict[str, Any]:
    given = {
        "folder": folder,
        "tags": tags,
        "updated_after": updated_after,
        "updated_before": updated_before,
        "source_mode": source_mode,
    }
    request: dict[str, Any] = {"query": query, "top_k": top_k}
    filters = {k: v for k, v in given.items() if v is not None}
    if filters:
        request["filters"] = filters
    path = "/api/v1/search" if kb == "*" else client.kb(kb, "/search")
    body = client.post(path, request)
    for p in body["passages"]:
        p.pop("highlights", None)
    return dict(body)


@server.tool(
    description="Find lines matching a regular expression (ripgrep) in a "
    "knowledge base's Markdown files. Use for exact names, identifiers, phrases."
)
@bridged("grep")
def grep(
    client: Client, pattern: str, kb: str = DEFAULT_KB, max_matches: int = 50
) -> dict[str, Any]:
    return dict(
        client.post(client.kb(kb, "/grep"), {"pattern": pattern, "max_matches": max_matches})
    )


@server.tool(description="List the knowledge bases (names, whether enabled, settings).")
@bridged("list_knowledge_bases")
def list_knowledge_bases(client: Client) -> dict[str, Any]:
    kbs = client.get("/api/v1/knowledge_bases")["knowledge_bases"]
    return {"knowledge_bases": [{"name": k["name"], "enabled": k["enabled"]} for k in kbs]}


@server.tool(
    description="List documents of a knowledge base, newest first, optionally "
    "only those whose title contains `title_filter`. Paged by limit/offset."
)
@bridged("list_documents")
def list_documents(
    client: Client,
    kb: str = DEFAULT_KB,
    title_filter: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> dict[str, Any]:
    body = client.get(client.kb(kb, "/documents"), q=title_filter, limit=limit, offset=offset)
    docs = [_document(d, False) for d in body["documents"]]
    return {"documents": docs, "total": body["total"], "limit": limit, "offset": offset}


def _doc_path(client: Client, kb: str, document_id: str, then: str = "") -> str:
    """A document's API path; the reference (an id, an id prefix or a path in the KB) is
    one path segment, whatever it holds."""
    return client.kb(kb, f"/documents/{urllib.parse.quote(document_id, safe='')}{then}")


@server.tool(
    description="Read one document: its title, metadata and full Markdown. `document_id` "
    "may also be the document's path in the knowledge base, or an unambiguous id prefix."
)
@bridged("get_document")
def get_document(client: Client, document_id: str, kb: str = DEFAULT_KB) -> dict[str, Any]:
    return _document(client.get(_doc_path(client, kb, document_id)), True)


@server.tool(
    description="A document's links: what it links to (`outgoing`, with `document_id` null "
    "for a broken link) and which documents link to it (`backlinks`, with the line)."
)
@bridged("get_links")
def get_links(client: Client, document_id: str, kb: str = DEFAULT_KB) -> dict[str, Any]:
    return dict(client.get(_doc_path(client, kb, document_id, "/links")))


@server.tool(
    description="Conflicts to resolve in a knowledge base: copies sync tools left when two "
    "devices changed a file at once (with the document each conflicts with), and documents "
    "holding git merge markers."
)
@bridged("list_conflicts")
def list_conflicts(client: Client, kb: str = DEFAULT_KB) -> dict[str, Any]:
    return dict(client.get(client.kb(kb, "/conflicts")))


@server.tool(description="The tags used in a knowledge base, with how many documents carry each.")
@bridged("list_tags")
def list_tags(client: Client, kb: str = DEFAULT_KB) -> dict[str, Any]:
    return dict(client.get(client.kb(kb, "/tags")))


@server.tool(
    description="Add a document. Either `content` (Markdown, with a `title`) to "
    "record notes, or `file_path` (an absolute path on this machine: PDF, Word, "
    "PowerPoint, Excel, HTML, ...) to convert and add a file."
)
@bridged("add_document")
def add_document(
    client: Client,
    kb: str = DEFAULT_KB,
    content: str | None = None,
    title: str | None = None,
    file_path: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = (
        {"source_path": file_path, "track_source": False}
        if file_path
        else {"content": content or "", "title": title}
    )
    reply = client.post(client.kb(kb, "/documents"), body)
    return {"status": reply["status"], "document": _document(reply["document"], False)}


@server.tool(
    description="Replace a document's Markdown with `content` (the whole new text). The "
    "document is marked as edited; its metadata is kept. Pass the `content_sha256` from "
    "get_document as `expected_sha256` so the edit is refused (DOCUMENT_CHANGED) if the "
    "user changed the document meanwhile."
)
@bridged("edit_document")
def edit_document(
    client: Client,
    document_id: str,
    content: str,
    kb: str = DEFAULT_KB,
    expected_sha256: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"content": content}
    if expected_sha256:
        body["expected_sha256"] = expected_sha256
    doc = client.request("PUT", _doc_path(client, kb, document_id), body)
    return _document(doc, False)


@server.tool(description="Delete a document (its Markdown file and its original).")
@bridged("delete_document")
def delete_document(client: Client, document_id: str, kb: str = DEFAULT_KB) -> dict[str, Any]:
    return dict(client.request("DELETE", _doc_path(client, kb, document_id)))


@server.tool(
    description="Check which documents added from files on this machine have "
    "changed or missing originals (and refresh them if the KB auto-updates)."
)
@bridged("check_sources")
def check_sources(client: Client, kb: str = DEFAULT_KB) -> dict[str, Any]:
    return dict(client.post(client.kb(kb, "/check-sources")))


def run(socket_path: Path) -> None:
    global _socket
    _socket = socket_path
    server.run()
