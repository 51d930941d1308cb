"""cofferd's HTTP API as cofferctl calls it: one function per endpoint, named for what it
does, over `client.Client`. The one place in cofferctl that spells the API's paths: the
commands, the MCP tools and resources and the language server call these functions
(tests/test_cofferctl.py holds every path they produce to a route of the daemon and an
operation of docs/openapi.yaml). Each answer is the daemon's JSON object as it came.

Standard library only and cheap to import: every command imports it. A paged list asked for
without a `limit` is read whole, page after page (`_every`): what the language server needs.
"""

from __future__ import annotations

import urllib.parse

from coffer_kernel.bounds import LIST_LIMIT_MAX, PATHS_LIMIT_MAX

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: ~3 ms of each start
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from cofferctl.client import Client

    JSON = dict[str, Any]

PREFIX = "/api/v1"


def segment(value: str) -> str:
    """`value` as one path segment, whatever it holds (`/`, `%`, `?`)."""
    return urllib.parse.quote(value, safe="")


def kb_path(name: str, rest: str = "") -> str:
    """The path of the knowledge base `name`, then `rest`."""
    return f"{PREFIX}/knowledge_bases/{segment(name)}{rest}"


def document_path(kb: str, ref: str, rest: str = "") -> str:
    """The path of a document by id, id prefix or path (one segment), then `rest`."""
    return kb_path(kb, f"/documents/{segment(ref)}{rest}")


def _get(client: Client, path: str, **query: Any) -> JSON:
    answer: JSON = client.get(path, **query)
    return answer


def _page_or_every(
    client: Client, path: str, lists: tuple[str, ...], limit: int | None, offset: int | None,
    most: int = LIST_LIMIT_MAX, **query: Any,
) -> JSON:  # fmt: skip
    if limit is None and offset is None:
        return _every(client, path, lists, most, **query)
    return _get(client, path, limit=limit, offset=offset, **query)


def _every(client: Client, path: str, lists: tuple[str, ...], most: int, **query: Any) -> JSON:
    """Every page of a paged list as one answer (the first page's, its `lists` whole and
    `limit` its `total`). When the KB's `document_changes` moves between two pages, the list
    is read again from the start (three times at most: then as it was read)."""
    for _ in range(3):
        whole = dict(_get(client, path, limit=most, offset=0, **query))
        offset, moved = most, False
        while offset < whole.get("total", 0) and not moved:  # a daemon before paging: whole
            page = _get(client, path, limit=most, offset=offset, **query)
            moved = page.get("document_changes") != whole.get("document_changes")
            for key in lists:
                whole[key] = whole[key] + page[key]
            offset += most
        if not moved:
            break
    if "total" in whole:
        whole["limit"] = max(1, whole["total"])
    return whole


def _post(client: Client, path: str, body: JSON | None = None) -> JSON:
    answer: JSON = client.post(path, body)
    return answer


def _send(client: Client, method: str, path: str, body: JSON | None = None) -> JSON:
    answer: JSON = client.request(method, path, body)
    return answer


# -- the daemon ----------------------------------------------------------------------------


def status(client: Client) -> JSON:
    return _get(client, f"{PREFIX}/status")


def document_changes(client: Client) -> JSON:
    """Each knowledge base's folder and its count of document changes (cheap to poll)."""
    return _get(client, f"{PREFIX}/document_changes")


def audit(client: Client, kb: str | None = None, limit: int | None = None) -> JSON:
    return _get(client, f"{PREFIX}/audit", kb=kb, limit=limit)


def mcp_invocations(client: Client, limit: int | None = None) -> JSON:
    return _get(client, f"{PREFIX}/mcp_invocations", limit=limit)


def record_mcp_invocation(client: Client, record: JSON) -> JSON:
    return _post(client, f"{PREFIX}/mcp_invocations", record)


def open_web(client: Client, body: JSON) -> JSON:
    """Start the web page if it is off; its URL with a new one-time key."""
    return _post(client, f"{PREFIX}/web", body)


def close_web(client: Client) -> JSON:
    return _send(client, "DELETE", f"{PREFIX}/web")


def search_all(client: Client, body: JSON) -> JSON:
    """A search of several knowledge bases (all of them, or those `body` names)."""
    return _post(client, f"{PREFIX}/search", body)


# -- knowledge bases -----------------------------------------------------------------------


def knowledge_bases(client: Client) -> JSON:
    return _get(client, f"{PREFIX}/knowledge_bases")


def create_knowledge_base(client: Client, body: JSON) -> JSON:
    return _post(client, f"{PREFIX}/knowledge_bases", body)


def attach_knowledge_base(client: Client, name: str, body: JSON) -> JSON:
    return _post(client, kb_path(name, "/attach"), body)


def knowledge_base(client: Client, name: str) -> JSON:
    return _get(client, kb_path(name))


def change_knowledge_base(client: Client, name: str, body: JSON) -> JSON:
    return _send(client, "PATCH", kb_path(name), body)


def delete_knowledge_base(client: Client, name: str) -> JSON:
    return _send(client, "DELETE", kb_path(name))


def set_enabled(client: Client, name: str, enabled: bool) -> JSON:
    verb = "enable" if enabled else "disable"
    return _post(client, f"{PREFIX}/resources/knowledge_base/{segment(name)}/{verb}")


def reindex(client: Client, kb: str) -> JSON:
    return _post(client, kb_path(kb, "/reindex"))


def check_sources(client: Client, kb: str) -> JSON:
    return _post(client, kb_path(kb, "/check-sources"))


def metrics(client: Client, kb: str) -> JSON:
    return _get(client, kb_path(kb, "/metrics"))


def skipped(client: Client, kb: str, limit: int | None = None, offset: int | None = None) -> JSON:
    return _page_or_every(client, kb_path(kb, "/skipped"), ("items",), limit, offset)


def conflicts(client: Client, kb: str, limit: int | None = None, offset: int | None = None) -> JSON:
    return _get(client, kb_path(kb, "/conflicts"), limit=limit, offset=offset)


def tags(client: Client, kb: str, limit: int | None = None, offset: int | None = None) -> JSON:
    return _page_or_every(client, kb_path(kb, "/tags"), ("tags",), limit, offset)


def paths(client: Client, kb: str, limit: int | None = None, offset: int | None = None) -> JSON:
    """The paths of a knowledge base's documents, and of its other files."""
    where = kb_path(kb, "/paths")
    return _page_or_every(client, where, ("paths", "files"), limit, offset, PATHS_LIMIT_MAX)


def note_names(client: Client, kb: str, typed: str) -> JSON:
    """The notes an editor offers for what was typed after `[[`, and the KB's link style."""
    return _get(client, kb_path(kb, "/names"), q=typed)


def backlinks(
    client: Client, kb: str, file: str, limit: int | None = None, offset: int | None = None
) -> JSON:
    """The notes linking to the file at `file` (a note, an image: any file)."""
    where = kb_path(kb, "/backlinks")
    return _page_or_every(client, where, ("backlinks",), limit, offset, file=file)


def broken_links(
    client: Client, kb: str, limit: int | None = None, offset: int | None = None
) -> JSON:
    return _page_or_every(client, kb_path(kb, "/links/broken"), ("links",), limit, offset)


def inspect(client: Client, kb: str, body: JSON) -> JSON:
    """The links of an unsaved note, placed and resolved."""
    return _post(client, kb_path(kb, "/inspect"), body)


def search(client: Client, kb: str, body: JSON) -> JSON:
    return _post(client, kb_path(kb, "/search"), body)


def grep(client: Client, kb: str, body: JSON) -> JSON:
    return _post(client, kb_path(kb, "/grep"), body)


def trash(client: Client, kb: str, limit: int | None = None, offset: int | None = None) -> JSON:
    return _page_or_every(client, kb_path(kb, "/trash"), ("items",), limit, offset)


def restore(client: Client, kb: str, trash_id: str) -> JSON:
    return _post(client, kb_path(kb, f"/trash/{segment(trash_id)}/restore"))


# -- documents -----------------------------------------------------------------------------


def documents(
    client: Client,
    kb: str,
    q: str | None = None,
    limit: int | None = None,
    offset: int | None = None,
) -> JSON:
    return _get(client, kb_path(kb, "/documents"), q=q, limit=limit, offset=offset)


def add_document(client: Client, kb: str, body: JSON) -> JSON:
    """A document from the text or the path `body` gives."""
    return _post(client, kb_path(kb, "/documents"), body)


def upload_document(client: Client, kb: str, file: Path, fields: dict[str, str]) -> JSON:
    """A document from a file of this machine, its bytes sent with the request."""
    answer: JSON = client.upload(kb_path(kb, "/documents"), file, fields)
    return answer


def document(client: Client, kb: str, ref: str, file_text: str | None = None) -> JSON:
    """A document by id, id prefix or path; with `file_text`, the file as it is too."""
    return _get(client, document_path(kb, ref), file_text=file_text)


def replace_document(client: Client, kb: str, ref: str, body: JSON) -> JSON:
    return _send(client, "PUT", document_path(kb, ref), body)


def delete_document(client: Client, kb: str, ref: str) -> JSON:
    return _send(client, "DELETE", document_path(kb, ref))


def document_links(
    client: Client, kb: str, ref: str, limit: int | None = None, offset: int | None = None
) -> JSON:
    """A document's links out and the links to it (those paged by `limit` and `offset`)."""
    where = document_path(kb, ref, "/links")
    return _page_or_every(client, where, ("backlinks",), limit, offset)


def reconvert(client: Client, kb: str, ref: str) -> JSON:
    return _post(client, document_path(kb, ref, "/reconvert"))


def update_source(client: Client, kb: str, ref: str) -> JSON:
    return _post(client, document_path(kb, ref, "/update-source"))
