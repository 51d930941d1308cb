"""The MCP tools: what each takes (a strict input schema), what it answers (an output
schema its structured content matches), what it may do (annotations), and the calls to
cofferd behind it. Every tool that works on a knowledge base names it: there is no default.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cofferctl.client import Client
from cofferctl.mcp_schema import (
    JSON,
    SHA256,
    ArgumentError,
    arguments,
    array,
    boolean,
    integer,
    kb,
    string,
)
from cofferctl.mcp_uri import document_uri

Run = Callable[[Client, dict[str, Any]], JSON]


@dataclass(frozen=True)
class Hints:
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


READS = Hints(read_only=True, destructive=False, idempotent=True, open_world=False)
# "open world": the tool reads files on this machine outside the knowledge bases


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    input_schema: JSON
    output_schema: JSON
    hints: Hints
    run: Run

    def listing(self) -> JSON:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "annotations": {
                "title": self.title,
                "readOnlyHint": self.hints.read_only,
                "destructiveHint": self.hints.destructive,
                "idempotentHint": self.hints.idempotent,
                "openWorldHint": self.hints.open_world,
            },
        }


TOOLS: dict[str, Tool] = {}


def tool(
    name: str, title: str, description: str, inputs: JSON, output: JSON, hints: Hints
) -> Callable[[Run], Run]:
    def register(run: Run) -> Run:
        TOOLS[name] = Tool(name, title, description, inputs, output, hints, run)
        return run

    return register


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


def items(schema: JSON) -> JSON:
    return {"type": "array", "items": schema}


DOCUMENT = obj(
    {
        "id": STR,
        "knowledge_base": STR,
        "title": STR,
        "path": {**STR, "description": "absolute path of the Markdown file"},
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
    "properties": {**DOCUMENT["properties"], "content": STR, "frontmatter": ANY_OBJ},
    "required": [*DOCUMENT["required"], "content", "frontmatter"],
}
INGESTED = obj(
    {"status": {"enum": ["added", "updated", "unchanged"]}, "message": STR, "document": DOCUMENT}
)
PASSAGE = obj(
    {
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
}
QUERY = string(
    'what to look for, in words; "exact phrase" and -excluded work', min_length=1, max_length=2000
)
TOP_K = integer("how many passages to return", minimum=1, maximum=100, default=10)


def kb_path(client: Client, args: JSON, rest: str = "") -> str:
    return client.kb(args["kb"], rest)


def doc_path(client: Client, args: JSON, then: str = "") -> str:
    """The API path of the document `document_id` names (one path segment, whatever it holds)."""
    ref = urllib.parse.quote(args["document_id"], safe="")
    return client.kb(args["kb"], f"/documents/{ref}{then}")


def search_request(args: JSON) -> JSON:
    request: JSON = {"query": args["query"], "top_k": args.get("top_k", 10)}
    filters = {k: args[k] for k in FILTERS if args.get(k) is not None}
    if filters:
        request["filters"] = filters
    return request


# --- reading ---------------------------------------------------------------------------


@tool(
    "search",
    "Search a knowledge base",
    "Search one knowledge base for passages about a topic (ranked; the knowledge base's own "
    "mode: keyword, vector or hybrid). Use this first to find what the user knows. Each "
    "passage names its document (document_id, relative_path, uri) and lines, for citing. "
    "Optional filters narrow to a folder, tags, an update period or a source mode. To "
    "search several or all knowledge bases at once, use search_all.",
    arguments(
        {"kb": kb("the knowledge base to search"), "query": QUERY, "top_k": TOP_K, **FILTERS},
        ["kb", "query"],
    ),
    obj(
        {
            "knowledge_base": STR,
            "mode": {"enum": ["keyword", "vector", "hybrid"]},
            "fallback": {
                **OPT_STR,
                "description": "why the knowledge base's own mode did not "
                "answer (null when it did)",
            },
            "passages": items(PASSAGE),
        }
    ),
    READS,
)
def search(client: Client, args: JSON) -> JSON:
    body = client.post(kb_path(client, args, "/search"), search_request(args))
    return {
        "knowledge_base": args["kb"],
        "mode": body["mode"],
        "fallback": body.get("fallback"),
        "passages": [passage(p, args["kb"]) for p in body["passages"]],
    }


@tool(
    "search_all",
    "Search several knowledge bases",
    "Search several knowledge bases at once: those named in `knowledge_bases`, or, when it "
    "is omitted, every enabled one (the answer lists which were searched and how). Results "
    "are merged by rank; each passage names its knowledge_base. Same query syntax and "
    "filters as search.",
    arguments(
        {
            "query": QUERY,
            "knowledge_bases": array(
                "the knowledge bases to search; omit (or null) for every enabled one",
                string("a knowledge base", pattern="^[a-z0-9][a-z0-9_-]{0,63}$"),
                min_items=1,
                max_items=100,
            ),
            "top_k": TOP_K,
            **FILTERS,
        },
        ["query"],
    ),
    obj(
        {
            "knowledge_bases": {
                "type": "object",
                "description": "how each knowledge base searched answered",
                "additionalProperties": obj({"mode": STR, "fallback": OPT_STR}),
            },
            "mode": {**STR, "description": "what answered: one mode, or `mixed`"},
            "passages": items(PASSAGE),
        }
    ),
    READS,
)
def search_all(client: Client, args: JSON) -> JSON:
    request = search_request(args)
    if args.get("knowledge_bases"):
        request["knowledge_bases"] = args["knowledge_bases"]
    body = client.post("/api/v1/search", request)
    return {
        "knowledge_bases": body["knowledge_bases"],
        "mode": body["mode"],
        "passages": [passage(p, None) for p in body["passages"]],
    }


@tool(
    "grep",
    "Find exact text",
    "Find the lines of a knowledge base's Markdown files that match a regular expression "
    "(ripgrep syntax), ordered by path then line. Use for exact names, identifiers, "
    "phrases.",
    arguments(
        {
            "kb": kb("the knowledge base to scan"),
            "pattern": string(
                "a regular expression (ripgrep syntax)", min_length=1, max_length=2000
            ),
            "max_matches": integer(
                "stop after this many matching lines", minimum=1, maximum=10000, default=50
            ),
            "ignore_case": boolean("match regardless of case", default=False),
        },
        ["kb", "pattern"],
    ),
    obj(
        {
            "hits": items(
                obj(
                    {
                        "document_id": OPT_STR,
                        "path": STR,
                        "relative_path": STR,
                        "line_number": INT,
                        "line": STR,
                    }
                )
            ),
            "truncated": {
                **BOOL,
                "description": "more matches exist, or the time limit cut the scan",
            },
        }
    ),
    READS,
)
def grep(client: Client, args: JSON) -> JSON:
    request = {
        "pattern": args["pattern"],
        "max_matches": args.get("max_matches", 50),
        "ignore_case": args.get("ignore_case", False),
    }
    body = client.post(kb_path(client, args, "/grep"), request)
    return {"hits": body["hits"], "truncated": body["truncated"]}


@tool(
    "list_knowledge_bases",
    "List knowledge bases",
    "List the knowledge bases: name, whether enabled, the folder an attached one indexes in "
    "place, and its settings (search modes, chunking, size limit, embedding, "
    "auto_update_sources).",
    arguments({}),
    obj(
        {
            "knowledge_bases": items(
                obj(
                    {
                        "name": STR,
                        "enabled": BOOL,
                        "created_at": STR,
                        "attached": OPT_STR,
                        "settings": ANY_OBJ,
                    }
                )
            )
        }
    ),
    READS,
)
def list_knowledge_bases(client: Client, args: JSON) -> JSON:
    kbs = client.get("/api/v1/knowledge_bases")["knowledge_bases"]
    return {
        "knowledge_bases": [
            {
                "name": k["name"],
                "enabled": k["enabled"],
                "created_at": k["created_at"],
                "attached": k.get("attached"),
                "settings": k["config"],
            }
            for k in kbs
        ]
    }


@tool(
    "list_documents",
    "List documents",
    "List a knowledge base's documents, newest first, optionally only those whose title "
    "contains `title_filter`; paged by limit and offset (`total` counts them all).",
    arguments(
        {
            "kb": kb(),
            "title_filter": string(
                "only titles containing this (any case)", max_length=500, nullable=True
            ),
            "limit": integer("documents per page", minimum=1, maximum=500, default=50),
            "offset": integer("documents to skip", minimum=0, default=0),
        },
        ["kb"],
    ),
    obj({"documents": items(DOCUMENT), "total": INT, "limit": INT, "offset": INT}),
    READS,
)
def list_documents(client: Client, args: JSON) -> JSON:
    limit, offset = args.get("limit", 50), args.get("offset", 0)
    body = client.get(
        kb_path(client, args, "/documents"), q=args.get("title_filter"), limit=limit, offset=offset
    )
    return {
        "documents": [summary(d) for d in body["documents"]],
        "total": body["total"],
        "limit": limit,
        "offset": offset,
    }


@tool(
    "get_document",
    "Read a document",
    "Read one document: its title, tags, frontmatter and whole Markdown body, with its "
    "content_sha256 (the version edit_document needs as expected_sha256).",
    arguments({"kb": kb(), "document_id": DOCUMENT_REF}, ["kb", "document_id"]),
    DOCUMENT_WITH_CONTENT,
    READS,
)
def get_document(client: Client, args: JSON) -> JSON:
    return summary(client.get(doc_path(client, args)), with_content=True)


@tool(
    "get_links",
    "Links and backlinks",
    "A document's links: what it links to (`outgoing`; document_id null for a broken link) "
    "and which documents link to it (`backlinks`, with the line).",
    arguments({"kb": kb(), "document_id": DOCUMENT_REF}, ["kb", "document_id"]),
    obj(
        {
            "document_id": STR,
            "outgoing": items(
                obj(
                    {
                        "target": STR,
                        "type": {"enum": ["wiki", "markdown"]},
                        "line": INT,
                        "document_id": OPT_STR,
                        "relative_path": OPT_STR,
                        "ambiguous": BOOL,
                    }
                )
            ),
            "backlinks": items(
                obj(
                    {
                        "document_id": STR,
                        "path": STR,
                        "relative_path": STR,
                        "line": INT,
                        "target": STR,
                    }
                )
            ),
        }
    ),
    READS,
)
def get_links(client: Client, args: JSON) -> JSON:
    body = client.get(doc_path(client, args, "/links"))
    return {k: body[k] for k in ("document_id", "outgoing", "backlinks")}


@tool(
    "list_tags",
    "List tags",
    "The tags used in a knowledge base (frontmatter and inline #tags), most used first, "
    "with how many documents carry each. Filter a search by tags with search's `tags`.",
    arguments({"kb": kb()}, ["kb"]),
    obj({"tags": items(obj({"tag": STR, "count": INT}))}),
    READS,
)
def list_tags(client: Client, args: JSON) -> JSON:
    return {"tags": client.get(kb_path(client, args, "/tags"))["tags"]}


@tool(
    "list_conflicts",
    "List conflicts",
    "Conflicts to resolve in a knowledge base: copies sync tools left when two devices "
    "changed a file at once (with the document each conflicts with), and documents holding "
    "git merge markers.",
    arguments({"kb": kb()}, ["kb"]),
    obj(
        {
            "conflicts": items(
                obj(
                    {
                        "kind": {"enum": ["sync_copy", "merge_markers"]},
                        "tool": STR,
                        "path": STR,
                        "relative_path": STR,
                        "conflicts_with": STR,
                        "document_id": OPT_STR,
                    }
                )
            )
        }
    ),
    READS,
)
def list_conflicts(client: Client, args: JSON) -> JSON:
    return {"conflicts": client.get(kb_path(client, args, "/conflicts"))["conflicts"]}


@tool(
    "list_skipped",
    "List skipped files",
    "Files in a knowledge base's folder that are not indexed, and why (too large, not "
    "UTF-8, unreadable, ...), sorted by path.",
    arguments({"kb": kb()}, ["kb"]),
    obj({"items": items(obj({"relative_path": STR, "path": STR, "reason": STR}))}),
    READS,
)
def list_skipped(client: Client, args: JSON) -> JSON:
    return {"items": client.get(kb_path(client, args, "/skipped"))["items"]}


@tool(
    "status",
    "Daemon status",
    "cofferd's state: version, each knowledge base (documents, skipped files, indexing "
    "progress, problems), the watcher and the queue.",
    arguments({}),
    obj(
        {
            "version": STR,
            "knowledge_bases": items(ANY_OBJ),
            "watcher": ANY_OBJ,
            "queue_depth": INT,
            "startup_reconcile_done": BOOL,
        },
        ["knowledge_bases", "watcher", "queue_depth", "startup_reconcile_done"],
    ),
    READS,
)
def status(client: Client, args: JSON) -> JSON:
    return dict(client.get("/api/v1/status"))


@tool(
    "metrics",
    "Knowledge base metrics",
    "A knowledge base's counts and sizes: documents, chunks, documents still owing vectors "
    "or degraded to keyword search, enabled modes, bytes on disk.",
    arguments({"kb": kb()}, ["kb"]),
    obj(
        {
            "documents": INT,
            "chunks": INT,
            "documents_degraded": INT,
            "embed_pending": INT,
            "modes": STRS,
            "default_mode": STR,
            "disk_bytes": INT,
        },
        ["documents", "chunks", "documents_degraded", "modes", "disk_bytes"],
    ),
    READS,
)
def metrics(client: Client, args: JSON) -> JSON:
    return dict(client.get(kb_path(client, args, "/metrics")))


@tool(
    "list_trash",
    "List the trash",
    "Documents deleted from a knowledge base, newest first, each restorable with "
    "restore_document (by its trash `id`) until `expires_at`.",
    arguments({"kb": kb()}, ["kb"]),
    obj(
        {
            "retention_days": INT,
            "items": items(
                obj(
                    {
                        "id": STR,
                        "document_id": STR,
                        "relative_path": STR,
                        "title": STR,
                        "deleted_at": STR,
                        "expires_at": STR,
                        "has_original": BOOL,
                    }
                )
            ),
        }
    ),
    READS,
)
def list_trash(client: Client, args: JSON) -> JSON:
    body = client.get(kb_path(client, args, "/trash"))
    return {"retention_days": body["retention_days"], "items": body["items"]}


# --- writing ---------------------------------------------------------------------------


@tool(
    "add_document",
    "Add a document",
    "Add a document to a knowledge base: either `content` (Markdown, not empty; give a "
    "`title`) to record what you learned, or `file_path` (an absolute path on this "
    "machine: PDF, Word, PowerPoint, Excel, HTML, ...) to convert a file. Answers the "
    "document's id, path and content_sha256.",
    arguments(
        {
            "kb": kb("the knowledge base to add to"),
            "content": string(
                "the Markdown to record (instead of file_path)", min_length=1, nullable=True
            ),
            "title": string("the title, for content", min_length=1, max_length=500, nullable=True),
            "file_path": string(
                "an absolute path of a file to convert (instead of content)",
                min_length=1,
                max_length=4096,
                nullable=True,
            ),
        },
        ["kb"],
    ),
    INGESTED,
    Hints(read_only=False, destructive=False, idempotent=False, open_world=True),
)
def add_document(client: Client, args: JSON) -> JSON:
    content, file_path = args.get("content"), args.get("file_path")
    if (content is None) == (file_path is None):
        raise ArgumentError("give exactly one of `content` and `file_path`")
    body: JSON = (
        {"source_path": file_path, "track_source": False}
        if file_path is not None
        else {"content": content, "title": args.get("title")}
    )
    return ingested(client.post(kb_path(client, args, "/documents"), body))


@tool(
    "edit_document",
    "Edit a document",
    "Replace a document's Markdown with `content` (the whole new text, not empty; a body "
    "alone keeps the file's frontmatter). `expected_sha256` is required: the "
    "content_sha256 of the version you read with get_document (list_documents and search "
    "results' documents carry it too). If the user changed the document since, the edit is "
    "refused with DOCUMENT_CHANGED: read it again and redo the edit. Answers the new "
    "content_sha256, path and id.",
    arguments(
        {
            "kb": kb(),
            "document_id": DOCUMENT_REF,
            "content": string("the document's whole new Markdown", min_length=1),
            "expected_sha256": string(
                "content_sha256 of the version this edit is based on (from get_document)",
                pattern=SHA256,
            ),
        },
        ["kb", "document_id", "content", "expected_sha256"],
    ),
    DOCUMENT,
    Hints(read_only=False, destructive=True, idempotent=True, open_world=False),
)
def edit_document(client: Client, args: JSON) -> JSON:
    if not args["content"].strip():
        raise ArgumentError("`content` must not be blank: to remove a document use delete_document")
    body = {"content": args["content"], "expected_sha256": args["expected_sha256"]}
    return summary(client.request("PUT", doc_path(client, args), body))


@tool(
    "delete_document",
    "Delete a document",
    "Move a document (its Markdown file and a converted document's original) to the "
    "knowledge base's trash. It can be restored with restore_document until the trash "
    "entry expires (the answer says when, and how).",
    arguments({"kb": kb(), "document_id": DOCUMENT_REF}, ["kb", "document_id"]),
    obj(
        {
            "deleted": DOCUMENT,
            "trash": obj({"id": STR, "expires_at": STR, "restore": STR}),
            "restore_with": {**STR, "description": "the restore_document call that brings it back"},
        }
    ),
    Hints(read_only=False, destructive=True, idempotent=True, open_world=False),
)
def delete_document(client: Client, args: JSON) -> JSON:
    doc = summary(client.get(doc_path(client, args)))
    ref = {**args, "document_id": doc["id"]}  # the very document read, whatever named it
    body = client.request("DELETE", doc_path(client, ref))
    trash = body["trash"]
    restore = f'restore_document(kb="{args["kb"]}", trash_id="{trash["id"]}")'
    return {
        "deleted": doc,
        "trash": {k: trash[k] for k in ("id", "expires_at", "restore")},
        "restore_with": restore,
    }


@tool(
    "restore_document",
    "Restore a deleted document",
    "Bring a deleted document back from the trash to where it was (see list_trash). "
    "Refused with PATH_OCCUPIED when a file now sits at that path: nothing is overwritten.",
    arguments(
        {
            "kb": kb(),
            "trash_id": string(
                "the trash entry's id (from delete_document or list_trash)",
                min_length=1,
                max_length=200,
            ),
        },
        ["kb", "trash_id"],
    ),
    obj({"restored": DOCUMENT}),
    Hints(read_only=False, destructive=False, idempotent=True, open_world=False),
)
def restore_document(client: Client, args: JSON) -> JSON:
    ref = urllib.parse.quote(args["trash_id"], safe="")
    body = client.post(kb_path(client, args, f"/trash/{ref}/restore"))
    return {"restored": summary(body["restored"])}


@tool(
    "reindex",
    "Reindex a knowledge base",
    "Scan a knowledge base's folder again and bring the index in line with its files "
    "(cofferd watches the folder, so this is rarely needed). Answers the counts and the "
    "skipped files.",
    arguments({"kb": kb()}, ["kb"]),
    obj(
        {
            "scanned": INT,
            "documents_added": INT,
            "documents_updated": INT,
            "documents_unchanged": INT,
            "documents_removed": INT,
            "documents_skipped": INT,
            "documents_degraded": INT,
            "skipped": {"type": "array"},
        }
    ),
    Hints(read_only=False, destructive=False, idempotent=True, open_world=False),
)
def reindex(client: Client, args: JSON) -> JSON:
    return dict(client.post(kb_path(client, args, "/reindex")))


@tool(
    "reconvert_document",
    "Convert a document again",
    "Convert a converted document's kept original again (e.g. after a converter upgrade). "
    "Refused with RECONVERSION_BLOCKED once the document was edited: edits are never "
    "overwritten.",
    arguments({"kb": kb(), "document_id": DOCUMENT_REF}, ["kb", "document_id"]),
    INGESTED,
    Hints(read_only=False, destructive=False, idempotent=True, open_world=False),
)
def reconvert_document(client: Client, args: JSON) -> JSON:
    return ingested(client.post(doc_path(client, args, "/reconvert")))


@tool(
    "update_source",
    "Refresh from the original file",
    "Convert a document's tracked original file on this machine again, in place (see "
    "check_sources). Refused with RECONVERSION_BLOCKED once edited, SOURCE_MISSING when "
    "the file is gone.",
    arguments({"kb": kb(), "document_id": DOCUMENT_REF}, ["kb", "document_id"]),
    INGESTED,
    Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
)
def update_source(client: Client, args: JSON) -> JSON:
    return ingested(client.post(doc_path(client, args, "/update-source")))


@tool(
    "check_sources",
    "Check original files",
    "Compare the documents added from files on this machine with those files: unchanged, "
    "changed, missing or unreachable; with the knowledge base's auto_update_sources, "
    "changed ones are converted again (never over edits) and listed as updated.",
    arguments({"kb": kb()}, ["kb"]),
    obj(
        {
            k: items(SOURCE_STATE)
            for k in ("unchanged", "changed", "missing", "unreachable", "updated")
        }
    ),
    Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
)
def check_sources(client: Client, args: JSON) -> JSON:
    return dict(client.post(kb_path(client, args, "/check-sources")))
