"""A real MCP client spawns `cofferctl mcp` over stdio against a real daemon."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp_types import Implementation

from tests.daemon import BIN, Daemon


def params(socket: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(BIN / "cofferctl"),
        args=["mcp"],
        env={"COFFER_SOCKET": str(socket), "PATH": "/usr/bin:/bin"},
    )


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    data = result.structured_content
    return dict(data.get("result", data))  # a dict result arrives wrapped in "result"


async def error_of(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return " ".join(getattr(c, "text", "") for c in result.content)


async def test_an_agent_reads_and_writes_through_the_daemon(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    d = shared_daemon
    kb = "mcp-" + uuid.uuid4().hex[:6]
    d.client.post("/api/v1/knowledge_bases", {"name": kb})
    info = Implementation(name="test-agent", version="1.0")
    async with Client(params(d.socket), client_info=info) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools == {
            "search", "grep", "list_knowledge_bases", "list_documents", "get_document",
            "add_document", "edit_document", "delete_document", "check_sources",
            "get_links", "list_tags", "list_conflicts",
        }  # fmt: skip
        kbs = await call(client, "list_knowledge_bases")
        assert kb in [k["name"] for k in kbs["knowledge_bases"]]

        added = await call(
            client, "add_document", kb=kb, title="Deploy notes",
            content="# Deploy notes\n\nThe staging cluster uses blue-green deploys.",
        )  # fmt: skip
        doc_id = added["document"]["id"]
        found = await call(client, "search", kb=kb, query="blue-green staging")
        assert found["passages"][0]["document_id"] == doc_id
        hits = await call(client, "grep", kb=kb, pattern=r"blue-\w+")
        assert hits["hits"][0]["document_id"] == doc_id

        await call(
            client, "edit_document", kb=kb, document_id=doc_id,
            content="# Deploy notes\n\nWe moved to canary releases.",
        )  # fmt: skip
        assert (await call(client, "search", kb=kb, query="canary"))["passages"]
        assert not (await call(client, "search", kb=kb, query="blue-green"))["passages"]
        doc = await call(client, "get_document", kb=kb, document_id=doc_id)
        assert "canary" in doc["content"] and doc["source_mode"] == "edited"
        listing = await call(client, "list_documents", kb=kb, title_filter="deploy")
        assert listing["total"] == 1

        source = d.agent_root / "report.html"
        source.parent.mkdir(exist_ok=True)
        source.write_text("<h1>Report</h1><p>quarterly falcon numbers</p>")
        converted = await call(client, "add_document", kb=kb, file_path=str(source))
        assert "source_path" not in converted["document"]["metadata"]  # agents never track
        assert (await call(client, "search", kb=kb, query="falcon"))["passages"]

        await call(client, "delete_document", kb=kb, document_id=doc_id)
        assert (await call(client, "list_documents", kb=kb))["total"] == 1

        assert "KB_NOT_FOUND" in await error_of(client, "search", kb="no-such-kb", query="x")
        assert "DOCUMENT_NOT_FOUND" in await error_of(
            client, "get_document", kb=kb, document_id="01JDQ3V6N4Z8T5Y2X7W9R1K0MB"
        )

    events = d.client.get("/api/v1/audit", kb=kb)["events"]
    writes = [e for e in events if e["event"].startswith("kb_document")]
    assert {e["actor"] for e in writes} == {"agent:test-agent"}
    assert {e["event"] for e in writes} >= {
        "kb_document_ingested", "kb_document_updated", "kb_document_deleted"
    }  # fmt: skip
    calls = d.client.get("/api/v1/mcp_invocations", limit=100)["invocations"]
    mine = [c for c in calls if c["client"] == "agent:test-agent"]
    assert {c["tool"] for c in mine} >= {"add_document", "search", "edit_document"}
    assert {"ok", "KB_NOT_FOUND", "DOCUMENT_NOT_FOUND"} <= {c["outcome"] for c in mine}


async def test_tools_say_how_to_start_a_stopped_daemon(tmp_path: Path) -> None:
    async with Client(params(tmp_path / "nobody.sock")) as client:
        message = await error_of(client, "search", query="anything")
    assert "not running" in message and "cofferd" in message


@pytest.mark.parametrize("module", ["mcp", "cofferd", "aiohttp", "pydantic"])
def test_the_rest_of_cofferctl_does_not_import(module: str) -> None:
    import subprocess
    import sys

    # cofferd.locations (standard library only) is the one module shared with the daemon
    shared = ("cofferd", "cofferd.locations")
    code = (
        f"import sys, cofferctl.cli; print(any(m == {module!r} or m.startswith({module!r} + '.')"
        f" for m in sys.modules if m not in {shared!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
