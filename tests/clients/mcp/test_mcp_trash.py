"""Deleting moves to the trash and says how to restore; restoring never overwrites; the
skipped files and the daemon's version: through the real `mcp` client."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

import coffer_kernel
from tests.support.daemon import Daemon, wait_for
from tests.support.mcp_client import AGENT, call, error_of, new_kb, params


async def test_delete_moves_to_the_trash_and_restore_brings_it_back(
    shared_daemon: Daemon,
) -> None:
    d = shared_daemon
    kb = new_kb(d)
    body = "# Recipe\n\nGrandma's bread.\n"
    doc = d.client.post(d.client.kb(kb, "/documents"), {"content": body})["document"]
    path = Path(doc["path"])
    async with Client(params(d.socket), client_info=AGENT) as client:
        deleted = await call(client, "delete_document", kb=kb, document_id=doc["relative_path"])
        assert deleted["deleted"]["id"] == doc["id"]
        assert deleted["deleted"]["path"] == doc["path"]
        assert deleted["deleted"]["content_sha256"] == doc["content_sha256"]
        trash_id = deleted["trash"]["id"]
        assert trash_id in deleted["restore_with"] and "restore_document" in deleted["restore_with"]
        assert deleted["trash"]["expires_at"] and not path.exists()
        trash = await call(client, "list_trash", kb=kb)
        assert [i["id"] for i in trash["items"]] == [trash_id] and trash["retention_days"] > 0

        restored = await call(client, "restore_document", kb=kb, trash_id=trash_id)
        assert restored["restored"]["id"] == doc["id"]
        assert restored["restored"]["content_sha256"] == doc["content_sha256"]
        assert path.read_text() == body

        again = await call(client, "delete_document", kb=kb, document_id=doc["id"])
        path.write_text("# Recipe\n\nA new note the user wrote since.\n")
        message = await error_of(client, "restore_document", kb=kb, trash_id=again["trash"]["id"])
        assert "PATH_OCCUPIED" in message
        assert "new note" in path.read_text()  # never overwritten
        assert "TRASH_ENTRY_NOT_FOUND" in await error_of(
            client, "restore_document", kb=kb, trash_id="no-such-entry"
        )
    events = {e["event"] for e in d.client.get("/api/v1/audit", kb=kb)["events"]
              if e["actor"] == "agent:test-agent"}  # fmt: skip
    assert "kb_document_deleted" in events


async def test_skipped_files_and_the_version(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    d.client.request("PATCH", d.client.kb(kb), {"config": {"max_document_bytes": 1024}})
    d.docs(kb).mkdir(parents=True, exist_ok=True)
    d.docs(kb).joinpath("big.md").write_text("# Big\n\n" + "word " * 1000)
    d.docs(kb).joinpath("small.md").write_text("# Small\n\nfine\n")
    wait_for(lambda: d.client.get(d.client.kb(kb, "/metrics"))["documents"] == 1)
    async with Client(params(d.socket), client_info=AGENT) as client:
        skipped = await call(client, "list_skipped", kb=kb)
        assert [i["relative_path"] for i in skipped["items"]] == ["big.md"]
        assert skipped["items"][0]["reason"]
        status = await call(client, "status")
        assert status["version"] == coffer_kernel.__version__
