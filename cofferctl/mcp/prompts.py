"""MCP prompts: answer a question from the user's notes, with citations."""

from __future__ import annotations

from typing import Any

from cofferctl import api
from cofferctl.client import ApiError, Client
from cofferctl.jsonrpc import INVALID_PARAMS, RpcError, shown
from cofferctl.mcp.schema import JSON
from cofferctl.mcp.uri import document_uri

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
        raise RpcError(INVALID_PARAMS, f"unknown prompt: {shown(name)}")
    if not all(isinstance(v, str) for v in arguments.values()):
        raise RpcError(INVALID_PARAMS, "prompt arguments are strings")
    question = arguments.get("question")
    if not isinstance(question, str) or not question.strip():
        raise RpcError(INVALID_PARAMS, "the argument `question` is required")
    kb = arguments.get("kb") or None
    request = {"query": question, "top_k": PASSAGES}
    try:
        found = api.search(client, kb, request) if kb else api.search_all(client, request)
        passages = found["passages"]
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
