"""The MCP tools that write: add, edit (only the version the agent read), delete (to the
trash) and restore documents, reindex, and convert originals again."""

from __future__ import annotations

from cofferctl import api
from cofferctl.client import Client
from cofferctl.mcp.schema import JSON, SHA256, ArgumentError, arguments, kb, string
from cofferctl.mcp.shapes import (
    DOCUMENT,
    DOCUMENT_REF,
    INGESTED,
    INT,
    SOURCE_STATE,
    STR,
    ingested,
    items,
    obj,
    summary,
)
from cofferctl.mcp.tool_model import Catalog, Hints

WRITE = Catalog()


@WRITE.tool(
    "add_document",
    "Add a document",
    "Add a document to a knowledge base: either `content` (Markdown, not empty; give a "
    "`title`) to record what you learned, or `file_path` (an absolute path on this "
    "machine: PDF, Word, PowerPoint, Excel, HTML, ...) to convert a file. Its file is named "
    "after its title, in `folder` (default: the knowledge base's add_folder setting). "
    "Answers the document's id, path and content_sha256.",
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
            "folder": string(
                "the knowledge base's folder to add it to, like `Inbox` or `areas/cooking` "
                '("" its top; default: the knowledge base\'s add_folder setting)',
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
    if args.get("folder") is not None:
        body["folder"] = args["folder"]
    return ingested(api.add_document(client, args["kb"], body))


@WRITE.tool(
    "edit_document",
    "Edit a document",
    "Replace a document's Markdown with `content` (the whole new text, not empty; a body "
    "alone keeps the file's frontmatter). `expected_sha256` is required: the "
    "content_sha256 of the version you read with get_document (list_documents carries it "
    "too). If the user changed the document since, the edit is "
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
    doc = api.document(client, args["kb"], args["document_id"])  # read loosely; written exactly
    return summary(api.replace_document(client, args["kb"], doc["id"], body))


@WRITE.tool(
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
    doc = summary(api.document(client, args["kb"], args["document_id"]))
    # the very document read, whatever named it
    body = api.delete_document(client, args["kb"], doc["id"])
    trash = body["trash"]
    restore = f'restore_document(kb="{args["kb"]}", trash_id="{trash["id"]}")'
    return {
        "deleted": doc,
        "trash": {k: trash[k] for k in ("id", "expires_at", "restore")},
        "restore_with": restore,
    }


@WRITE.tool(
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
    body = api.restore(client, args["kb"], args["trash_id"])
    return {"restored": summary(body["restored"])}


@WRITE.tool(
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
            "documents_converting": INT,
            "skipped": {"type": "array"},
        }
    ),
    Hints(read_only=False, destructive=False, idempotent=True, open_world=False),
)
def reindex(client: Client, args: JSON) -> JSON:
    return api.reindex(client, args["kb"])


@WRITE.tool(
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
    return ingested(api.reconvert(client, args["kb"], args["document_id"]))


@WRITE.tool(
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
    return ingested(api.update_source(client, args["kb"], args["document_id"]))


@WRITE.tool(
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
    return api.check_sources(client, args["kb"])
