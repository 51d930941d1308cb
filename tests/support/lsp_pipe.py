"""A `cofferctl lsp` on pipes, spoken to frame by frame (no client library between): what the
LSP tests, their shared fixture and bench.guards.lsp_latency drive; with the parts of its
messages the tests build and read. Standard library only, so that a bench measuring another
checkout's code (`--repo`) can import it."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from tests.support.cofferd_process import BIN

TIMEOUT_S = "1"  # the server's bound on each call to the daemon, lowered for the tests
BOUND_S = 6.0  # every request is answered within this (the daemon's bound, and room)


def frame(message: Any) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class RawClient:
    """`cofferctl lsp` on pipes: messages written as they are, answers read on a thread."""

    def __init__(self, env: dict[str, str], daemon_bound_s: str | None = TIMEOUT_S) -> None:
        """`daemon_bound_s`: the server's bound on each call to the daemon (None: the one it
        has when a user runs it)."""
        bound = {} if daemon_bound_s is None else {"COFFER_LSP_TIMEOUT_S": daemon_bound_s}
        self.proc = subprocess.Popen(
            [str(BIN / "cofferctl"), "lsp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**env, **bound},
        )
        self.answers: dict[Any, dict[str, Any]] = {}
        self.notes: queue.Queue[dict[str, Any]] = queue.Queue()
        self._arrived = threading.Condition()
        self._next = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        out = self.proc.stdout
        while head := out.readline():
            length = int(head.split(b":")[1])
            out.readline()
            message = json.loads(out.read(length))
            if "id" in message and "method" not in message:
                with self._arrived:
                    self.answers[message["id"]] = message
                    self._arrived.notify_all()
            else:
                self.notes.put(message)

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, method: str, params: Any = None) -> int:
        self._next += 1
        self.write(frame({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}))
        return self._next

    def notify(self, method: str, params: Any) -> None:
        self.write(frame({"jsonrpc": "2.0", "method": method, "params": params}))

    def answer(self, request_id: Any, within: float = BOUND_S) -> dict[str, Any]:
        deadline = time.monotonic() + within
        with self._arrived:
            while request_id not in self.answers:
                left = deadline - time.monotonic()
                assert left > 0, f"request {request_id} was not answered within {within} s"
                self._arrived.wait(left)
            return self.answers[request_id]

    def ask(self, method: str, params: Any = None, within: float = BOUND_S) -> dict[str, Any]:
        return self.answer(self.send(method, params), within)

    def diagnostics(self, uri: str, within: float = 15) -> list[dict[str, Any]]:
        deadline = time.monotonic() + within
        while True:
            message = self.notes.get(timeout=max(0.0, deadline - time.monotonic()))
            params = message.get("params") or {}
            if message["method"] == "textDocument/publishDiagnostics" and params["uri"] == uri:
                return list(params["diagnostics"])

    def start(self, root: Path | None = None) -> RawClient:
        self.ask("initialize", {"capabilities": {}, "rootUri": root.as_uri() if root else None})
        self.notify("initialized", {})
        return self

    def end(self) -> int:
        """`shutdown` (answered within the bound), then `exit`: the exit code."""
        assert self.ask("shutdown") == {"jsonrpc": "2.0", "id": self._next, "result": None}
        self.notify("exit", None)
        return self.proc.wait(BOUND_S)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def open_note(client: RawClient, uri: str, text: str) -> list[dict[str, Any]]:
    item = {"uri": uri, "languageId": "markdown", "version": 1, "text": text}
    client.notify("textDocument/didOpen", {"textDocument": item})
    return client.diagnostics(uri)


def at(uri: str, line: int, character: int) -> dict[str, Any]:
    """The params of a request at a position of a note."""
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def shown(answer: dict[str, Any]) -> str:
    """An answer's result as text ("" when it has none)."""
    result = answer.get("result")
    return str(result) if result else ""


def relpath_of(uri: str, docs: Path) -> str:
    """A file URI's path relative to a KB's folder."""
    return Path(unquote(uri.removeprefix("file://"))).relative_to(docs).as_posix()
