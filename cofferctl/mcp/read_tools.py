"""The MCP tools that only read: search, grep, documents, links, tags, conflicts, skipped
files, the trash, status and metrics. Each one that works on a knowledge base names it.

Long on purpose: the reading tools together. Each is a schema and a few lines of call and
shape, and their descriptions read best side by side.
"""

from __future__ import annotations

from coffer_kernel.bounds import LIST_LIMIT_MAX, MAX_MATCHES_MAX
from cofferctl import api
from cofferctl.client import Client
from cofferctl.mcp.schema import JSON, arguments, array, boolean, integer, kb, string
from cofferctl.mcp.shapes import (
    ANY_OBJ,
    BOOL,
    DOCUMENT,
    DOCUMENT_REF,
    DOCUMENT_WITH_CONTENT,
    FILTERS,
    INT,
    MODE,
    OPT_STR,
    PAGE,
    PASSAGE,
    QUERY,
    STR,
    STRS,
    TOP_K,
    items,
    obj,
    paged,
    passage,
    search_request,
    summary,
)
from cofferctl.mcp.tool_model import Catalog, Hints

PAGED = "; a page at a time by limit and offset (`remaining`: how many come after it)."


def page_arguments(noun: str) -> JSON:
    """The limit and offset a paged tool takes."""
    return {
        "limit": integer(f"{noun} per page", minimum=1, maximum=LIST_LIMIT_MAX, default=50),
        "offset": integer(f"{noun} to skip", minimum=0, default=0),
    }


def page_of(args: JSON) -> tuple[int, int]:
    return args.get("limit", 50), args.get("offset", 0)


READS = Hints(read_only=True, destructive=False, idempotent=True, open_world=False)
READ = Catalog()
INDEXING: JSON = {
    **obj({"done": INT, "total": {"type": ["integer", "null"]}}),
    "description": "only while the knowledge base is still being indexed: the passages may "
    "be incomplete (files indexed so far, of `total`; null while they are counted)",
}


@READ.tool(
    "search",
    "Search a knowledge base",
    "Search one knowledge base for passages about a topic (ranked; the knowledge base's own "
    "mode: keyword, vector or hybrid, unless `mode` asks for another). Use this first to "
    "find what the user knows. Each "
    "passage names its document (document_id, relative_path, uri) and lines, for citing. "
    "Optional filters narrow to a folder, tags, an update period or a source mode. To "
    "search several or all knowledge bases at once, use search_all. While the knowledge "
    "base is still being indexed, `indexing` says how far it is: search again later for "
    "what may be missing.",
    arguments(
        {
            "kb": kb("the knowledge base to search"),
            "query": QUERY,
            "top_k": TOP_K,
            "mode": MODE,
            **FILTERS,
        },
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
            "indexing": INDEXING,
            "passages": items(PASSAGE),
        },
        ["knowledge_base", "mode", "fallback", "passages"],
    ),
    READS,
)
def search(client: Client, args: JSON) -> JSON:
    body = api.search(client, args["kb"], search_request(args))
    indexing = {"indexing": body["indexing"]} if body.get("indexing") else {}
    return {
        "knowledge_base": args["kb"],
        "mode": body["mode"],
        "fallback": body.get("fallback"),
        **indexing,
        "passages": [passage(p, args["kb"]) for p in body["passages"]],
    }


@READ.tool(
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
                kb("a knowledge base"),
                min_items=1,
                max_items=100,
            ),
            "top_k": TOP_K,
            "mode": MODE,
            **FILTERS,
        },
        ["query"],
    ),
    obj(
        {
            "knowledge_bases": {
                "type": "object",
                "description": "how each knowledge base searched answered",
                "additionalProperties": obj(
                    {"mode": STR, "fallback": OPT_STR, "indexing": INDEXING}, ["mode", "fallback"]
                ),
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
    body = api.search_all(client, request)
    return {
        "knowledge_bases": body["knowledge_bases"],
        "mode": body["mode"],
        "passages": [passage(p, None) for p in body["passages"]],
    }


@READ.tool(
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
                "stop after this many matching lines",
                minimum=1,
                maximum=MAX_MATCHES_MAX,
                default=50,
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
                        "line_number": {
                            **INT,
                            "description": "from 1; in a converted PDF, slide deck or "
                            "workbook, the line within its page (slide, sheet)",
                        },
                        "line": STR,
                        "page": {**INT, "description": "that page (slide, sheet), from 1"},
                        "location": {
                            **STR,
                            "description": "as the document names it: `page iv`, `slide 7`, "
                            "`sheet Budget`",
                        },
                    },
                    ["document_id", "path", "relative_path", "line_number", "line"],
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
    body = api.grep(client, args["kb"], request)
    return {"hits": body["hits"], "truncated": body["truncated"]}


@READ.tool(
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
    kbs = api.knowledge_bases(client)["knowledge_bases"]
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


@READ.tool(
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
            "limit": integer("documents per page", minimum=1, maximum=LIST_LIMIT_MAX, default=50),
            "offset": integer("documents to skip", minimum=0, default=0),
        },
        ["kb"],
    ),
    obj({"documents": items(DOCUMENT), "total": INT, "limit": INT, "offset": INT}),
    READS,
)
def list_documents(client: Client, args: JSON) -> JSON:
    limit, offset = args.get("limit", 50), args.get("offset", 0)
    body = api.documents(client, args["kb"], q=args.get("title_filter"), limit=limit, offset=offset)
    return {
        "documents": [summary(d) for d in body["documents"]],
        "total": body["total"],
        "limit": limit,
        "offset": offset,
    }


@READ.tool(
    "get_document",
    "Read a document",
    "Read one document: its title, tags, frontmatter and whole Markdown body, with its "
    "content_sha256 (the version edit_document needs as expected_sha256).",
    arguments({"kb": kb(), "document_id": DOCUMENT_REF}, ["kb", "document_id"]),
    DOCUMENT_WITH_CONTENT,
    READS,
)
def get_document(client: Client, args: JSON) -> JSON:
    return summary(api.document(client, args["kb"], args["document_id"]), with_content=True)


@READ.tool(
    "get_links",
    "Links and backlinks",
    "A document's links: what it links to (`outgoing`: any file of the KB, a document or "
    "another file such as an image (`kind`); relative_path null for a broken link, and for one "
    'leading out of the KB\'s folder (`kind` "outside")) and '
    "which documents link to it (`backlinks`, with the line)" + PAGED,
    arguments(
        {"kb": kb(), "document_id": DOCUMENT_REF, **page_arguments("backlinks")},
        ["kb", "document_id"],
    ),
    obj(
        {
            "document_id": STR,
            "outgoing": items(
                obj(
                    {
                        "target": STR,
                        "type": {"enum": ["wiki", "markdown", "definition"]},
                        "line": INT,
                        "document_id": OPT_STR,
                        "relative_path": OPT_STR,
                        "kind": {"enum": ["document", "file", "outside", None]},
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
            **PAGE,
        }
    ),
    READS,
)
def get_links(client: Client, args: JSON) -> JSON:
    limit, offset = page_of(args)
    body = api.document_links(client, args["kb"], args["document_id"], limit, offset)
    found = {k: body[k] for k in ("document_id", "outgoing", "backlinks")}
    return {**found, **paged(body, len(body["backlinks"]))}


@READ.tool(
    "get_broken_links",
    "Broken links",
    "Every link of a knowledge base that leads nowhere: to no file (`missing-file`; images, "
    "PDFs and other files are targets too), or to a note without the heading or block it "
    "names (`missing-heading` with the nearest heading as `suggestion`, `missing-block`)" + PAGED,
    arguments({"kb": kb(), **page_arguments("broken links")}, ["kb"]),
    obj(
        {
            "links": items(
                obj(
                    {
                        "relative_path": STR,
                        "line": INT,
                        "target": STR,
                        "type": {"enum": ["wiki", "markdown", "definition"]},
                        "problem": {"enum": ["missing-file", "missing-heading", "missing-block"]},
                        "message": STR,
                        "suggestion": OPT_STR,
                    }
                )
            ),
            **PAGE,
        }
    ),
    READS,
)
def get_broken_links(client: Client, args: JSON) -> JSON:
    limit, offset = page_of(args)
    body = api.broken_links(client, args["kb"], limit, offset)
    found = body["links"]
    fields = ("relative_path", "line", "target", "type", "problem", "message")
    return {
        "links": [{**{f: link[f] for f in fields}, "suggestion": link.get("suggestion")}
                  for link in found],
        **paged(body, len(found)),
    }  # fmt: skip


@READ.tool(
    "list_tags",
    "List tags",
    "The tags used in a knowledge base (frontmatter and inline #tags), most used first, "
    "with how many documents carry each. Filter a search by tags with search's `tags`" + PAGED,
    arguments({"kb": kb(), **page_arguments("tags")}, ["kb"]),
    obj({"tags": items(obj({"tag": STR, "count": INT})), **PAGE}),
    READS,
)
def list_tags(client: Client, args: JSON) -> JSON:
    body = api.tags(client, args["kb"], *page_of(args))
    return {"tags": body["tags"], **paged(body, len(body["tags"]))}


@READ.tool(
    "list_conflicts",
    "List conflicts",
    "Conflicts to resolve in a knowledge base: copies sync tools left when two devices "
    "changed a file at once (with the document each conflicts with), and documents holding "
    "git merge markers; paged by limit and offset (`total` counts them all).",
    arguments(
        {
            "kb": kb(),
            "limit": integer("conflicts per page", minimum=1, maximum=LIST_LIMIT_MAX, default=50),
            "offset": integer("conflicts to skip", minimum=0, default=0),
        },
        ["kb"],
    ),
    obj(
        {
            **PAGE,
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
            ),
        }
    ),
    READS,
)
def list_conflicts(client: Client, args: JSON) -> JSON:
    body = api.conflicts(client, args["kb"], *page_of(args))
    return {"conflicts": body["conflicts"], **paged(body, len(body["conflicts"]))}


@READ.tool(
    "list_skipped",
    "List skipped files",
    "Files in a knowledge base's folder that are not indexed, and why (too large, not "
    "UTF-8, unreadable, ...), sorted by path" + PAGED,
    arguments({"kb": kb(), **page_arguments("files")}, ["kb"]),
    obj({"items": items(obj({"relative_path": STR, "path": STR, "reason": STR})), **PAGE}),
    READS,
)
def list_skipped(client: Client, args: JSON) -> JSON:
    body = api.skipped(client, args["kb"], *page_of(args))
    return {"items": body["items"], **paged(body, len(body["items"]))}


@READ.tool(
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
    return api.status(client)


@READ.tool(
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
    return api.metrics(client, args["kb"])


@READ.tool(
    "list_trash",
    "List the trash",
    "Documents deleted from a knowledge base, newest first, each restorable with "
    "restore_document (by its trash `id`) until `expires_at`" + PAGED,
    arguments({"kb": kb(), **page_arguments("entries")}, ["kb"]),
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
            **PAGE,
        }
    ),
    READS,
)
def list_trash(client: Client, args: JSON) -> JSON:
    body = api.trash(client, args["kb"], *page_of(args))
    found = {"retention_days": body["retention_days"], "items": body["items"]}
    return {**found, **paged(body, len(body["items"]))}
