"""The Language Server Protocol's transport with the standard library: JSON-RPC 2.0
messages, each after a `Content-Length` header, on stdin and stdout.

pygls would cost ~450 ms of imports (lsprotocol's classes are built at import), more than
the whole start-up budget; the transport itself is small. Nothing a client sends ends the
server: a header that is not one, or a body that is not a message, gets an error answer
(null id) and the next message is read. Headers and bodies are bounded.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import IO, Any

from cofferctl.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    Refused,
    RpcError,
    decode,
    encode,
    error,
    shown,
    usable_id,
)

MAX_BODY_BYTES = 32 * 1024 * 1024  # cofferd takes no larger request body either
MAX_HEADER_BYTES = 8 * 1024  # one header line
MAX_HEADERS = 32
SERVER_NOT_INITIALIZED = -32002
BATCHES = "batches are not part of the Language Server Protocol"

Handler = Callable[[dict[str, Any]], Any]


def log(message: str) -> None:
    """Our own log line on stderr (editors show a server's stderr as its log)."""
    with contextlib.suppress(OSError, ValueError):
        print(f"cofferctl lsp: {message}", file=sys.stderr, flush=True)


class Transport:
    """Reads messages from `stdin`, writes them to `stdout` (from any thread)."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.stdin = stdin
        self.stdout = stdout
        self._lock = threading.Lock()
        self._lost = False

    def messages(self) -> Iterator[dict[str, Any] | Refused]:
        """Each message, or why the next one cannot be read; ends with stdin."""
        while True:
            try:
                length = self._header()
            except Refused as exc:
                yield exc
                continue
            except OSError as exc:
                log(f"cannot read messages: {exc!r}")
                return
            if length is None:
                return
            body = self.stdin.read(length)
            if len(body) < length:
                return  # the client went away mid-message
            try:
                yield decode(body, BATCHES)
            except Refused as exc:
                yield exc

    def _header(self) -> int | None:
        """The body's length from the next header block; None at the end of stdin. A block
        that is not a usable one is read to its end, then refused."""
        length: int | None = None
        problem: str | None = None
        for _ in range(MAX_HEADERS):
            line = self.stdin.readline(MAX_HEADER_BYTES + 1)
            if not line:
                return None
            if len(line) > MAX_HEADER_BYTES:
                while line and not line.endswith(b"\n"):
                    line = self.stdin.readline(1 << 16)
                problem = problem or "a header line too long"
                continue
            if line in (b"\r\n", b"\n"):
                if problem or length is None:
                    raise Refused(
                        None, PARSE_ERROR, problem or "a message without a Content-Length"
                    )
                if length > MAX_BODY_BYTES:
                    self._skip(length)
                    raise Refused(None, INVALID_REQUEST, f"a message over {MAX_BODY_BYTES} bytes")
                return length
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                text = value.strip()
                if text.isdigit() and len(text) <= 12:
                    length = int(text)
                else:
                    problem = problem or f"Content-Length is {shown(text)}"
        raise Refused(None, PARSE_ERROR, f"more than {MAX_HEADERS} header lines")

    def _skip(self, length: int) -> None:
        while length > 0:
            piece = self.stdin.read(min(length, 1 << 16))
            if not piece:
                return
            length -= len(piece)

    def send(self, message: dict[str, Any]) -> None:
        """Write one message; a closed stdout only stops the writing."""
        body = encode(message, log)
        with self._lock:
            try:
                self.stdout.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                self.stdout.flush()
            except (OSError, ValueError) as exc:
                if not self._lost:
                    log(f"cannot write messages: {exc!r}")
                self._lost = True

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})


def serve(
    transport: Transport,
    requests: dict[str, Handler],
    notifications: dict[str, Handler],
    initialize: Handler,
) -> int:
    """Answer until `exit` (or the end of stdin); the exit code the protocol asks for: 0
    after `shutdown`, else 1."""
    initialized = shut_down = False
    for message in transport.messages():
        if isinstance(message, Refused):
            transport.send(error(message.request_id, message.code, message.message))
            continue
        method = message.get("method")
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if "id" not in message:
            if method == "exit":
                return 0 if shut_down else 1
            handler = notifications.get(method) if initialized and isinstance(method, str) else None
            if handler is not None:
                _run(handler, params, method)
            continue
        request_id = message["id"]
        if not isinstance(method, str):
            continue  # an answer to a request of ours, or not a request
        if not usable_id(request_id):
            transport.send(error(None, INVALID_REQUEST, "`id` must be a string or an integer"))
            continue
        if method == "initialize":
            reply = _answer(request_id, initialize, params, method)
            initialized = "result" in reply
        elif not initialized:
            reply = error(request_id, SERVER_NOT_INITIALIZED, "send `initialize` first")
        elif method == "shutdown":
            shut_down = True
            reply = {"jsonrpc": "2.0", "id": request_id, "result": None}
        elif method in requests:
            reply = _answer(request_id, requests[method], params, method)
        else:
            reply = error(request_id, METHOD_NOT_FOUND, f"method not found: {shown(method)}")
        transport.send(reply)
    return 0 if shut_down else 1


def _answer(request_id: Any, handler: Handler, params: dict[str, Any], method: Any) -> Any:
    try:
        return {"jsonrpc": "2.0", "id": request_id, "result": handler(params)}
    except RpcError as exc:
        return error(request_id, exc.code, exc.message, exc.data)
    except Exception as exc:  # noqa: BLE001 - a bug of ours: logged, and answered (a client waits)
        log(f"{method} failed: {''.join(traceback.format_exception(exc))}")
        return error(request_id, INTERNAL_ERROR, f"internal error: {exc!r}")


def _run(handler: Handler, params: dict[str, Any], method: Any) -> None:
    try:
        handler(params)
    except Exception as exc:  # noqa: BLE001 - a notification has no answer: logged
        log(f"{method} failed: {''.join(traceback.format_exception(exc))}")
