"""MCP resources: every document as coffer://KB/PATH, listed, read, and a URI template."""

from __future__ import annotations

from cofferctl import api
from cofferctl.client import ApiError, Client
from cofferctl.jsonrpc import INVALID_PARAMS, RpcError
from cofferctl.mcp.protocol import RESOURCE_NOT_FOUND
from cofferctl.mcp.schema import JSON
from cofferctl.mcp.uri import TEMPLATE, document_uri, parse

MARKDOWN = "text/markdown"
PAGE = 100  # documents per resources/list page

TEMPLATES = [
    {
        "uriTemplate": TEMPLATE,
        "name": "document",
        "title": "A Coffer document",
        "description": "A Markdown document of a knowledge base: coffer://KB/PATH, PATH its "
        "path in the knowledge base (the `uri` of search and list_documents results).",
        "mimeType": MARKDOWN,
    }
]


def list_resources(client: Client, cursor: str | None) -> JSON:
    """Documents of every enabled knowledge base, a page at a time; the cursor is
    `KB:OFFSET` of the next page."""
    names = [k["name"] for k in api.knowledge_bases(client)["knowledge_bases"] if k["enabled"]]
    start, offset = _cursor(cursor, names)
    resources: list[JSON] = []
    for index in range(start, len(names)):
        name = names[index]
        body = api.documents(client, name, limit=PAGE, offset=offset)
        resources += [_resource(d) for d in body["documents"]]
        if offset + PAGE < body["total"]:
            return {"resources": resources, "nextCursor": f"{name}:{offset + PAGE}"}
        offset = 0
        if len(resources) >= PAGE and index + 1 < len(names):
            return {"resources": resources, "nextCursor": f"{names[index + 1]}:0"}
    return {"resources": resources}


def _cursor(cursor: str | None, names: list[str]) -> tuple[int, int]:
    if not cursor:
        return 0, 0
    name, _, offset = cursor.rpartition(":")
    if name not in names or not offset.isdigit():
        raise RpcError(INVALID_PARAMS, f"invalid cursor: {cursor}")
    return names.index(name), int(offset)


def _resource(doc: JSON) -> JSON:
    return {
        "uri": document_uri(doc["knowledge_base"], doc["relative_path"]),
        "name": doc["relative_path"],
        "title": doc["title"],
        "mimeType": MARKDOWN,
    }


def read_resource(client: Client, uri: str) -> JSON:
    where = parse(uri)
    if where is None:
        raise RpcError(RESOURCE_NOT_FOUND, f"not a Coffer document URI: {uri}", {"uri": uri})
    kb, path = where
    try:
        doc = api.document(client, kb, path)
    except ApiError as exc:
        code = RESOURCE_NOT_FOUND if exc.status == 404 else INVALID_PARAMS
        raise RpcError(code, f"{exc.code}: {exc.message}", {"uri": uri}) from None
    return {"contents": [{"uri": uri, "mimeType": MARKDOWN, "text": doc["content"]}]}
