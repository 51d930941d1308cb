"""A settings change never holds the command (issue 36): the pass over every document it
needs runs in the background, search says its answer may be incomplete meanwhile, and a
second change while the pass runs supersedes it without losing either setting."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import write

NOTES = 1500


def search(d: Daemon, kb: str, query: str) -> dict[str, Any]:
    answer: dict[str, Any] = d.client.post(d.client.kb(kb, "/search"), {"query": query})
    return answer


def test_a_rechunk_runs_in_the_background_and_a_later_change_supersedes_it(
    daemon: Daemon,
) -> None:
    d = daemon
    kb = "big-" + uuid.uuid4().hex[:6]
    d.client.post("/api/v1/knowledge_bases", {"name": kb})
    for n in range(NOTES):
        body = "\n\n".join(f"paragraph {p} of note {n}: " + "words " * 40 for p in range(6))
        write(d.docs(kb) / f"n{n // 100}" / f"note{n}.md", f"# Note {n}\n\n{body}\n")
    wait_for(lambda: "indexing" not in search(d, kb, "paragraph"), 180, 0.2)

    started = time.monotonic()
    first = d.client.request("PATCH", d.client.kb(kb), {"config": {"chunk_size": 256}})
    answered_s = time.monotonic() - started
    assert first["reindexing"] == "chunking changed" and first["reindex"] is None
    # answered while the pass it asked for had not ended: search says so
    indexing = search(d, kb, "paragraph")["indexing"]
    assert indexing["because"] == "chunking changed", (indexing, answered_s)

    second = d.client.request("PATCH", d.client.kb(kb), {"config": {"chunk_overlap": 32}})
    assert second["reindexing"] == "chunking changed"
    assert second["config"]["chunk_size"] == 256 and second["config"]["chunk_overlap"] == 32

    wait_for(lambda: "indexing" not in search(d, kb, "paragraph"), 180, 0.2)
    config = d.client.get(d.client.kb(kb))["config"]
    assert config["chunk_size"] == 256 and config["chunk_overlap"] == 32
    # every document is chunked as the KB chunks now: a full pass finds nothing to do
    again = d.client.post(d.client.kb(kb, "/reindex"))
    assert again["documents_updated"] == 0 and again["documents_unchanged"] == NOTES


def test_a_size_limit_lowered_then_raised_drops_and_brings_back_what_it_covers(
    shared_daemon: Daemon,
) -> None:
    """A document indexed under a larger limit leaves the index when the limit falls below
    it (its file is unchanged: it was kept before), and comes back when the limit rises; a
    converted document alike, by its original's size."""
    d = shared_daemon
    kb = "limits-" + uuid.uuid4().hex[:6]
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "config": {"index_formats": ["html"]}})

    def documents() -> list[str]:
        listed = d.client.get(d.client.kb(kb, "/documents"), limit=50)["documents"]
        return sorted(item["relative_path"] for item in listed)

    write(d.docs(kb) / "big.md", "# Big\n\n" + "zqbigword " * 1000)  # ~10 KB
    write(d.docs(kb) / "page.html", "<h1>Page</h1><p>" + "zqpageword " * 300 + "</p>")  # ~3 KB
    write(d.docs(kb) / "small.md", "# Small\n\nfine\n")
    wait_for(lambda: documents() == ["big.md", "page.html", "small.md"], 60)
    lowered = d.client.request("PATCH", d.client.kb(kb), {"config": {"max_document_bytes": 1024}})
    assert lowered["reindexing"] == "size limit changed"
    wait_for(lambda: documents() == ["small.md"], 60)
    d.client.request("PATCH", d.client.kb(kb), {"config": {"max_document_bytes": 1024 * 1024}})
    wait_for(lambda: documents() == ["big.md", "page.html", "small.md"], 60)
