"""A small HTTP/1.1 client for cofferd over its Unix socket (standard library only)."""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from pathlib import Path
from typing import Any

TIMEOUT_S = 600.0  # a reindex of a large KB can take a while; connecting does not


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


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("cofferd", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self._path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


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
        status, data = self.send(method, path, body, query)
        if status >= 400:
            err = data.get("error", {}) if isinstance(data, dict) else {}
            raise ApiError(
                status,
                err.get("code", f"HTTP_{status}"),
                err.get("message", f"HTTP {status}"),
                err.get("details", {}),
            )
        return data

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
        headers = {"X-Coffer-Actor": self.actor, "Accept": "application/json"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn = _UnixConnection(self.socket_path, self.timeout)
        try:
            try:
                conn.request(method, path, body=payload, headers=headers)
            except (FileNotFoundError, ConnectionRefusedError, PermissionError) as exc:
                raise DaemonUnreachable(str(exc)) from exc
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        return response.status, json.loads(raw) if raw else None

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, body if body is not None else {})

    def kb(self, name: str, rest: str = "") -> str:
        return f"/api/v1/knowledge_bases/{urllib.parse.quote(name, safe='')}{rest}"
