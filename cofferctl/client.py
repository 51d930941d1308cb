"""A small HTTP/1.1 client for cofferd over its Unix socket (standard library only).

It speaks just enough HTTP for cofferd's answers (one request per connection, a
Content-Length or chunked body), because `http.client` pulls in the `email` package and
costs ~30 ms of import on every invocation, half of cofferctl's start-up budget.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.parse
from collections.abc import Iterable, Iterator
from pathlib import Path

from cofferctl import api

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: ~3 ms of each start
if TYPE_CHECKING:
    from typing import Any

TIMEOUT_S = 600.0  # a reindex of a large KB can take a while; connecting does not
UPLOAD_CHUNK = 1024 * 1024


class DaemonUnreachable(Exception):
    """Nothing answers on the socket."""


class ApiError(Exception):
    """The daemon answered with an error envelope."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


class ProtocolError(ConnectionError):
    """The daemon was reached but its answer did not come whole: the connection broke or
    timed out in the middle of the request, or what came back is not cofferd's HTTP (an
    OSError, as the socket's own errors were, for callers that retry on those)."""


def exchange(path: Path, request: bytes | Iterable[bytes], timeout: float) -> tuple[int, bytes]:
    """Send one request over the socket (bytes, or pieces of them as they are read);
    return (status, body). DaemonUnreachable when nothing accepts the connection."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except OSError as exc:
            raise DaemonUnreachable(exc.strerror or str(exc)) from exc
        _send(sock, [request] if isinstance(request, bytes) else request, timeout)
        raw = _receive(sock, timeout)
    return _response(raw)


def _send(sock: socket.socket, pieces: Iterable[bytes], timeout: float) -> None:
    for piece in pieces:
        try:
            sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            return  # the daemon answered early (a refusal): read what it said
        except TimeoutError:
            raise ProtocolError(f"cofferd took no more of the request for {timeout:g} s") from None
        except OSError as exc:
            raise ProtocolError(f"the connection to cofferd broke: {exc.strerror or exc}") from None


def _receive(sock: socket.socket, timeout: float) -> bytes:
    """Everything the daemon sends until it closes the connection; a reset after an
    answer (a refusal before the whole request was read) keeps what came."""
    chunks = []
    try:
        while data := sock.recv(65536):
            chunks.append(data)
    except ConnectionResetError:
        if not chunks:
            raise ProtocolError("cofferd closed the connection before answering") from None
    except TimeoutError:
        raise ProtocolError(f"cofferd did not answer within {timeout:g} s") from None
    except OSError as exc:
        raise ProtocolError(f"the connection to cofferd broke: {exc.strerror or exc}") from None
    return b"".join(chunks)


def _response(raw: bytes) -> tuple[int, bytes]:
    """(status, body) of an HTTP response that must have come whole."""
    if not raw:
        raise ProtocolError("cofferd closed the connection before answering")
    head, sep, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    if not sep or not version.startswith("HTTP/") or not rest[:3].isdigit():
        raise ProtocolError("cofferd's answer was cut short or is not HTTP")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return int(rest[:3]), _dechunk(body)
    length = headers.get("content-length", "")
    if length:
        if not length.isdigit() or len(body) < int(length):
            raise ProtocolError("cofferd closed the connection in the middle of its answer")
        body = body[: int(length)]
    return int(rest[:3]), body


def _dechunk(data: bytes) -> bytes:
    out: list[bytes] = []
    while True:
        size_line, sep, data = data.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            size = -1
        if not sep or size < 0 or len(data) < size:
            raise ProtocolError("cofferd closed the connection in the middle of its answer")
        if size == 0:
            return b"".join(out)
        out.append(data[:size])
        data = data[size + 2 :]


class Client:
    def __init__(self, socket_path: Path, *, actor: str = "cofferctl", timeout: float = TIMEOUT_S):
        self.socket_path = socket_path
        self.actor = actor
        self.timeout = timeout

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
    ) -> Any:
        """The decoded JSON body; an error envelope raises ApiError."""
        return self._answer(*self.send(method, path, body, query))

    @staticmethod
    def _answer(status: int, data: Any) -> Any:
        if status >= 400:
            err = data.get("error", {}) if isinstance(data, dict) else {}
            raise ApiError(
                status,
                err.get("code", f"HTTP_{status}"),
                err.get("message", f"HTTP {status}"),
                err.get("details", {}),
            )
        return data

    def upload(self, path: str, file: Path, fields: dict[str, str]) -> Any:
        """POST a file as multipart/form-data (field `file`), streamed from disk."""
        boundary = f"coffer-{os.urandom(16).hex()}"
        head = b"".join(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
            + value.encode()
            + b"\r\n"
            for name, value in fields.items()
        )
        quoted = urllib.parse.quote(file.name, safe="")
        head += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f"filename=\"{quoted}\"; filename*=UTF-8''{quoted}\r\n"
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        with open(file, "rb") as fh:  # a file that cannot be read fails here, before sending
            size = os.fstat(fh.fileno()).st_size

            def pieces() -> Iterator[bytes]:
                yield request + head
                left = size
                while left > 0 and (chunk := fh.read(min(UPLOAD_CHUNK, left))):
                    left -= len(chunk)
                    yield chunk
                if left:  # a file of this machine, not the daemon: the request is dropped
                    raise OSError(f"{file} got shorter while it was sent")
                yield tail

            request = self._head(  # sent first, by pieces()
                "POST", path, len(head) + size + len(tail),
                f"multipart/form-data; boundary={boundary}",
            )  # fmt: skip
            return self._answer(*self._exchange(pieces()))

    def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
    ) -> tuple[int, Any]:
        if query:
            pairs = {k: v for k, v in query.items() if v is not None}
            if pairs:
                path += "?" + urllib.parse.urlencode(pairs)
        payload = json.dumps(body).encode() if body is not None else b""
        content_type = "application/json" if body is not None else None
        return self._exchange(self._head(method, path, len(payload), content_type) + payload)

    def _head(self, method: str, path: str, length: int, content_type: str | None) -> bytes:
        """A request's line and headers, up to the body."""
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: cofferd\r\nConnection: close\r\n"
            f"Accept: application/json\r\nX-Coffer-Actor: {self.actor}\r\n"
            f"Content-Length: {length}\r\n"
        )
        if content_type:
            head += f"Content-Type: {content_type}\r\n"
        return (head + "\r\n").encode()

    def _exchange(self, request: bytes | Iterable[bytes]) -> tuple[int, Any]:
        status, raw = exchange(self.socket_path, request, self.timeout)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:  # not JSON, or not UTF-8
            raise ProtocolError(f"cofferd's answer (HTTP {status}) is not JSON") from None

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, body if body is not None else {})

    # The paths are cofferctl.api's; these two are for scripts and tests that speak to the
    # API directly (cofferctl itself calls cofferctl.api's functions).
    def kb(self, name: str, rest: str = "") -> str:
        return api.kb_path(name, rest)

    def document(self, kb: str, ref: str, rest: str = "") -> str:
        """The API path of a document by id, id prefix or path (one segment, whatever it holds)."""
        return api.document_path(kb, ref, rest)
