"""`cofferctl mcp`: an MCP server on stdio that bridges every tool call to cofferd.

One writer and one index however many agents connect: tools only talk to the running
daemon over its socket. Writes are audited with the agent as the actor
(`agent:<client name>` from MCP initialization); every call is recorded in
`mcp_invocations` (tool, client, time, duration, outcome; never arguments or contents).
Imported only by this command, so the rest of cofferctl stays fast.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from coffer_kernel import __version__
from cofferctl import api
from cofferctl.client import ApiError, Client, DaemonUnreachable, ProtocolError
from cofferctl.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, RpcError, shown
from cofferctl.mcp.all_tools import TOOLS
from cofferctl.mcp.prompts import PROMPTS, get_prompt
from cofferctl.mcp.protocol import Session, StdioServer, log
from cofferctl.mcp.resources import TEMPLATES, list_resources, read_resource
from cofferctl.mcp.schema import JSON, ArgumentError, check
from cofferctl.mcp.tool_model import Tool

INSTRUCTIONS = """\
Coffer is the user's local knowledge base: Markdown documents in knowledge bases (KBs).
Call `list_knowledge_bases` to learn their names; every tool that works on one names it
(`kb`). Use `search` (or `search_all` across KBs) first to find what the user knows about a
topic (ranked passages), `grep` for exact strings or patterns, `get_document` to read a
whole document. Record what you learn with `add_document` (Markdown) and keep it current
with `edit_document`, passing the `content_sha256` you read as `expected_sha256`. Deleted
documents go to the trash (`list_trash`, `restore_document`). The user reads and edits the
same files, so write clear Markdown with a title. Documents are also resources
(coffer://KB/PATH)."""

UNREACHABLE = (
    "DAEMON_UNREACHABLE: cofferd is not running; start it with `cofferd` "
    "(or `cofferctl service install` to start it with the OS)"
)


class Bridge:
    """Answers MCP requests by calling cofferd as the agent that connected."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path

    def client(self, session: Session) -> Client:
        actor = f"agent:{session.client_name}" if session.client_name else "agent"
        return Client(self.socket_path, actor=actor)

    def handlers(self) -> dict[str, Any]:
        return {
            "tools/list": lambda s, p: {"tools": [t.listing() for t in TOOLS.values()]},
            "tools/call": self.call_tool,
            "resources/list": lambda s, p: self.daemon(
                lambda: list_resources(self.client(s), _optional_text(p, "cursor"))
            ),
            "resources/templates/list": lambda s, p: {"resourceTemplates": TEMPLATES},
            "resources/read": lambda s, p: self.daemon(
                lambda: read_resource(self.client(s), _text(p, "uri"))
            ),
            "prompts/list": lambda s, p: {"prompts": PROMPTS},
            "prompts/get": lambda s, p: self.daemon(
                lambda: get_prompt(self.client(s), _text(p, "name"), _object(p, "arguments"))
            ),
        }

    @staticmethod
    def daemon(answer: Any) -> JSON:
        """The answer of a request that is not a tool call; cofferd's absence is an error."""
        try:
            return dict(answer())
        except DaemonUnreachable:
            raise RpcError(INTERNAL_ERROR, UNREACHABLE) from None
        except ApiError as exc:
            raise RpcError(INVALID_PARAMS, f"{exc.code}: {exc.message}") from None

    def call_tool(self, session: Session, params: dict[str, Any]) -> JSON:
        name = _text(params, "name")
        tool = TOOLS.get(name)
        if tool is None:
            raise RpcError(INVALID_PARAMS, f"unknown tool: {shown(name)}")
        arguments = _object(params, "arguments")
        client = self.client(session)
        started = time.perf_counter()
        outcome = "ok"
        try:
            return _success(_run(tool, client, arguments))
        except ArgumentError as exc:
            outcome = "VALIDATION_ERROR"
            return _failure(f"VALIDATION_ERROR: {exc}")
        except ApiError as exc:
            outcome = exc.code
            details = f" {json.dumps(exc.details, ensure_ascii=False)}" if exc.details else ""
            return _failure(f"{exc.code}: {exc.message}{details}")
        except DaemonUnreachable:
            outcome = "DAEMON_UNREACHABLE"
            return _failure(UNREACHABLE)
        except (ProtocolError, OSError) as exc:  # a timeout, a dropped connection
            outcome = "DAEMON_ERROR"
            return _failure(f"DAEMON_ERROR: no complete answer from cofferd ({exc})")
        except Exception:
            outcome = "INTERNAL_ERROR"  # a bug of ours: answered as a JSON-RPC error
            raise
        finally:
            if outcome != "ok":
                log(f"{tool.name}: {outcome}")
            if outcome != "DAEMON_UNREACHABLE":
                _record(client, session, tool.name, started, outcome)


def _text(params: dict[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise RpcError(INVALID_PARAMS, f"`{key}` must be a string")
    return value


def _optional_text(params: dict[str, Any], key: str) -> str | None:
    return None if params.get(key) is None else _text(params, key)


def _object(params: dict[str, Any], key: str) -> dict[str, Any]:
    value = params.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RpcError(INVALID_PARAMS, f"`{key}` must be an object")
    return value


def _run(tool: Tool, client: Client, arguments: Any) -> JSON:
    check(tool.input_schema, arguments)
    return tool.run(client, arguments)


def _success(data: JSON) -> JSON:
    text = json.dumps(data, ensure_ascii=False)
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": data,
        "isError": False,
    }


def _failure(message: str) -> JSON:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def _record(client: Client, session: Session, tool: str, started: float, outcome: str) -> None:
    record = {
        "client": client.actor,
        "tool": tool,
        "duration_ms": round((time.perf_counter() - started) * 1000, 2),
        "outcome": outcome,
    }
    # the call itself succeeded or failed on its own terms; its log entry is best effort
    with contextlib.suppress(ApiError, DaemonUnreachable, ProtocolError, OSError):
        api.record_mcp_invocation(client, record)


def run(socket_path: Path) -> None:
    server = StdioServer(
        server_info={"name": "coffer", "title": "Coffer", "version": __version__},
        instructions=INSTRUCTIONS,
        capabilities={
            "tools": {"listChanged": False},
            "resources": {"subscribe": False, "listChanged": False},
            "prompts": {"listChanged": False},
        },
        handlers=Bridge(socket_path).handlers(),
    )
    log(f"Coffer {__version__} serving MCP on stdio for cofferd at {socket_path}")
    server.serve(sys.stdin.buffer, sys.stdout.buffer)
