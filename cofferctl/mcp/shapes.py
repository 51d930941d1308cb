"""The shapes MCP tools share: output schemas of documents, passages and ingest answers
(with the conversions of cofferd's JSON into them), the arguments several tools take, and
the API paths of a call's knowledge base and document."""

from __future__ import annotations

from coffer_kernel.bounds import TOP_K_MAX
from cofferctl.mcp.schema import JSON, array, integer, string
from cofferctl.mcp.uri import document_uri

# --- output schemas --------------------------------------------------------------------


def obj(properties: dict[str, JSON], required: list[str] | None = None) -> JSON:
    return {"type": "object", "properties": properties, "required": required or list(properties)}


STR: JSON = {"type": "string"}
INT: JSON = {"type": "integer"}
NUM: JSON = {"type": "number"}
BOOL: JSON = {"type": "boolean"}
OPT_STR: JSON = {"type": ["string", "null"]}
ANY_OBJ: JSON = {"type": "object"}
STRS: JSON = {"type": "array", "items": STR}
PAGE: dict[str, JSON] = {  # a paged list's answer: `remaining` after this page
    "total": INT, "limit": INT, "offset": INT, "remaining": INT,
}  # fmt: skip


def paged(body: JSON, shown: int) -> JSON:
    """A page's total, limit and offset, and how many remain after it (ask again with
    `offset` + `limit` for the next)."""
    remaining = max(0, body["total"] - body["offset"] - shown)
    return {"total": body["total"], "limit": body["limit"], "offset": body["offset"],
            "remaining": remaining}  # fmt: skip


def items(schema: JSON) -> JSON:
    return {"type": "array", "items": schema}


DOCUMENT = obj(
    {
        "id": STR,
        "knowledge_base": STR,
        "title": STR,
        "path": {**STR, "description": "absolute path of the file (Markdown, or a PDF...)"},
        "relative_path": {**STR, "description": "path inside the knowledge base"},
        "uri": {**STR, "description": "the document as an MCP resource (coffer://KB/PATH)"},
        "source_mode": {"enum": ["converted", "edited"]},
        "content_sha256": {**STR, "description": "this version; pass as expected_sha256"},
        "updated_at": STR,
        "tags": STRS,
    }
)
DOCUMENT_WITH_CONTENT = {
    **DOCUMENT,
    "properties": {
        **DOCUMENT["properties"],
        "content": STR,
        "frontmatter": ANY_OBJ,
        "derived": {
            **BOOL,
            "description": "content is text converted from the file (a PDF...), not the file",
        },
    },
    "required": [*DOCUMENT["required"], "content", "frontmatter"],
}
INGESTED = obj(
    {"status": {"enum": ["added", "updated", "unchanged"]}, "message": STR, "document": DOCUMENT}
)
_PASSAGE = {
    "document_id": STR,
    "knowledge_base": STR,
    "title": STR,
    "text": STR,
    "score": NUM,
    "path": STR,
    "relative_path": STR,
    "uri": STR,
    "line_start": INT,
    "line_end": INT,
    "heading": STRS,
}
PASSAGE = obj(
    {
        **_PASSAGE,
        "page": {
            **INT,
            "description": "of a PDF, a slide deck or a workbook: the page (slide, sheet) the "
            "passage is on, counted from 1 (open `path` there: `file.pdf#page=3`)",
        },
        "location": {
            **STR,
            "description": "that page as the document names it: `page iv` (its own page "
            "label), `slide 7`, `sheet Budget`",
        },
    },
    list(_PASSAGE),
)
SOURCE_STATE = obj(
    {"document_id": STR, "title": STR, "source_path": STR, "note": STR},
    ["document_id", "title", "source_path"],
)


def summary(doc: JSON, with_content: bool = False) -> JSON:
    out = {k: doc[k] for k in DOCUMENT["properties"] if k in doc}
    out["tags"] = doc.get("tags") or []
    out["uri"] = document_uri(doc["knowledge_base"], doc["relative_path"])
    if with_content:
        out["content"] = doc.get("content", "")
        out["frontmatter"] = doc.get("frontmatter") or {}
        if doc.get("derived"):
            out["derived"] = True
    return out


def ingested(reply: JSON) -> JSON:
    return {
        "status": reply["status"],
        "message": reply.get("message", ""),
        "document": summary(reply["document"]),
    }


def passage(p: JSON, kb_name: str | None) -> JSON:
    out = {k: p[k] for k in PASSAGE["properties"] if k in p}
    out.setdefault("knowledge_base", kb_name)
    out["uri"] = document_uri(out["knowledge_base"], p["relative_path"])
    return out


# --- input pieces ----------------------------------------------------------------------

DOCUMENT_REF = string(
    "the document: its id (from search, list_documents, ...), an id prefix no other id "
    "starts with, or its path in the knowledge base (`projects/plan.md`)",
    min_length=1,
    max_length=4096,
)
FILTERS: dict[str, JSON] = {
    "folder": string(
        "only documents in this folder of the knowledge base or below (`projects/coffer`)",
        max_length=1024,
        nullable=True,
    ),
    "tags": array(
        "only documents carrying every one of these tags (without `#`, any case; "
        "`project` also matches `project/coffer`)",
        string("a tag", min_length=1, max_length=200),
        max_items=20,
    ),
    "updated_after": string(
        "only documents updated at or after this time (ISO 8601 date or time; no zone means UTC)",
        max_length=64,
        nullable=True,
    ),
    "updated_before": string(
        "only documents updated before this time (ISO 8601)", max_length=64, nullable=True
    ),
    "source_mode": string(
        "only documents converted from a file (`converted`) or edited since (`edited`)",
        enum=["converted", "edited"],
        nullable=True,
    ),
    "format": array(
        "only documents of these formats: `md` (Markdown notes), or files indexed where they "
        "lie (`pdf`, `docx`, `pptx`, `xlsx`, `html`, `epub`, `txt`, ...)",
        string("a format", min_length=1, max_length=20),
        max_items=20,
    ),
}
QUERY = string(
    'what to look for, in words; "exact phrase" and -excluded work', min_length=1, max_length=2000
)
TOP_K = integer("how many passages to return", minimum=1, maximum=TOP_K_MAX, default=10)
MODE: JSON = {
    "enum": ["keyword", "vector", "hybrid", None],
    "description": "how to search: omit for each knowledge base's own mode; one it has not "
    "enabled answers MODE_DISABLED",
}


def search_request(args: JSON) -> JSON:
    request: JSON = {"query": args["query"], "top_k": args.get("top_k", 10)}
    if args.get("mode"):
        request["mode"] = args["mode"]
    filters = {k: args[k] for k in FILTERS if args.get(k) is not None}
    if filters:
        request["filters"] = filters
    return request
