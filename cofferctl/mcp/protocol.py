"""MCP over stdio with the standard library: JSON-RPC 2.0, one message a line.

The `mcp` package costs ~0.7 s of imports here (pydantic models of every protocol
revision, its HTTP client and server stacks), more than the whole start-up budget of
`cofferctl mcp`; the stdio protocol itself is small. This module speaks the handshake
era (`initialize`, revisions 2024-11-05 to 2025-11-25); a `server/discover` probe is
answered "method not found", which makes newer clients fall back to `initialize`.

Every line gets what JSON-RPC and MCP say it gets, and nothing a client sends ends the
server: a request with a usable id gets one answer with that id; a line that is not a
valid request or notification gets one error (with its id when that is usable, else
null); a notification and an answer to a request we never sent get nothing. Lines are
read in bounded pieces (a longer one is read past, never held, and refused), nesting is
bounded, answers are always valid UTF-8, and an exception while answering becomes an error
answer. What waits to be answered is bounded too: past MAX_IN_FLIGHT requests or
MAX_BYTES_IN_FLIGHT bytes of them, a request is refused at once as busy (a client's
retry, not a queue that grows while the daemon is slow). A client's mistake is answered,
never logged as an error of ours.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any

from cofferctl.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    Refused,
    RpcError,
    decode,
    encode,
    error,
    shown,
    usable_id,
)

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

RESOURCE_NOT_FOUND = -32002  # MCP's own
BATCHES = "batches are not supported (MCP 2025-06-18 removed them): one message a line"

MAX_LINE_BYTES = 32 * 1024 * 1024
"""The longest message read (cofferd takes no larger request body); the rest of a longer
line is read past in 64 KiB pieces, never held."""
MAX_IN_FLIGHT = 16
"""Requests answered on workers (running or waiting for one) at a time; one more is busy."""
MAX_BYTES_IN_FLIGHT = 2 * MAX_LINE_BYTES
"""Bytes of the lines of those requests at a time: two of the longest always fit."""
SERVER_BUSY = -32000  # JSON-RPC's range for a server's own errors
UNINITIALIZED = "the session is not initialized: send `initialize` first"
"""The answer to a method we serve (other than `ping`) before `initialize`, as the MCP
lifecycle asks; an unknown method is "method not found" either way, as in the Python SDK."""


@dataclass
class Session:
    """What the client said about itself in `initialize`."""

    client_name: str | None = None
    protocol_version: str = PROTOCOL_VERSIONS[0]


Handler = Callable[[Session, dict[str, Any]], dict[str, Any]]


def log(message: str) -> None:
    """Coffer's own log line on stderr (MCP clients show a server's stderr as its log)."""
    with contextlib.suppress(OSError, ValueError):  # a closed stderr is no reason to stop
        print(f"cofferctl mcp: {message}", file=sys.stderr, flush=True)


@dataclass
class StdioServer:
    server_info: dict[str, Any]
    instructions: str
    capabilities: dict[str, Any]
    handlers: dict[str, Handler]
    """Methods answered on a worker thread (they may wait on the daemon)."""
    session: Session = field(default_factory=Session)
    initialized: bool = False
    """Whether `initialize` was answered: until then only it and `ping` are served."""
    _write_lock: threading.Lock = field(default_factory=threading.Lock)
    _output_lost: bool = False
    _flight_lock: threading.Lock = field(default_factory=threading.Lock)
    _in_flight: int = 0  # requests handed to workers and not yet answered
    _bytes_in_flight: int = 0  # the size of their lines

    def serve(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        """Answer requests until the client closes stdin; calls that are running finish."""
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="mcp-call") as pool:
            for line in _lines(stdin):
                try:
                    self._take(line, stdout, pool)
                except Exception as exc:  # noqa: BLE001 - a bug of ours: logged, answered
                    log(f"a message failed: {''.join(traceback.format_exception(exc))}")
                    self._send(stdout, error(None, INTERNAL_ERROR, f"internal error: {exc!r}"))

    def _take(self, line: bytes | None, stdout: IO[bytes], pool: ThreadPoolExecutor) -> None:
        """Answer one line now, or hand it to a worker; a notification is only read."""
        if line is None:
            message = f"a message longer than {MAX_LINE_BYTES} bytes"
            self._send(stdout, error(None, INVALID_REQUEST, message))
            return
        if not line.strip():
            return
        try:
            request = _request(line)
        except Refused as exc:
            self._send(stdout, error(exc.request_id, exc.code, exc.message))
            return
        if request is None:
            return  # a notification, or the answer to a request we never send
        request_id, method, params = request
        if method in self.handlers and not self.initialized:
            self._send(stdout, error(request_id, INVALID_REQUEST, UNINITIALIZED))
        elif method in self.handlers:
            if not self._board(len(line)):
                busy = (
                    f"busy: {MAX_IN_FLIGHT} requests (or {MAX_BYTES_IN_FLIGHT} bytes of them) are "
                    "being answered; send this one again once one of them is"
                )
                self._send(stdout, error(request_id, SERVER_BUSY, busy))
                return
            pool.submit(self._answer_then_land, stdout, request_id, method, params, len(line))
        else:
            self._answer(stdout, request_id, method, params)

    def _board(self, size: int) -> bool:
        """Count a request as in flight, if it fits the bounds (else False)."""
        with self._flight_lock:
            full = self._in_flight >= MAX_IN_FLIGHT
            if full or self._bytes_in_flight + size > MAX_BYTES_IN_FLIGHT:
                return False
            self._in_flight += 1
            self._bytes_in_flight += size
            return True

    def _answer_then_land(
        self, stdout: IO[bytes], request_id: Any, method: str, params: dict[str, Any], size: int
    ) -> None:
        try:
            self._answer(stdout, request_id, method, params)
        finally:
            with self._flight_lock:
                self._in_flight -= 1
                self._bytes_in_flight -= size

    def _answer(
        self, stdout: IO[bytes], request_id: Any, method: str, params: dict[str, Any]
    ) -> None:
        try:
            result = self._dispatch(method, params)
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "result": result}
        except RpcError as exc:
            reply = error(request_id, exc.code, exc.message, exc.data)
        except Exception as exc:  # noqa: BLE001 - a bug of ours: logged, and answered (a client waits)
            log(f"{method} failed: {''.join(traceback.format_exception(exc))}")
            reply = error(request_id, INTERNAL_ERROR, f"internal error: {exc!r}")
        self._send(stdout, reply)

    def _dispatch(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            result = self._initialize(params)
            self.initialized = True
            return result
        if method == "ping":
            return {}
        handler = self.handlers.get(method)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {shown(method)}")
        return handler(self.session, params)

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        version = asked if isinstance(asked, str) and asked in PROTOCOL_VERSIONS else None
        info = params.get("clientInfo")
        name = info.get("name") if isinstance(info, dict) else None
        if isinstance(name, str):  # it names the agent in audit records and HTTP headers
            name = "".join(c for c in name if c.isprintable())[:100]
        self.session = Session(name or None, version or PROTOCOL_VERSIONS[0])
        return {
            "protocolVersion": self.session.protocol_version,
            "capabilities": self.capabilities,
            "serverInfo": self.server_info,
            "instructions": self.instructions,
        }

    def _send(self, stdout: IO[bytes], message: dict[str, Any]) -> None:
        """Write one answer; nothing in it, nor a closed stdout, raises here."""
        data = _encode(message)
        with self._write_lock:
            try:
                stdout.write(data)
                stdout.flush()
            except (OSError, ValueError) as exc:  # the client is gone; stdin ends next
                if not self._output_lost:
                    log(f"cannot write answers: {exc!r}")
                self._output_lost = True


def _lines(stdin: IO[bytes]) -> Iterator[bytes | None]:
    """Each line of stdin, or None for one longer than MAX_LINE_BYTES."""
    while True:
        try:
            line = stdin.readline(MAX_LINE_BYTES + 1)
        except OSError as exc:
            log(f"cannot read requests: {exc!r}")
            return
        if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
            if not line:
                return
            yield line
            continue
        while line and not line.endswith(b"\n"):  # the rest of the long line, dropped
            line = stdin.readline(1 << 16)
        yield None


def _request(line: bytes) -> tuple[Any, str, dict[str, Any]] | None:
    """(id, method, params) of a request; None for a notification or an answer; Refused
    for anything else."""
    message = decode(line, BATCHES)
    has_id, request_id = "id" in message, message.get("id")
    answer_to = request_id if usable_id(request_id) else None

    def invalid(why: str, code: int = INVALID_REQUEST) -> Refused:
        return Refused(answer_to, code, why)

    if "method" not in message:
        if has_id and ("result" in message or "error" in message):
            return None  # an answer: this server sends no requests
        raise invalid("a request needs a `method`")
    method = message["method"]
    if not isinstance(method, str):
        raise invalid("`method` must be a string")
    if not has_id:
        return None  # a notification: none needs an answer here
    if answer_to is None:
        raise invalid("`id` must be a string or an integer")
    params = message.get("params", {})
    if not isinstance(params, dict):
        raise invalid("`params` must be an object", INVALID_PARAMS)
    return request_id, method, params


def _encode(message: dict[str, Any]) -> bytes:
    """One line of UTF-8 JSON."""
    return encode(message, log) + b"\n"
