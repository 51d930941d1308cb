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


class ProtocolError(Exception):
    """The daemon's answer was not the HTTP we expect."""


def exchange(path: Path, request: bytes | Iterable[bytes], timeout: float) -> tuple[int, bytes]:
    """Send one request over the socket (bytes, or pieces of them as they are read);
    return (status, body)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        try:
            for piece in [request] if isinstance(request, bytes) else request:
                sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon answered early (a refusal): read what it said
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    raw = b"".join(chunks)
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        raise ProtocolError("incomplete response from cofferd")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ", 2)[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _dechunk(body)
    elif "content-length" in headers:
        body = body[: int(headers["content-length"])]
    return status, body


def _dechunk(data: bytes) -> bytes:
    out = []
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out.append(data[:size])
        data = data[size + 2 :]
    return b"".join(out)


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
                if left:
                    raise ProtocolError(f"{file} got shorter while it was sent")
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
        try:
            status, raw = exchange(self.socket_path, request, self.timeout)
        except (FileNotFoundError, ConnectionRefusedError, PermissionError) as exc:
            raise DaemonUnreachable(str(exc)) from exc
        return status, json.loads(raw) if raw else None

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, body if body is not None else {})

    def kb(self, name: str, rest: str = "") -> str:
        return f"/api/v1/knowledge_bases/{urllib.parse.quote(name, safe='')}{rest}"

    def document(self, kb: str, ref: str, rest: str = "") -> str:
        """The API path of a document by id, id prefix or path (one segment, whatever it holds)."""
        return self.kb(kb, f"/documents/{urllib.parse.quote(ref, safe='')}{rest}")
