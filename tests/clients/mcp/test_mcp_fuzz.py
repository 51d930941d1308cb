"""`cofferctl mcp` answers every message and never dies: focused tests of each way a line
once killed or hung it, and a seeded fuzzer over its pipes against a real daemon.

The fuzzer sends schema-derived tool calls (valid, boundary and wrong-typed arguments),
the other methods with random params, random JSON, malformed lines, deep nesting, lone
surrogates, huge ids, unknown methods, batches and notifications. It checks that every
request with a usable id (a string or an integer) gets exactly one answer with that id,
every other message that is neither a notification nor an answer gets one error with id
null, every answer is strict JSON-RPC 2.0, no answer is an internal error, the process
never exits, and `ping` answers afterwards. COFFER_MCP_FUZZ_CASES sets the number of
cases (default 400); a longer run that counts answers per kind of case:
`.venv/bin/python -m bench.guards.mcp_fuzz --cases 20000`.
"""

from __future__ import annotations

import json
import os
import random
import socketserver
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp import Client

from cofferctl.jsonrpc import MAX_DEPTH
from cofferctl.mcp.all_tools import TOOLS
from cofferctl.mcp.protocol import MAX_LINE_BYTES
from tests.support.daemon import Daemon
from tests.support.mcp_client import call, new_kb, params
from tests.support.mcp_fuzzing import (
    INITIALIZE,
    SEED,
    Generator,
    McpPipe,
    non_utf8_kb,
    run_fuzz,
    seed_kb,
)

CASES = int(os.environ.get("COFFER_MCP_FUZZ_CASES", "400"))


def check_answers(pipe: McpPipe, cases: list[tuple[str | bytes, Any, int | None]]) -> None:
    """Send each line and wait for its one answer: (line, id or None, error code or None
    for a result)."""
    for line, request_id, code in cases:
        nulls = pipe.nulls()
        pipe.send(line)
        if request_id is None:
            pipe.wait(lambda answers, n=nulls: sum(a["id"] is None for a in answers) > n)
            answer = [a for a in pipe.answers if a["id"] is None][-1]
        else:
            answer = pipe.answer(request_id)
        got = answer["error"]["code"] if "error" in answer else None
        assert got == code, (line[:200], answer)
        assert pipe.alive()
    assert pipe.call("after", "ping") == {"jsonrpc": "2.0", "id": "after", "result": {}}
    assert not pipe.bad, pipe.bad
    ids = Counter(json.dumps(a["id"]) for a in pipe.answers if a["id"] is not None)
    assert max(ids.values()) == 1, ids  # one answer per request


def envelope(request_id: Any, method: Any, params: Any = None) -> str:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message)


# --- focused tests: each of these killed or hung the server, or answered wrongly ---------


def test_malformed_envelopes_get_an_error_and_serving_goes_on(
    shared_daemon: Daemon, mcp: Callable[..., McpPipe]
) -> None:
    pipe = mcp(shared_daemon.socket)
    question = {"name": "answer_from_notes", "arguments": {"question": "q", "kb": 5}}
    check_answers(
        pipe,
        [
            (envelope(1, 5), 1, -32600),
            (envelope(2, []), 2, -32600),  # unhashable: it ended the server
            (envelope(3, {"tools/list": 1}), 3, -32600),
            (envelope(4, None), 4, -32600),
            (envelope({"a": 1}, "ping"), None, -32600),
            (envelope([1], "ping"), None, -32600),
            (envelope(True, "ping"), None, -32600),
            (envelope(1.5, "ping"), None, -32600),
            (envelope(None, "ping"), None, -32600),
            (json.dumps({"jsonrpc": "1.0", "id": 5, "method": "ping"}), 5, -32600),
            (json.dumps({"id": 6, "method": "ping"}), 6, -32600),
            (json.dumps({"jsonrpc": "2.0", "id": 7}), 7, -32600),
            (envelope(8, "ping", []), 8, -32602),
            (envelope(9, "ping", "x"), 9, -32602),
            (envelope(10, "tools/call", {"name": ["search"]}), 10, -32602),
            (envelope(11, "tools/call", {"name": "status", "arguments": [1]}), 11, -32602),
            (envelope(12, "resources/read", {"uri": {"x": 1}}), 12, -32602),
            (envelope(13, "resources/read", {"uri": "coffer://[x/y"}), 13, -32002),
            (envelope(14, "resources/list", {"cursor": 5}), 14, -32602),
            (envelope(15, "prompts/get", question), 15, -32602),
            (
                envelope(16, "prompts/get", {"name": "answer_from_notes", "arguments": 1}),
                16,
                -32602,
            ),
            (json.dumps([json.loads(envelope(17, "ping"))]), None, -32600),  # no batches
            ("[]", None, -32600),
            ("5", None, -32600),
            ('"ping"', None, -32600),
            ("null", None, -32600),
            ("{}", None, -32600),
        ],
    )
    assert 17 not in {a["id"] for a in pipe.answers}  # the batch's request is not answered


def test_lone_surrogates_are_refused_not_fatal(
    shared_daemon: Daemon, mcp: Callable[..., McpPipe]
) -> None:
    kb = new_kb(shared_daemon, "sur")
    pipe = mcp(shared_daemon.socket)

    def tool(request_id: int, name: str, arguments: str) -> str:
        params = f'{{"name":"{name}","arguments":{arguments}}}'
        return f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call","params":{params}}}'

    check_answers(
        pipe,
        [
            ('{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}', None, -32600),  # it ended it
            ('{"jsonrpc":"2.0","id":"\\uDC00x","method":"tools/list"}', None, -32600),
            ('{"jsonrpc":"2.0","id":1,"method":"\\udfff"}', 1, -32600),
            ('{"jsonrpc":"2.0","id":2,"method":"ping","params":{"\\ud800":1}}', 2, -32600),
            (tool(3, "search", f'{{"kb":"{kb}","query":"\\ud83d"}}'), 3, -32600),
            (tool(4, "get_document", f'{{"kb":"{kb}","document_id":"a\\udcffb"}}'), 4, -32600),
            ('{"jsonrpc":"2.0","method":"notifications/x\\ud800"}', None, -32600),  # invalid
            (tool(5, "search", f'{{"kb":"{kb}","query":"\\ud83d\\ude00"}}'), 5, None),  # a pair
        ],
    )


def nested(depth: int, inner: str = "") -> str:
    return "[" * depth + inner + "]" * depth


def test_deep_nesting_is_refused_without_recursion(
    shared_daemon: Daemon, mcp: Callable[..., McpPipe]
) -> None:
    pipe = mcp(shared_daemon.socket)
    ping = '{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"a":%s}}'
    check_answers(
        pipe,
        [
            (ping % (1, nested(100_000)), None, -32700),  # a RecursionError ended the server
            ('{"jsonrpc":"2.0","id":' + nested(100_000) + ',"method":"ping"}', None, -32700),
            (nested(100_000), None, -32700),
            ('{"x":' + nested(100_000) + ',"jsonrpc":"2.0","id":2,"method":"ping"}', None, -32700),
            (ping % (3, nested(MAX_DEPTH + 100)), 3, -32600),
            (ping % (4, nested(MAX_DEPTH - 1)), 4, -32600),  # the object and params count too
            (ping % (5, nested(MAX_DEPTH - 2, "1")), 5, None),
            (
                '{"jsonrpc":"2.0","id":6,"method":"ping","params":{"a":%s}}'
                % ('{"b":' * 70 + "1" + "}" * 70),
                6,
                -32600,
            ),
        ],
    )


def test_lines_that_are_not_utf8_json_get_parse_errors(
    shared_daemon: Daemon, mcp: Callable[..., McpPipe]
) -> None:
    pipe = mcp(shared_daemon.socket)
    ping = '{"jsonrpc":"2.0","id":%s,"method":"ping"}'
    check_answers(
        pipe,
        [
            (b"\xff\xfe{}", None, -32700),
            ((ping % 1).encode("utf-16"), None, -32700),  # was read as UTF-16 and answered
            ((ping % 2).encode("utf-16-le"), None, -32700),
            (b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"\xc3\x28"}}', None, -32700),
            (b"\xef\xbb\xbf" + (ping % 4).encode(), None, -32700),
            ('{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":NaN}}', None, -32700),
            ('{"jsonrpc":"2.0","id":6,"method":"ping","params":{"x":-Infinity}}', None, -32700),
            (ping % 7 + " " + ping % 8, None, -32700),
            (ping % ("9" * 5000), None, -32700),
            ('{"jsonrpc":"2.0","id":10,"method":"ping","params":{"x":"a\x01b"}}', None, -32700),
            ((ping % 11)[:-3], None, -32700),
            ("not json", None, -32700),
            (ping % 12345678901234567890123456789, 12345678901234567890123456789, None),
            (ping % -(2**70), -(2**70), None),
            (ping % '""', "", None),
            (ping % json.dumps("é\u2028🙂"), "é\u2028🙂", None),
        ],
    )


def test_a_line_over_the_bound_is_refused_and_the_next_answered(
    shared_daemon: Daemon, mcp: Callable[..., McpPipe]
) -> None:
    pipe = mcp(shared_daemon.socket)
    pad = b"x" * (MAX_LINE_BYTES + 1024 * 1024)
    huge = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + pad + b'"}}'
    fits = b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"'
    fits += b"y" * (MAX_LINE_BYTES - len(fits) - 3) + b'"}}'
    assert len(fits) == MAX_LINE_BYTES
    check_answers(pipe, [(huge, None, -32600), (fits, 2, None)])
    assert "longer than" in next(a for a in pipe.answers if a["id"] is None)["error"]["message"]


def test_requests_before_initialize_are_refused(
    shared_daemon: Daemon, mcp: Callable[..., McpPipe]
) -> None:
    pipe = mcp(shared_daemon.socket, initialize=False)
    for request_id, method in enumerate(["tools/list", "tools/call", "resources/list"], 1):
        error = pipe.call(request_id, method, {"name": "status"})["error"]
        assert error["code"] == -32600 and "initialize" in error["message"], error
    assert pipe.call(4, "ping")["result"] == {}
    assert pipe.call(5, "no/such/method")["error"]["code"] == -32601
    pipe.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')  # not a handshake
    assert pipe.call(6, "prompts/list")["error"]["code"] == -32600
    assert pipe.call(7, "initialize", INITIALIZE)["result"]["serverInfo"]["name"] == "coffer"
    assert len(pipe.call(8, "tools/list")["result"]["tools"]) == len(TOOLS)
    assert pipe.call(9, "no/such/method")["error"]["code"] == -32601
    pipe.send('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":8}}')
    pipe.send('{"jsonrpc":"2.0","method":"no/such/notification","params":[1]}')
    pipe.send('{"jsonrpc":"2.0","id":8,"result":{}}')  # an answer: we sent no request
    assert pipe.call(10, "ping")["result"] == {}
    assert pipe.close() == 0
    assert sorted(a["id"] for a in pipe.answers) == list(range(1, 11)) and not pipe.bad


async def test_a_folder_whose_path_is_not_utf8_is_answered(
    shared_daemon: Daemon, mcp: Callable[..., McpPipe], tmp_path: Path
) -> None:
    d = shared_daemon
    kb = non_utf8_kb(d, tmp_path, "odd-path")
    pipe = mcp(d.socket)

    def tool(request_id: int, name: str, **arguments: Any) -> dict[str, Any]:
        answer = pipe.call(request_id, "tools/call", {"name": name, "arguments": arguments})
        assert not answer["result"]["isError"], answer  # it was never answered
        return dict(answer["result"]["structuredContent"])

    listing = tool(1, "list_documents", kb=kb)["documents"][0]
    assert "caf\ufffd-\ufffd" in listing["path"] and listing["relative_path"] == "heron.md"
    assert "\ufffd" in tool(2, "search", kb=kb, query="heron")["passages"][0]["path"]
    kbs = tool(3, "list_knowledge_bases")["knowledge_bases"]
    assert "\ufffd" in next(k for k in kbs if k["name"] == kb)["attached"]
    assert "\ufffd" in tool(4, "get_document", kb=kb, document_id="heron.md")["path"]
    assert "\ufffd" in tool(5, "grep", kb=kb, pattern="census")["hits"][0]["path"]
    assert pipe.call(6, "ping")["result"] == {}
    async with Client(params(d.socket)) as client:  # a real client takes the answers
        found = await call(client, "search", kb=kb, query="heron")
        assert "caf\ufffd-\ufffd" in found["passages"][0]["path"]
        assert (await call(client, "list_documents", kb=kb))["total"] == 1


class OddDaemon(socketserver.ThreadingUnixStreamServer):
    """Something that is not cofferd on the socket: fixed answers by path."""

    daemon_threads = True

    def __init__(self, path: Path, answers: dict[str, bytes]) -> None:
        self.answers = answers
        super().__init__(str(path), OddHandler)


class OddHandler(socketserver.StreamRequestHandler):
    server: OddDaemon

    def handle(self) -> None:
        target = self.rfile.readline().split(b" ")[1].decode().split("?")[0]
        length = 0
        while (header := self.rfile.readline()) not in (b"\r\n", b""):
            name, _, value = header.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        self.rfile.read(length)
        body = self.server.answers.get(target, b'{"error":{"code":"NOT_FOUND","message":"x"}}')
        status = b"200 OK" if target in self.server.answers else b"404 Not Found"
        self.wfile.write(b"HTTP/1.1 " + status + b"\r\nConnection: close\r\n")
        self.wfile.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)


def test_what_fails_while_answering_becomes_an_error_answer(
    mcp: Callable[..., McpPipe],
) -> None:
    kbs = b'{"knowledge_bases":[{"name":"x","enabled":true,"created_at":"t","config":{},'
    kbs += b'"attached":"/a/caf\\udce9"}]}'
    answers = {
        "/api/v1/status": b"<html>not JSON</html>",
        "/api/v1/knowledge_bases": kbs,  # a path that is not UTF-8, as cofferd sends it
        "/api/v1/knowledge_bases/x/search": b'{"mode":"keyword","passages":[{"score":NaN,'
        b'"document_id":"d","title":"t","text":"t","path":"/p","relative_path":"p",'
        b'"line_start":1,"line_end":1,"heading":[]}]}',
        "/api/v1/knowledge_bases/x/documents": b'{"documents":[{"title":"no id"}],"total":1}',
        "/api/v1/mcp_invocations": b"{}",
    }
    with tempfile.TemporaryDirectory(prefix="cof", dir="/tmp") as run:
        server = OddDaemon(Path(run) / "odd.sock", answers)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            pipe = mcp(Path(run) / "odd.sock")
            status = pipe.call(1, "tools/call", {"name": "status"})["result"]  # a tool error
            assert status["isError"] and "is not JSON" in status["content"][0]["text"]
            listed = pipe.call(2, "tools/call", {"name": "list_knowledge_bases"})["result"]
            assert listed["structuredContent"]["knowledge_bases"][0]["attached"] == "/a/caf\ufffd"
            nan = pipe.call(
                3, "tools/call", {"name": "search", "arguments": {"kb": "x", "query": "q"}}
            )
            assert nan["error"]["code"] == -32603 and "not JSON" in nan["error"]["message"]
            assert pipe.call(4, "resources/list")["error"]["code"] == -32603  # a KeyError
            assert pipe.call(5, "ping")["result"] == {} and pipe.alive()
            assert not pipe.bad, pipe.bad
        finally:
            server.shutdown()
            server.server_close()


# --- the fuzzer ----------------------------------------------------------------------------


def test_fuzz_mcp_over_its_pipes(
    shared_daemon: Daemon, mcp: Callable[..., McpPipe], tmp_path: Path
) -> None:
    d = shared_daemon
    kb = new_kb(d, "fuzz")
    d.client.post("/api/v1/knowledge_bases", {"name": f"{kb}-b"})
    refs = seed_kb(d, f"{kb}-c")
    odd = non_utf8_kb(d, tmp_path, f"{kb}-odd")
    generator = Generator(random.Random(SEED), [kb, f"{kb}-b", f"{kb}-c", odd], [*refs, "heron.md"])
    pipe = mcp(d.socket)
    started = time.perf_counter()
    tally = run_fuzz(pipe, generator, CASES)
    elapsed = time.perf_counter() - started
    assert not tally.problems, "\n".join(tally.problems[:20])
    internal = [f"{kind}: {line[:200]!r} -> {answer}" for kind, line, answer in tally.internal]
    assert not internal, "\n".join(internal[:10])
    counts = Counter(o for c in tally.outcomes.values() for o in c.elements())
    assert counts["result"] > CASES // 10 and counts["no answer"] > 0, counts
    assert elapsed < 120, elapsed


def test_a_client_name_cannot_break_the_requests_it_names(
    shared_daemon: Daemon, mcp: Callable[..., McpPipe]
) -> None:
    kb = new_kb(shared_daemon, "name")
    pipe = mcp(shared_daemon.socket, initialize=False)
    name = "a\r\nContent-Length: 0\r\n\r\nb\u2028\x00"  # it went into an HTTP header as is
    pipe.call(1, "initialize", {**INITIALIZE, "clientInfo": {"name": name, "version": "0"}})
    arguments = {"kb": kb, "content": "# Named\n\nby a client"}
    added = pipe.call(2, "tools/call", {"name": "add_document", "arguments": arguments})
    assert not added["result"]["isError"], added
    events = shared_daemon.client.get("/api/v1/audit", kb=kb)["events"]
    assert "agent:aContent-Length: 0b" in {e["actor"] for e in events}
