"""Driving `cofferctl mcp` with the official client: its server parameters for a daemon, a tool's
answer or error, a fresh knowledge base, an agent's name and what its calls recorded."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_types import Implementation

from tests.support.daemon import BIN, Daemon

PYTHONPATH = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}  # a checkout's code


def params(socket: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(BIN / "cofferctl"),
        args=["mcp"],
        env={"COFFER_SOCKET": str(socket), "PATH": "/usr/bin:/bin", **PYTHONPATH},
    )


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A successful call's structured content (the client checks it against the tool's
    output schema)."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


async def error_of(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return " ".join(getattr(c, "text", "") for c in result.content)


def new_kb(d: Daemon, prefix: str = "mcp") -> str:
    kb = f"{prefix}-{uuid.uuid4().hex[:6]}"
    d.client.post("/api/v1/knowledge_bases", {"name": kb})
    return kb


AGENT = Implementation(name="test-agent", version="1.0")


def own_agent() -> Implementation:
    """A client name no other test uses: what its calls recorded can be told apart."""
    return Implementation(name=f"test-agent-{uuid.uuid4().hex[:6]}", version="1.0")


def invocations(d: Daemon, agent: Implementation) -> list[tuple[str, str]]:
    """(tool, outcome) of every call `agent` made, oldest first."""
    calls = d.client.get("/api/v1/mcp_invocations", limit=1000)["invocations"]
    mine = [(c["tool"], c["outcome"]) for c in calls if c["client"] == f"agent:{agent.name}"]
    return mine[::-1]  # listed newest first
