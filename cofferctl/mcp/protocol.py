"""MCP over stdio with the standard library: JSON-RPC 2.0, one message a line.

The `mcp` package costs ~0.7 s of imports here (pydantic models of every protocol
revision, its HTTP client and server stacks), more than the whole start-up budget of
`cofferctl mcp`; the stdio protocol itself is small. This module speaks the handshake
era (`initialize`, revisions 2024-11-05 to 2025-11-25); a `server/discover` probe is
answered "method not found", which makes newer clients fall back to `initialize`.
"""

from __future__ import annotations

import json
import sys
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


@dataclass
class Session:
    """What the client said about itself in `initialize`."""

    client_name: str | None = None
    protocol_version: str = PROTOCOL_VERSIONS[0]


Handler = Callable[[Session, dict[str, Any]], dict[str, Any]]


def log(message: str) -> None:
    """Coffer's own log line on stderr (MCP clients show a server's stderr as its log)."""
    print(f"cofferctl mcp: {message}", file=sys.stderr, flush=True)


@dataclass
class StdioServer:
    server_info: dict[str, Any]
    instructions: str
    capabilities: dict[str, Any]
    handlers: dict[str, Handler]
    """Methods answered on a worker thread (they may wait on the daemon)."""
    session: Session = field(default_factory=Session)
    _write_lock: threading.Lock = field(default_factory=threading.Lock)

    def serve(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        """Answer requests until the client closes stdin; calls that are running finish."""
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="mcp-call") as pool:
            for line in stdin:
                if not line.strip():
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    self._send(stdout, _error(None, PARSE_ERROR, "not JSON"))
                    continue
                if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                    self._send(stdout, _error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message"))
                    continue
                if "method" not in message or "id" not in message:
                    continue  # a notification, or the answer to a request we never send
                if message["method"] in self.handlers:
                    pool.submit(self._answer, stdout, message)
                else:
                    self._answer(stdout, message)

    def _answer(self, stdout: IO[bytes], request: dict[str, Any]) -> None:
        request_id = request["id"]
        params = request.get("params") or {}
        try:
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "params must be an object")
            result = self._dispatch(str(request["method"]), params)
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "result": result}
        except RpcError as exc:
            reply = _error(request_id, exc.code, exc.message, exc.data)
        except Exception as exc:  # noqa: BLE001 - a bug of ours: logged, and answered (a client waits)
            log(f"{request['method']} failed: {''.join(traceback.format_exception(exc))}")
            reply = _error(request_id, INTERNAL_ERROR, f"internal error: {exc!r}")
        self._send(stdout, reply)

    def _dispatch(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            return self._initialize(params)
        if method == "ping":
            return {}
        handler = self.handlers.get(method)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {method}")
        return handler(self.session, params)

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        info = params.get("clientInfo")
        name = info.get("name") if isinstance(info, dict) else None
        self.session = Session(name if isinstance(name, str) and name else None, version)
        return {
            "protocolVersion": version,
            "capabilities": self.capabilities,
            "serverInfo": self.server_info,
            "instructions": self.instructions,
        }

    def _send(self, stdout: IO[bytes], message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        with self._write_lock:
            stdout.write(data)
            stdout.flush()


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}
