"""Run the real cofferd in a temporary data home on a real Unix socket, and talk to it
through cofferctl's client, checking every response against docs/openapi.yaml."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from cofferctl.client import ApiError, Client, DaemonUnreachable
from cofferd.infrastructure.storage import sqlite
from cofferd.infrastructure.storage.database import EXTENSIONS
from cofferd.infrastructure.storage.index_dump import dump_index
from tests.support.cofferd_process import BIN, start_cofferd  # noqa: F401 - tests take BIN from here

REPO = Path(__file__).resolve().parents[2]
CONTRACT = REPO / "docs" / "openapi.yaml"
SPEC_URI = "urn:coffer:openapi"
T = TypeVar("T")


@cache
def contract() -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(CONTRACT.read_text())
    return spec


@cache
def _registry() -> Registry:
    resource: Resource[Any] = DRAFT202012.create_resource(contract())
    return Registry().with_resource(SPEC_URI, resource)


def _pointer(*parts: str) -> str:
    return "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def operation_for(method: str, path: str) -> tuple[str, dict[str, Any]] | None:
    for template, item in contract()["paths"].items():
        pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
        if re.match(pattern, path.split("?")[0]) and method.lower() in item:
            return template, item[method.lower()]
    return None


def check_response(method: str, path: str, status: int, body: Any) -> None:
    """Fail when the contract lacks the route or status, or the body does not validate."""
    found = operation_for(method, path)
    assert found, f"{method} {path} is not in the contract"
    template, op = found
    responses = op["responses"]
    assert str(status) in responses, f"{method} {template} -> {status} is not in the contract"
    response = responses[str(status)]
    location = ["paths", template, method.lower(), "responses", str(status)]
    if "$ref" in response:
        location = response["$ref"].lstrip("#/").split("/")
        response = contract()["components"]["responses"][location[-1]]
    if "content" not in response:
        return
    ref = f"{SPEC_URI}#/" + _pointer(*location, "content", "application/json", "schema")
    validator = Draft202012Validator({"$ref": ref}, registry=_registry())
    errors = sorted(validator.iter_errors(body), key=lambda e: list(e.path))
    assert not errors, (
        f"{method} {template} -> {status}: {errors[0].message} at {list(errors[0].path)}"
    )


class ContractClient(Client):
    def send(self, method: str, path: str, body: Any = None, query: Any = None) -> Any:
        status, data = super().send(method, path, body, query)
        check_response(method, path, status, data)
        return status, data


def wait_for(condition: Callable[[], T], timeout: float = 15.0, interval: float = 0.02) -> T:
    """Poll until `condition()` is truthy; return its value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = condition()
        except (ApiError, DaemonUnreachable, OSError, AssertionError) as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last  # type: ignore[no-any-return]
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s; last value: {last!r}")


@dataclass
class Daemon:
    home: Path
    socket: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def client(self) -> ContractClient:
        return ContractClient(self.socket, actor="tests", timeout=60)

    @property
    def agent_root(self) -> Path:
        """A folder opened to agents (when the daemon was started with it)."""
        return self.home.parent / "agent-files"

    def docs(self, kb: str) -> Path:
        return self.home / "knowledge" / kb / "docs"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTIFY_", "LISTEN_"))}
        env.update({"COFFER_HOME": str(self.home), "COFFER_SOCKET": str(self.socket), **extra})
        return env

    def start(self, *args: str, wait: bool = True, **env: str) -> Daemon:
        self.log_handle = open(self.log, "ab")  # noqa: SIM115
        self.proc = start_cofferd(
            self.env(**env), *args, stdout=self.log_handle, stderr=subprocess.STDOUT
        )
        if wait:
            wait_for(self.healthy, timeout=30)
        return self

    def healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"cofferd exited with {self.proc.returncode}:\n{self.log.read_text()}"
            )
        try:
            return bool(self.client.get("/api/v1/health"))
        except (DaemonUnreachable, OSError):
            return False

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self.log_handle.close()
        return code

    def settled(self, kb: str) -> bool:
        status = self.client.get("/api/v1/status")
        return status["queue_depth"] == 0 and not status["watcher"]["busy"]

    def dump(self, kb: str) -> dict[str, Any]:
        conn = sqlite.connect(self.home / "coffer.db", readonly=True, extensions=EXTENSIONS)
        try:
            return dump_index(conn, kb)
        finally:
            conn.close()


def new_daemon(tmp: Path) -> Daemon:
    run = Path(tempfile.mkdtemp(prefix="cof", dir="/tmp"))  # sockets need short paths
    return Daemon(home=tmp / "home", socket=run / "cofferd.sock", log=tmp / "cofferd.log")


def cleanup(d: Daemon) -> None:
    if d.proc and d.proc.poll() is None:
        d.proc.kill()
        d.proc.wait()
    shutil.rmtree(d.socket.parent, ignore_errors=True)


def upload(
    d: Daemon, kb: str, filename: str, data: bytes, *, replace: bool = False
) -> tuple[int, Any]:
    """POST a multipart upload, as a browser or curl would; the reply is contract-checked."""
    from cofferctl.client import exchange

    boundary = "cofferboundary7MA4YWxkTrZu0gW"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
        + data
        + b"\r\n"
    ]
    if replace:
        disposition = 'Content-Disposition: form-data; name="replace"'
        parts.append(f"--{boundary}\r\n{disposition}\r\n\r\ntrue\r\n".encode())
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    path = f"/api/v1/knowledge_bases/{kb}/documents"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: cofferd\r\nConnection: close\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {len(body)}\r\nX-Coffer-Actor: tests\r\n\r\n"
    )
    status, raw = exchange(d.socket, head.encode() + body, 120)
    reply = json.loads(raw)
    check_response("POST", path, status, reply)
    return status, reply


def exchange_raw(path: Path, data: bytes, timeout: float = 60) -> bytes:
    """What the daemon answers to bytes sent as they are, however broken. It may close
    before reading all of a huge request: what it answered is read first, then the
    connection's reset is no news."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                answer += chunk
    return answer
