"""`cofferctl lsp` never leaves the editor waiting (issue 33 §1): with cofferd stopped or
killed every request is answered within a bound and `shutdown` is answered; a bad frame
costs exactly that message; a request after `shutdown` is refused; a URI holding NUL is a
clear error; a note over the budget says so. A real `cofferctl lsp` over pipes, a real
daemon, a raw client (no library's own waiting in the way)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import Daemon
from tests.support.helpers import new_vault
from tests.support.lsp_pipe import BOUND_S, RawClient, frame, open_note

INVALID_REQUEST, INVALID_PARAMS, INTERNAL_ERROR, CANCELLED = -32600, -32602, -32603, -32800


NOTE = "# Today\n\nsee [[plan#Budget]] and [[nowhere]]\n[[pl\n"


@pytest.fixture
def vault(daemon: Daemon) -> Iterator[tuple[Daemon, str, RawClient]]:
    kb = new_vault(daemon, "rel", {"plan.md": "# Plan\n\n## Budget\n\nnumbers\n"})
    client = RawClient(daemon.env()).start(daemon.docs(kb))
    try:
        yield daemon, kb, client
    finally:
        client.kill()


def every_request(uri: str, other: str) -> list[tuple[str, dict[str, Any]]]:
    at = {"textDocument": {"uri": uri}, "position": {"line": 2, "character": 8}}
    span = {"start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 0}}
    return [
        ("textDocument/definition", at),
        ("textDocument/hover", at),
        ("textDocument/references", at),
        ("textDocument/completion", {**at, "position": {"line": 3, "character": 4}}),
        ("textDocument/documentSymbol", {"textDocument": {"uri": uri}}),
        ("workspace/symbol", {"query": "numbers"}),
        ("textDocument/codeAction", {**at, "range": span, "context": {"diagnostics": []}}),
        ("textDocument/rename", {**at, "position": {"line": 0, "character": 3}, "newName": "T"}),
        ("workspace/willRenameFiles", {"files": [{"oldUri": other, "newUri": uri + ".md"}]}),
        ("textDocument/definition", at),
    ]


def test_a_stopped_daemon_never_freezes_the_editor(
    vault: tuple[Daemon, str, RawClient],
) -> None:
    d, kb, client = vault
    uri = (d.docs(kb) / "today.md").as_uri()
    assert [x["code"] for x in open_note(client, uri, NOTE)] == ["broken-link"]
    assert d.proc is not None
    os.kill(d.proc.pid, signal.SIGSTOP)
    try:
        fixed = NOTE.replace(" and [[nowhere]]", "")
        change = {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": fixed}]}
        client.notify("textDocument/didChange", change)  # its inspection waits on the daemon
        started = time.monotonic()
        asked = [
            client.send(m, p) for m, p in every_request(uri, (d.docs(kb) / "plan.md").as_uri())
        ]
        slow = client.send("workspace/symbol", {"query": "numbers"})
        client.notify("$/cancelRequest", {"id": slow})
        for request_id in asked:
            answer = client.answer(request_id, within=BOUND_S - (time.monotonic() - started))
            assert answer.get("error", {}).get("code") != INTERNAL_ERROR, answer
        assert client.answer(slow)["id"] == slow  # cancelled or answered, once
        assert time.monotonic() - started < BOUND_S
        os.kill(d.proc.pid, signal.SIGCONT)
        assert client.diagnostics(uri) == []  # the change is inspected once it answers
        assert client.end() == 0  # shutdown answered, exit honoured
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)


def test_shutdown_is_answered_while_the_daemon_is_stopped(
    vault: tuple[Daemon, str, RawClient],
) -> None:
    d, kb, client = vault
    uri = (d.docs(kb) / "today.md").as_uri()
    open_note(client, uri, NOTE)
    assert d.proc is not None
    os.kill(d.proc.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        client.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri}, "contentChanges": [{"text": "x"}]},
        )
        client.send("workspace/symbol", {"query": "numbers"})  # waits on the daemon
        assert client.end() == 0
        assert time.monotonic() - started < BOUND_S
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)


def test_a_killed_daemon_gets_empty_answers_and_shutdown_is_answered(
    vault: tuple[Daemon, str, RawClient],
) -> None:
    d, kb, client = vault
    uri = (d.docs(kb) / "today.md").as_uri()
    open_note(client, uri, NOTE)
    assert d.proc is not None
    os.kill(d.proc.pid, signal.SIGSTOP)  # stopped with requests under way, then killed
    asked = [client.send(m, p) for m, p in every_request(uri, (d.docs(kb) / "plan.md").as_uri())]
    d.proc.kill()
    d.proc.wait()
    started = time.monotonic()
    for request_id in asked:
        answer = client.answer(request_id)
        assert answer.get("error", {}).get("code") != INTERNAL_ERROR, answer
    hover = client.ask("textDocument/hover", every_request(uri, uri)[1][1])
    assert "plan.md" in hover["result"]["contents"]["value"]  # the last inspection serves
    assert client.ask("workspace/symbol", {"query": "numbers"})["result"] == []
    assert client.end() == 0
    assert time.monotonic() - started < BOUND_S


GOOD = {"jsonrpc": "2.0", "id": 102, "method": "textDocument/documentSymbol",
        "params": {"textDocument": {"uri": "file:///nowhere/a.md"}}}  # fmt: skip
BODY = json.dumps({"jsonrpc": "2.0", "id": 109, "method": "shutdown"}).encode()
BAD_FRAMES = {
    "a header line over 8 KB": b"Content-Length: %d\r\nX-Long: %s\r\n\r\n%s"
    % (len(BODY), b"x" * 9000, BODY),
    "no Content-Length": b"Content-Type: application/json\r\n\r\n" + BODY,
    "two Content-Lengths that disagree": b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s"
    % (len(BODY), len(BODY) + 7, BODY),
    "a Content-Length that is no number": b"Content-Length: 4x\r\n\r\n" + BODY,
    "a Content-Length too large": b"Content-Length: 99999999999999\r\n\r\n" + BODY,
}


@pytest.mark.parametrize("bad", list(BAD_FRAMES), ids=list(BAD_FRAMES))
def test_a_bad_frame_costs_only_that_message(bad: str, tmp_path: Path) -> None:
    env = {**os.environ, "COFFER_SOCKET": str(tmp_path / "none.sock"), "COFFER_HOME": str(tmp_path)}
    client = RawClient(env)
    try:
        client.start()
        client.write(BAD_FRAMES[bad])
        assert client.answer(None)["error"]["code"] in (-32700, INVALID_REQUEST)
        client.write(frame(GOOD))
        assert client.answer(102) == {"jsonrpc": "2.0", "id": 102, "result": []}
        assert 109 not in client.answers  # the bad message was not read as a request
        client.write(BAD_FRAMES[bad] + frame({**GOOD, "id": 103}))  # both at once
        assert client.answer(103)["result"] == []
        assert client.end() == 0
    finally:
        client.kill()


def test_after_shutdown_requests_are_refused_and_a_nul_in_a_uri_is_a_clear_error(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "COFFER_SOCKET": str(tmp_path / "none.sock"), "COFFER_HOME": str(tmp_path)}
    client = RawClient(env)
    try:
        client.start()
        nul = "file:///tmp/a%00b.md"
        at = {"textDocument": {"uri": nul}, "position": {"line": 0, "character": 0}}
        rename = {"files": [{"oldUri": nul, "newUri": "file:///tmp/c.md"}]}
        for method, params in [
            ("textDocument/definition", at),
            ("workspace/willRenameFiles", rename),
        ]:
            refused = client.ask(method, params)["error"]
            assert refused["code"] == INVALID_PARAMS and "NUL" in refused["message"]
        client.notify("textDocument/didOpen", {"textDocument": {"uri": nul, "text": "x"}})
        assert client.ask("shutdown")["result"] is None
        after = client.ask("textDocument/documentSymbol", {"textDocument": {"uri": nul}})
        assert after["error"]["code"] == INVALID_REQUEST
        client.notify("exit", None)
        assert client.proc.wait(BOUND_S) == 0
    finally:
        client.kill()


def test_a_note_over_the_budget_says_why_it_has_no_diagnostics(
    vault: tuple[Daemon, str, RawClient],
) -> None:
    d, kb, client = vault
    uri = (d.docs(kb) / "huge.md").as_uri()
    found = open_note(client, uri, "[[nowhere]] " * (17 * 1024 * 1024 // 12))
    (said,) = found
    assert said["code"] == "too-large" and "MiB" in said["message"]
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri) == []  # withdrawn, and the note let go
    assert client.end() == 0


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_open_notes_cost_a_bounded_multiple_of_their_text_and_closing_gives_it_back(
    vault: tuple[Daemon, str, RawClient],
) -> None:
    """200 notes of 100 KB, 2,000 links each (cofferd's budget): the server held 11 times
    their text, and half of it after they were closed."""
    d, kb, client = vault
    body = ("word [[plan]] " * 7200)[:100_000]
    uris = [(d.docs(kb) / f"many/n{i}.md").as_uri() for i in range(200)]
    started = rss_mib(client.proc.pid)
    for n, uri in enumerate(uris):
        item = {"uri": uri, "languageId": "markdown", "version": 1, "text": body + str(n)}
        client.notify("textDocument/didOpen", {"textDocument": item})
    client.diagnostics(uris[-1], within=120)
    opened = rss_mib(client.proc.pid) - started
    for uri in uris:
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    client.ask("textDocument/documentSymbol", {"textDocument": {"uri": uris[-1]}})
    deadline = time.monotonic() + 10
    while (left := rss_mib(client.proc.pid) - started) > opened / 4:
        assert time.monotonic() < deadline, f"{left:.0f} MiB of {opened:.0f} MiB still held"
        time.sleep(0.1)
    assert opened < 4 * len(uris) * len(body) / 2**20, f"{opened:.0f} MiB for 19 MiB of text"
    assert client.end() == 0
