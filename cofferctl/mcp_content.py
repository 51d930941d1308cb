"""MCP resources (every document as coffer://KB/PATH, listed, read, and a URI template) and
prompts (answer a question from the user's notes, with citations)."""

from __future__ import annotations

from typing import Any

from cofferctl.client import ApiError, Client
from cofferctl.mcp_protocol import INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError
from cofferctl.mcp_schema import JSON
from cofferctl.mcp_uri import TEMPLATE, document_uri, parse

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
    names = [
        k["name"] for k in client.get("/api/v1/knowledge_bases")["knowledge_bases"] if k["enabled"]
    ]
    start, offset = _cursor(cursor, names)
    resources: list[JSON] = []
    for index in range(start, len(names)):
        name = names[index]
        body = client.get(client.kb(name, "/documents"), limit=PAGE, offset=offset)
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
        doc = client.get(client.document(kb, path))
    except ApiError as exc:
        code = RESOURCE_NOT_FOUND if exc.status == 404 else INVALID_PARAMS
        raise RpcError(code, f"{exc.code}: {exc.message}", {"uri": uri}) from None
    return {"contents": [{"uri": uri, "mimeType": MARKDOWN, "text": doc["content"]}]}


PROMPTS: list[JSON] = [
    {
        "name": "answer_from_notes",
        "title": "Answer from my notes",
        "description": "Answer a question from the user's notes only, citing the documents "
        "and lines each statement comes from.",
        "arguments": [
            {"name": "question", "description": "the question to answer", "required": True},
            {
                "name": "kb",
                "description": "the knowledge base to answer from (omit for every enabled one)",
                "required": False,
            },
        ],
    }
]
PASSAGES = 8


def get_prompt(client: Client, name: str, arguments: dict[str, Any]) -> JSON:
    if name != "answer_from_notes":
        raise RpcError(INVALID_PARAMS, f"unknown prompt: {name}")
    question = arguments.get("question")
    if not isinstance(question, str) or not question.strip():
        raise RpcError(INVALID_PARAMS, "the argument `question` is required")
    kb = arguments.get("kb") or None
    request = {"query": question, "top_k": PASSAGES}
    try:
        path = client.kb(kb, "/search") if kb else "/api/v1/search"
        passages = client.post(path, request)["passages"]
    except ApiError as exc:
        raise RpcError(INVALID_PARAMS, f"{exc.code}: {exc.message}") from None
    where = f"the knowledge base `{kb}`" if kb else "every enabled knowledge base"
    return {
        "description": f"Answer from {where}, with citations",
        "messages": [
            {
                "role": "user",
                "content": {"type": "text", "text": _answer_prompt(question, kb, passages)},
            }
        ],
    }


def _answer_prompt(question: str, kb: str | None, passages: list[JSON]) -> str:
    sources = []
    for n, p in enumerate(passages, 1):
        uri = document_uri(p.get("knowledge_base") or str(kb), p["relative_path"])
        lines = f"lines {p['line_start']}-{p['line_end']}"
        sources.append(f"[{n}] {p['title']} ({uri}, {lines})\n{p['text'].strip()}")
    found = "\n\n".join(sources) if sources else "(no passage matched the question)"
    return (
        f"Answer this question from my notes only: {question}\n\n"
        "Cite the source of every statement as [n], and end with the list of sources you "
        "cited (title and coffer:// URI). If the passages do not answer the question, say so "
        "rather than guessing; you may search my notes further with the `search` and `grep` "
        "tools and read whole documents with `get_document`.\n\n"
        f"Passages from my notes:\n\n{found}"
    )
