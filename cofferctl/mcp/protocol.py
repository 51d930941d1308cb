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
read in bounded pieces, nesting is bounded, answers are always valid UTF-8, and an
exception while answering becomes an error answer.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
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

MAX_LINE_BYTES = 32 * 1024 * 1024
"""The longest message read (cofferd takes no larger request body); the rest of a longer
line is read past in 64 KiB pieces, never held."""
MAX_DEPTH = 64
"""The deepest nesting of arrays and objects a message may have (a tool call needs 4)."""
SHOWN = 200  # characters of a client's value quoted back in an error message
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
UNINITIALIZED = "the session is not initialized: send `initialize` first"
"""The answer to a method we serve (other than `ping`) before `initialize`, as the MCP
lifecycle asks; an unknown method is "method not found" either way, as in the Python SDK."""


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class Refused(RpcError):
    """A line that is neither a request we serve nor a notification: answered with the id it
    gave when that is usable, else null."""

    def __init__(self, request_id: Any, code: int, message: str) -> None:
        super().__init__(code, message)
        self.request_id = request_id


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


def shown(value: Any) -> str:
    """A client's value, quoted back in an error message at a bounded length."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."


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

    def serve(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        """Answer requests until the client closes stdin; calls that are running finish."""
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="mcp-call") as pool:
            for line in _lines(stdin):
                try:
                    self._take(line, stdout, pool)
                except Exception as exc:  # noqa: BLE001 - a bug of ours: logged, answered
                    log(f"a message failed: {''.join(traceback.format_exception(exc))}")
                    self._send(stdout, _error(None, INTERNAL_ERROR, f"internal error: {exc!r}"))

    def _take(self, line: bytes | None, stdout: IO[bytes], pool: ThreadPoolExecutor) -> None:
        """Answer one line now, or hand it to a worker; a notification is only read."""
        if line is None:
            message = f"a message longer than {MAX_LINE_BYTES} bytes"
            self._send(stdout, _error(None, INVALID_REQUEST, message))
            return
        if not line.strip():
            return
        try:
            request = _request(line)
        except Refused as exc:
            self._send(stdout, _error(exc.request_id, exc.code, exc.message))
            return
        if request is None:
            return  # a notification, or the answer to a request we never send
        request_id, method, params = request
        if method in self.handlers and not self.initialized:
            self._send(stdout, _error(request_id, INVALID_REQUEST, UNINITIALIZED))
        elif method in self.handlers:
            pool.submit(self._answer, stdout, request_id, method, params)
        else:
            self._answer(stdout, request_id, method, params)

    def _answer(
        self, stdout: IO[bytes], request_id: Any, method: str, params: dict[str, Any]
    ) -> None:
        try:
            result = self._dispatch(method, params)
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "result": result}
        except RpcError as exc:
            reply = _error(request_id, exc.code, exc.message, exc.data)
        except Exception as exc:  # noqa: BLE001 - a bug of ours: logged, and answered (a client waits)
            log(f"{method} failed: {''.join(traceback.format_exception(exc))}")
            reply = _error(request_id, INTERNAL_ERROR, f"internal error: {exc!r}")
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
    try:
        text = line.decode()
        message = json.loads(text, parse_constant=_not_json)
    except UnicodeDecodeError as exc:
        raise Refused(None, PARSE_ERROR, f"not UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise Refused(None, PARSE_ERROR, f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise Refused(None, PARSE_ERROR, f"not JSON: {exc}") from None
    if isinstance(message, list):
        batches = "batches are not supported (MCP 2025-06-18 removed them): one message a line"
        raise Refused(None, INVALID_REQUEST, batches)
    if not isinstance(message, dict):
        raise Refused(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message (an object)")
    has_id, request_id = "id" in message, message.get("id")
    answer_to = request_id if usable_id(request_id) else None

    def invalid(why: str, code: int = INVALID_REQUEST) -> Refused:
        return Refused(answer_to, code, why)

    problem = _shape_problem(message, strings=_SURROGATE_ESCAPE.search(text) is not None)
    if problem:
        raise invalid(problem)
    if message.get("jsonrpc") != "2.0":
        raise invalid('not a JSON-RPC 2.0 message: `jsonrpc` must be "2.0"')
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


def usable_id(value: Any) -> bool:
    """A request id MCP allows (a string or an integer) that can be sent back as it came."""
    if isinstance(value, str):
        return not _has_surrogate(value)
    return isinstance(value, int) and not isinstance(value, bool)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _shape_problem(message: Any, *, strings: bool) -> str | None:
    """Why a parsed message cannot be served, found without recursion: too deep, or (when
    `strings`: the line has a surrogate escape) a lone surrogate, which is not Unicode, so no
    file, database or client takes it."""
    stack: list[tuple[Any, int]] = [(message, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if strings and _has_surrogate(value):
                return "a string holds a lone surrogate (\\ud800-\\udfff): not valid Unicode"
        elif isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
            if isinstance(value, dict):
                if strings:
                    stack.extend((key, depth) for key in value)
                value = value.values()
            stack.extend((item, depth + 1) for item in value)
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def _encode(message: dict[str, Any]) -> bytes:
    """One line of UTF-8 JSON; a lone surrogate in what we answer (a file name that is not
    UTF-8 reaches Python as one) becomes U+FFFD, since clients refuse its `\\ud800` escape."""
    try:
        text = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except Exception as exc:  # noqa: BLE001 - a bug of ours: the client gets an error instead
        log(f"an answer is not JSON: {exc!r}")
        error = _error(message.get("id"), INTERNAL_ERROR, f"the answer is not JSON: {exc}")
        text = json.dumps(error, ensure_ascii=False, separators=(",", ":"))
    try:
        data = text.encode()
    except UnicodeEncodeError:
        data = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()
    return data + b"\n"


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}
