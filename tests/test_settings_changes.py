"""A settings change never holds the command (issue 36): the pass over every document it
needs runs in the background, search says its answer may be incomplete meanwhile, and a
second change while the pass runs supersedes it without losing either setting."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.daemon import Daemon, wait_for
from tests.helpers import write

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
