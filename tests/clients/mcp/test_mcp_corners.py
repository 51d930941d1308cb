"""Protocol corners (issue 33 §8): in `cofferctl mcp`, what waits to be answered is
bounded, with an answer (busy) rather than a queue that grows while the daemon is slow; ids
it cannot send back are answered with id null; nothing a client sends is logged as an error
of ours. cofferctl says when to try again when cofferd answers 503 (its index rebuilt)."""

from __future__ import annotations

import json
import socketserver
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cofferctl.mcp.protocol import MAX_IN_FLIGHT, SERVER_BUSY
from tests.support.cli import ctl_env
from tests.support.daemon import BIN
from tests.support.mcp_fuzzing import McpPipe

STATUS = b'{"version":"x","knowledge_bases":[]}'


class StalledDaemon(socketserver.ThreadingUnixStreamServer):
    """A daemon that holds every request until `release` is set, then answers it."""

    daemon_threads = True
    request_queue_size = 128  # a loaded machine accepts late: no request refused meanwhile

    def __init__(self, path: Path) -> None:
        self.release = threading.Event()
        self.held = 0
        self._lock = threading.Lock()
        super().__init__(str(path), StalledHandler)


class StalledHandler(socketserver.StreamRequestHandler):
    server: StalledDaemon

    def handle(self) -> None:
        self.rfile.readline()
        length = 0
        while (header := self.rfile.readline()) not in (b"\r\n", b""):
            name, _, value = header.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        self.rfile.read(length)
        with self.server._lock:
            self.server.held += 1
        self.server.release.wait(60)
        self.wfile.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n")
        self.wfile.write(b"Content-Length: %d\r\n\r\n" % len(STATUS) + STATUS)


def test_requests_past_the_bound_are_answered_busy_at_once(
    mcp: Callable[..., McpPipe],
) -> None:
    with tempfile.TemporaryDirectory(prefix="cof", dir="/tmp") as run:
        server = StalledDaemon(Path(run) / "stalled.sock")
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            pipe = mcp(Path(run) / "stalled.sock")
            extra = 5
            for n in range(MAX_IN_FLIGHT + extra):
                pipe.request(n, "tools/call", {"name": "status"})
            busy = pipe.wait(
                lambda answers: (
                    [a for a in answers if a.get("error", {}).get("code") == SERVER_BUSY]
                    if len([a for a in answers if "error" in a]) >= extra
                    else None
                ),
                timeout=20,
            )
            assert sorted(a["id"] for a in busy) == list(
                range(MAX_IN_FLIGHT, MAX_IN_FLIGHT + extra)
            )
            assert "busy" in busy[0]["error"]["message"]
            assert pipe.call("p", "ping")["result"] == {}  # served while the others wait
            server.release.set()
            for n in range(MAX_IN_FLIGHT):
                assert "result" in pipe.answer(n)
            again = pipe.call("again", "tools/call", {"name": "status"})  # room again
            assert "result" in again
            assert pipe.alive() and not pipe.bad
            log = pipe.log.read_text(errors="replace")
            assert "Traceback" not in log and "internal" not in log.lower()
        finally:
            server.release.set()
            server.shutdown()
            server.server_close()


def test_ids_it_cannot_send_back_are_answered_with_null(
    mcp: Callable[..., McpPipe],
) -> None:
    with tempfile.TemporaryDirectory(prefix="cof", dir="/tmp") as run:
        pipe = mcp(Path(run) / "nobody.sock")
        for line in [
            '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',
            '{"jsonrpc":"2.0","id":[1],"method":"tools/list"}',
            '{"jsonrpc":"2.0","id":1.5,"method":"ping"}',
            '{"jsonrpc":"2.0","id":true,"method":"ping"}',
        ]:
            nulls = pipe.nulls()
            pipe.send(line)

            def answered(answers: list[dict[str, Any]], before: int = nulls) -> bool:
                return sum(a["id"] is None for a in answers) > before

            pipe.wait(answered, timeout=10)
        answers = [a for a in pipe.answers if a["id"] is None]
        assert [a["error"]["code"] for a in answers] == [-32600] * 4
        assert pipe.call("after", "ping")["result"] == {}
        assert "Traceback" not in pipe.log.read_text(errors="replace")


class RebuildingDaemon(socketserver.ThreadingUnixStreamServer):
    """Answers every request as cofferd does while its index is rebuilt: 503, Retry-After
    and INDEX_REBUILDING (with `message` as its message)."""

    daemon_threads = True

    def __init__(self, path: Path, message: str) -> None:
        self.body = json.dumps(
            {
                "error": {
                    "code": "INDEX_REBUILDING",
                    "message": message,
                    "details": {"retry_after_s": 7},
                }
            }
        ).encode()
        super().__init__(str(path), RebuildingHandler)


class RebuildingHandler(socketserver.StreamRequestHandler):
    server: RebuildingDaemon

    def handle(self) -> None:
        while self.rfile.readline() not in (b"\r\n", b""):
            pass
        self.wfile.write(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\n")
        body = self.server.body
        self.wfile.write(b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body))
        self.wfile.write(body)


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ("the index is not open", "the index is not open (INDEX_REBUILDING); try again in 7 s"),
        (
            "the index is not open; it is being rebuilt from the files: try again in 7 s",
            "rebuilt from the files: try again in 7 s (INDEX_REBUILDING)\n",
        ),
    ],
)
def test_cofferctl_says_when_to_try_again(message: str, said: str) -> None:
    with tempfile.TemporaryDirectory(prefix="cof", dir="/tmp") as run:
        socket = Path(run) / "rebuilding.sock"
        server = RebuildingDaemon(socket, message)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            done = subprocess.run(
                [str(BIN / "cofferctl"), "docs", "notes"],
                env=ctl_env(COFFER_SOCKET=str(socket)),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            server.shutdown()
            server.server_close()
    assert done.returncode != 0
    assert said in done.stderr and done.stderr.count("try again") == 1, done.stderr
