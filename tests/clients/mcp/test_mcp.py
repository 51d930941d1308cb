"""A real MCP client spawns `cofferctl mcp` over stdio against a real daemon."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from tests.support.daemon import BIN, Daemon
from tests.support.helpers import SHARED_WITH_CLI
from tests.support.mcp_client import (
    AGENT,
    PYTHONPATH,
    call,
    error_of,
    invocations,
    new_kb,
    own_agent,
    params,
)


async def test_an_agent_reads_and_writes_through_the_daemon(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    agent = own_agent()
    async with Client(params(d.socket), client_info=agent) as client:
        kbs = await call(client, "list_knowledge_bases")
        mine = next(k for k in kbs["knowledge_bases"] if k["name"] == kb)
        assert mine["enabled"] and "enabled_modes" in mine["settings"]

        added = await call(
            client,
            "add_document",
            kb=kb,
            title="Deploy notes",
            content="# Deploy notes\n\nThe staging cluster uses blue-green deploys.",
        )
        doc = added["document"]
        assert added["status"] == "added" and Path(doc["path"]).is_file()
        assert doc["content_sha256"] == hashlib.sha256(Path(doc["path"]).read_bytes()).hexdigest()
        found = await call(client, "search", kb=kb, query="blue-green staging")
        assert found["knowledge_base"] == kb
        top = found["passages"][0]
        assert top["document_id"] == doc["id"] and top["uri"] == doc["uri"]
        hits = await call(client, "grep", kb=kb, pattern=r"blue-\w+")
        assert hits["hits"][0]["document_id"] == doc["id"]

        edited = await call(
            client,
            "edit_document",
            kb=kb,
            document_id=doc["id"],
            content="# Deploy notes\n\nWe moved to canary releases.",
            expected_sha256=doc["content_sha256"],
        )
        assert edited["id"] == doc["id"] and edited["path"] == doc["path"]
        assert edited["content_sha256"] != doc["content_sha256"]
        assert (await call(client, "search", kb=kb, query="canary"))["passages"]
        assert not (await call(client, "search", kb=kb, query="blue-green"))["passages"]
        read = await call(client, "get_document", kb=kb, document_id=doc["relative_path"])
        assert "canary" in read["content"] and read["source_mode"] == "edited"
        assert read["content_sha256"] == edited["content_sha256"]
        listing = await call(client, "list_documents", kb=kb, title_filter="deploy")
        assert listing["total"] == 1 and listing["documents"][0]["id"] == doc["id"]

        source = d.agent_root / "report.html"
        source.parent.mkdir(exist_ok=True)
        source.write_text("<h1>Report</h1><p>quarterly falcon numbers</p>")
        converted = await call(client, "add_document", kb=kb, file_path=str(source))
        assert converted["document"]["source_mode"] == "converted"
        assert (await call(client, "search", kb=kb, query="falcon"))["passages"]
        every = await call(client, "search_all", query="falcon", knowledge_bases=[kb])
        assert every["passages"][0]["knowledge_base"] == kb and kb in every["knowledge_bases"]

        assert "KB_NOT_FOUND" in await error_of(client, "search", kb="no-such-kb", query="x")
        assert "DOCUMENT_NOT_FOUND" in await error_of(
            client, "get_document", kb=kb, document_id="01JDQ3V6N4Z8T5Y2X7W9R1K0MB"
        )

    events = d.client.get("/api/v1/audit", kb=kb)["events"]
    writes = [e for e in events if e["event"].startswith("kb_document")]
    assert {e["actor"] for e in writes} == {f"agent:{agent.name}"}
    assert {e["event"] for e in writes} >= {"kb_document_ingested", "kb_document_updated"}
    made = invocations(d, agent)
    assert len(made) == 14 and {outcome for _, outcome in made[:-2]} == {"ok"}
    assert {"add_document", "search", "edit_document"} <= {tool for tool, _ in made}
    assert made[-2:] == [("search", "KB_NOT_FOUND"), ("get_document", "DOCUMENT_NOT_FOUND")]


async def test_unknown_or_missing_arguments_are_refused_by_name(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    d.client.post(d.client.kb(kb, "/documents"), {"content": "# Bread\n\nsourdough"})
    agent = own_agent()
    async with Client(params(d.socket), client_info=agent) as client:
        message = await error_of(client, "search", knowledge_base="nosuch", query="bread")
        assert "VALIDATION_ERROR" in message and "`knowledge_base`" in message
        assert "`kb` is required" in message  # no silent default knowledge base
        message = await error_of(client, "search", kb=kb, query="bread", top_k=1000)
        assert "`top_k` must be at most 100" in message
        message = await error_of(client, "list_documents", kb="Not A Name")
        assert "`kb` must match" in message
        message = await error_of(client, "add_document", kb=kb, title="nothing")
        assert "exactly one of `content` and `file_path`" in message
        assert "`content` must not be empty" in await error_of(
            client, "add_document", kb=kb, content=""
        )
    tools = ["search", "search", "list_documents", "add_document", "add_document"]
    assert invocations(d, agent) == [(tool, "VALIDATION_ERROR") for tool in tools]


async def test_edits_name_the_version_they_change(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    original = "# Plan\n\nShip on Friday.\n"
    doc = d.client.post(d.client.kb(kb, "/documents"), {"content": original})["document"]
    async with Client(params(d.socket), client_info=AGENT) as client:
        message = await error_of(
            client,
            "edit_document",
            kb=kb,
            document_id=doc["id"],
            content="# Plan\n\nShip on Monday.\n",
        )
        assert "`expected_sha256` is required" in message
        for empty in ("", "  \n"):
            message = await error_of(
                client,
                "edit_document",
                kb=kb,
                document_id=doc["id"],
                content=empty,
                expected_sha256=doc["content_sha256"],
            )
            assert "VALIDATION_ERROR" in message and "`content`" in message

        Path(doc["path"]).write_text("# Plan\n\nThe user moved it to Thursday.\n")
        from tests.support.daemon import wait_for

        wait_for(
            lambda: (
                d.client.get(d.client.kb(kb, f"/documents/{doc['id']}"))["content_sha256"]
                != doc["content_sha256"]
            )
        )
        message = await error_of(
            client,
            "edit_document",
            kb=kb,
            document_id=doc["id"],
            content="# Plan\n\nShip on Monday.\n",
            expected_sha256=doc["content_sha256"],
        )
        assert "DOCUMENT_CHANGED" in message
    assert "Thursday" in Path(doc["path"]).read_text()  # the user's edit stands


async def test_tools_say_how_to_start_a_stopped_daemon(tmp_path: Path) -> None:
    async with Client(params(tmp_path / "nobody.sock")) as client:
        message = await error_of(client, "search", kb="notes", query="anything")
    assert "not running" in message and "cofferd" in message


def test_stderr_carries_only_coffers_own_lines(shared_daemon: Daemon) -> None:
    requests = [
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
        '"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}',
        '{"jsonrpc":"2.0","method":"notifications/initialized"}',
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"grep",'
        '"arguments":{"kb":"no-such-kb","pattern":"x"}}}',
    ]
    out = subprocess.run(
        [str(BIN / "cofferctl"), "mcp"],
        input="\n".join(requests) + "\n",
        text=True,
        capture_output=True,
        env={"COFFER_SOCKET": str(shared_daemon.socket), **PYTHONPATH},
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert lines and all(line.startswith("cofferctl mcp: ") for line in lines), lines
    assert any("grep: KB_NOT_FOUND" in line for line in lines)
    assert len(out.stdout.splitlines()) == 2  # the answers, nothing else on stdout


@pytest.mark.parametrize("module", ["mcp", "cofferd", "aiohttp", "pydantic"])
def test_the_rest_of_cofferctl_does_not_import(module: str) -> None:
    code = (
        f"import sys, cofferctl.cli; print(any(m == {module!r} or m.startswith({module!r} + '.')"
        f" for m in sys.modules if m not in {SHARED_WITH_CLI!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("module", ["mcp", "pydantic", "anyio", "asyncio"])
def test_the_mcp_server_needs_no_heavy_import(module: str) -> None:
    code = (
        "import sys, cofferctl.mcp.server; "
        f"print(any(m == {module!r} or m.startswith({module!r} + '.') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_protocol_edges_over_raw_pipes(shared_daemon: Daemon) -> None:
    kb = new_kb(shared_daemon)
    lines = [
        '{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{}}',
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
        '"1999-01-01","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}',
        "not json",
        '{"jsonrpc":"2.0","id":2,"method":"ping"}',
        '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"no_such_tool"}}',
        '{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"coffer://'
        + kb
        + '/missing.md"}}',
        '{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"https://x/y"}}',
        '{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"answer_from_notes",'
        '"arguments":{}}}',
    ]
    out = subprocess.run(
        [str(BIN / "cofferctl"), "mcp"], input="\n".join(lines) + "\n", text=True,
        capture_output=True, env={"COFFER_SOCKET": str(shared_daemon.socket), **PYTHONPATH},
        timeout=30,
    )  # fmt: skip
    answers = {a.get("id"): a for a in map(json.loads, out.stdout.splitlines())}
    assert answers[0]["error"]["code"] == -32601  # newer clients fall back to initialize
    assert answers[1]["result"]["protocolVersion"] == "2025-11-25"
    assert answers[None]["error"]["code"] == -32700
    assert answers[2]["result"] == {}
    assert "unknown tool" in answers[3]["error"]["message"]
    assert answers[4]["error"]["code"] == -32002 and "DOCUMENT_NOT_FOUND" in str(answers[4])
    assert answers[5]["error"]["code"] == -32002
    assert "`question` is required" in answers[6]["error"]["message"]
