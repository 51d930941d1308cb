"""The Language Server Protocol's transport with the standard library: JSON-RPC 2.0
messages, each after a `Content-Length` header, on stdin and stdout; and the loop that
reads them on its own thread and hands requests to workers.

pygls would cost ~450 ms of imports (lsprotocol's classes are built at import), more than
the whole start-up budget; the transport itself is small. Nothing a client sends ends the
server: a header that is not one, or a body that is not a message, gets an error answer
(null id), exactly that message is skipped and the next one is read. Headers and bodies
are bounded.

The reading thread never waits on the daemon: it answers `shutdown`, `exit` and
`$/cancelRequest` itself, applies notifications (which only record the editor's text and
schedule work) and queues every other request for a few worker threads, each of whose
calls to the daemon is bounded (`daemon.py`). Every request gets exactly one answer.
"""

from __future__ import annotations

import contextlib
import queue
import re
import sys
import threading
import time
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
READ_BYTES = 64 * 1024
SERVER_NOT_INITIALIZED = -32002
REQUEST_CANCELLED = -32800
WORKERS = 4  # requests answered at once
SHUTDOWN_WAIT_S = 5.0  # `shutdown` waits this long at most for the requests under way
BATCHES = "batches are not part of the Language Server Protocol"
_NEXT_HEADER = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)

Handler = Callable[[dict[str, Any]], Any]


def log(message: str) -> None:
    """Our own log line on stderr (editors show a server's stderr as its log)."""
    with contextlib.suppress(OSError, ValueError):
        print(f"cofferctl lsp: {message}", file=sys.stderr, flush=True)


class _BadHeader(Exception):
    """A header block that is no usable one; `length` when its body can still be skipped
    exactly, else the stream is searched for the next header."""

    def __init__(self, message: str, length: int | None) -> None:
        super().__init__(message)
        self.message, self.length = message, length


class Transport:
    """Reads messages from `stdin`, writes them to `stdout` (from any thread)."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.stdin = stdin
        self.stdout = stdout
        self._buffer = bytearray()
        self._ended = False
        self._lock = threading.Lock()
        self._lost = False

    def messages(self) -> Iterator[dict[str, Any] | Refused]:
        """Each message, or why the one at hand cannot be read; ends with stdin. A bad
        message is refused before the stream is brought back in step, so its answer
        never waits for the next message."""
        while True:
            try:
                length = self._header()
            except _BadHeader as bad:
                yield Refused(None, PARSE_ERROR, bad.message)
                if bad.length is not None:
                    self._read(bad.length, keep=False)
                elif not self._to_next_header():
                    return
                continue
            except OSError as exc:
                log(f"cannot read messages: {exc!r}")
                return
            if length is None:
                return
            if length > MAX_BODY_BYTES:
                yield Refused(None, INVALID_REQUEST, f"a message over {MAX_BODY_BYTES} bytes")
                self._read(length, keep=False)
                continue
            body = self._read(length)
            if body is None:
                return  # the client went away mid-message
            try:
                yield decode(body, BATCHES)
            except Refused as exc:
                yield exc

    def _fill(self) -> bool:
        """More bytes in the buffer; False at the end of stdin."""
        if self._ended:
            return False
        read1 = getattr(self.stdin, "read1", None)
        data = read1(READ_BYTES) if read1 is not None else self.stdin.read(1)
        if not data:
            self._ended = True
            return False
        self._buffer += data
        return True

    def _line(self) -> bytes | None:
        """The next header line (its end included); None at the end of stdin. A line
        over MAX_HEADER_BYTES is read to its end and returned cut, marked by its length."""
        while (end := self._buffer.find(b"\n", 0, MAX_HEADER_BYTES + 1)) < 0:
            if len(self._buffer) > MAX_HEADER_BYTES:  # too long: skip to its end
                while (end := self._buffer.find(b"\n")) < 0:
                    self._buffer.clear()
                    if not self._fill():
                        return None
                del self._buffer[: end + 1]
                return b"x" * (MAX_HEADER_BYTES + 1)
            if not self._fill():
                return None
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        return line

    def _read(self, length: int, keep: bool = True) -> bytes | None:
        """The next `length` bytes (None when stdin ends first); dropped when not `keep`,
        never held all at once then."""
        if not keep:
            while length > 0:
                if not self._buffer and not self._fill():
                    return None
                taken = min(length, len(self._buffer))
                del self._buffer[:taken]
                length -= taken
            return b""
        while len(self._buffer) < length:
            if not self._fill():
                return None
        body = bytes(self._buffer[:length])
        del self._buffer[:length]
        return body

    def _to_next_header(self) -> bool:
        """Skip to where the next `Content-Length` header starts (the body of a message
        whose length is unknown runs up to it); False when stdin ends first."""
        while (m := _NEXT_HEADER.search(self._buffer)) is None:
            del self._buffer[: max(0, len(self._buffer) - 32)]  # a header cut in two stays
            if not self._fill():
                return False
        del self._buffer[: m.start()]
        return True

    def _header(self) -> int | None:
        """The body's length from the next header block; None at the end of stdin;
        _BadHeader when the block is no usable one (read to its end)."""
        lengths: set[int] = set()
        problem: str | None = None
        unknown = False  # a Content-Length that is no number: the body's length is not known
        for _ in range(MAX_HEADERS):
            line = self._line()
            if line is None:
                return None
            if len(line) > MAX_HEADER_BYTES:
                problem = problem or f"a header line over {MAX_HEADER_BYTES} bytes"
                continue
            if line in (b"\r\n", b"\n"):
                if len(lengths) > 1:
                    problem = f"Content-Lengths that disagree: {min(lengths)}, {max(lengths)}"
                elif not lengths and not unknown:
                    problem = problem or "a message without a Content-Length"
                if problem is None:
                    return lengths.pop()
                known = lengths.pop() if len(lengths) == 1 and not unknown else None
                raise _BadHeader(problem, known)
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                text = value.strip()
                if text.isdigit() and len(text) <= 12:
                    lengths.add(int(text))
                else:
                    problem = problem or f"Content-Length is {shown(text)}"
                    unknown = True
        raise _BadHeader(f"more than {MAX_HEADERS} header lines", None)

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


class _Requests:
    """The requests under way: each answered once, by its worker, or at once when
    cancelled (the worker's answer is then dropped)."""

    def __init__(self, transport: Transport, handlers: dict[str, Handler]) -> None:
        self.transport, self.handlers = transport, handlers
        self.waiting: queue.Queue[tuple[Any, str, dict[str, Any]]] = queue.Queue()
        self._open: dict[tuple[type, Any], Any] = {}  # request ids not yet answered
        self._lock = threading.Condition()
        for n in range(WORKERS):
            threading.Thread(target=self._work, name=f"lsp-request-{n}", daemon=True).start()

    def add(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        with self._lock:
            self._open[(type(request_id), request_id)] = request_id
        self.waiting.put((request_id, method, params))

    def answer(self, request_id: Any, reply: dict[str, Any]) -> None:
        with self._lock:
            if self._open.pop((type(request_id), request_id), None) is None:
                return  # cancelled, and answered so already
        self.transport.send(reply)  # (not under the lock: the reading thread never waits)
        with self._lock:
            self._lock.notify_all()

    def cancel(self, request_id: Any) -> None:
        self.answer(request_id, error(request_id, REQUEST_CANCELLED, "cancelled"))

    def settle(self, within: float) -> None:
        """Wait up to `within` seconds for the requests under way to be answered."""
        deadline = time.monotonic() + within
        with self._lock:
            while self._open and (left := deadline - time.monotonic()) > 0:
                self._lock.wait(left)

    def drop_all(self, why: str) -> None:
        """Answer every request still under way with `why` (the server is going)."""
        with self._lock:
            ids = list(self._open.values())
        for request_id in ids:
            self.answer(request_id, error(request_id, REQUEST_CANCELLED, why))

    def _work(self) -> None:
        while True:
            request_id, method, params = self.waiting.get()
            with self._lock:
                if (type(request_id), request_id) not in self._open:
                    continue  # cancelled before it started
            self.answer(request_id, _answer(request_id, self.handlers[method], params, method))


def serve(
    transport: Transport,
    requests: dict[str, Handler],
    notifications: dict[str, Handler],
    initialize: Handler,
) -> int:
    """Answer until `exit` (or the end of stdin); the exit code the protocol asks for: 0
    after `shutdown`, else 1."""
    initialized = shut_down = False
    under_way = _Requests(transport, requests)
    for message in transport.messages():
        if isinstance(message, Refused):
            transport.send(error(message.request_id, message.code, message.message))
            continue
        method = message.get("method")
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if "id" not in message:
            if method == "exit":
                under_way.drop_all("the server exited")
                return 0 if shut_down else 1
            if method == "$/cancelRequest" and usable_id(params.get("id")):
                under_way.cancel(params["id"])
                continue
            handler = notifications.get(method) if isinstance(method, str) else None
            if handler is not None and initialized and not shut_down:
                _run(handler, params, method)
            continue
        request_id = message["id"]
        if not isinstance(method, str):
            continue  # an answer to a request of ours, or not a request
        if not usable_id(request_id):
            transport.send(error(None, INVALID_REQUEST, "`id` must be a string or an integer"))
            continue
        if shut_down:
            transport.send(error(request_id, INVALID_REQUEST, "the server is shut down"))
        elif method == "initialize":
            reply = _answer(request_id, initialize, params, method)
            initialized = "result" in reply
            transport.send(reply)
        elif not initialized:
            transport.send(error(request_id, SERVER_NOT_INITIALIZED, "send `initialize` first"))
        elif method == "shutdown":
            shut_down = True
            under_way.settle(SHUTDOWN_WAIT_S)
            transport.send({"jsonrpc": "2.0", "id": request_id, "result": None})
        elif method in requests:
            under_way.add(request_id, method, params)
        else:
            reply = error(request_id, METHOD_NOT_FOUND, f"method not found: {shown(method)}")
            transport.send(reply)
    under_way.drop_all("the client went away")
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
