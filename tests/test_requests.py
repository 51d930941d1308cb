"""Bad requests get a clear error in the envelope, never a 500, never JSON that is not JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cofferctl.client import exchange
from cofferd.infrastructure import sqlite
from tests.daemon import Daemon

KB = "/api/v1/knowledge_bases/notes"


def raw(d: Daemon, head: str, body: bytes = b"") -> tuple[int, dict[str, str], Any]:
    """Send bytes as they are; (status, headers, strict JSON body)."""
    request = head.replace("\n", "\r\n") + f"Content-Length: {len(body)}\r\n\r\n"
    status, data = exchange(d.socket, request.encode("latin-1") + body, 60)
    return status, {}, json.loads(data, parse_constant=_no_constants)


def _no_constants(name: str) -> Any:
    raise AssertionError(f"{name} is not JSON")


def post(d: Daemon, path: str, body: bytes, content_type: str = "application/json") -> Any:
    head = f"POST {path} HTTP/1.1\nHost: cofferd\nConnection: close\nContent-Type: {content_type}\n"
    return raw(d, head, body)


BAD_BODIES = [
    (f"{KB}/grep", b'{"pattern": "a\\u0000b"}'),
    (f"{KB}/grep", b'{"pattern": "\\ud800"}'),
    (f"{KB}/grep", b'{"pattern": "x", "ignore_case": 0}'),
    (f"{KB}/search", b'{"query": "x", "top_k": true}'),
    (f"{KB}/search", b'{"query": ""}'),
    (f"{KB}/documents", b'{"content": "bad \\udfff text"}'),
    (f"{KB}/documents", json.dumps({"source_path": "/" + "a" * 5000}).encode()),
    (f"{KB}/documents", b'{"source_path": "", "content": "x"}'),
    ("/api/v1/mcp_invocations",
     b'{"client": "c", "tool": "t", "duration_ms": 1e999, "outcome": "ok"}'),
    ("/api/v1/knowledge_bases", b'{"name": "C\\u00fc"}'),
    ("/api/v1/knowledge_bases", b'{"name": ""}'),
    ("/api/v1/knowledge_bases", b"[" * 100_000 + b"]" * 100_000),
    (f"{KB}/search", b'{"query": "x"' + b', "a": {' * 50_000 + b"}" * 50_000 + b"}"),
    (f"{KB}/documents?replace=perhaps", b'{"content": "x"}'),
    (f"{KB}/search", b'{"query": "x", "filters": {"folder": "../.."}}'),
    (f"{KB}/search", b'{"query": "x", "filters": {"tags": "a", "extra": 1}}'),
    ("/api/v1/search", b'{"query": "x", "filters": {"updated_after": "soon"}}'),
]  # fmt: skip


@pytest.mark.parametrize(("path", "body"), BAD_BODIES, ids=range(len(BAD_BODIES)))
def test_bad_bodies_are_refused_clearly(shared_daemon: Daemon, path: str, body: bytes) -> None:
    status, _, reply = post(shared_daemon, path, body)
    assert 400 <= status < 500, reply
    assert set(reply) == {"error"} and reply["error"]["code"] and reply["error"]["message"]


def test_no_stored_value_makes_a_listing_invalid_json(daemon: Daemon) -> None:
    # what the API refuses (1e999 above) can still reach the index another way
    conn = sqlite.connect(daemon.home / "coffer.db")
    with sqlite.atomic(conn):
        conn.execute(
            "INSERT INTO mcp_invocations (at, client, tool, duration_ms, outcome)"
            " VALUES ('2026-12-03T00:00:00.000Z', 'c', 't', ?, 'ok')",
            (float("inf"),),
        )
    conn.close()
    head = "GET /api/v1/mcp_invocations HTTP/1.1\nHost: cofferd\nConnection: close\n"
    status, _, reply = raw(daemon, head)  # strict JSON: no Infinity, no NaN
    if status == 200:
        assert isinstance(reply["invocations"], list)
    else:  # it fails loudly, in the envelope, rather than answering what no parser reads
        assert status == 500 and set(reply) == {"error"} and reply["error"]["code"]


@pytest.mark.parametrize(
    "content_type",
    ["multipart/form-data", "multipart/form-data; boundary=", "multipart/form-data; boundary=x"],
)
def test_broken_uploads_are_refused(shared_daemon: Daemon, content_type: str) -> None:
    status, _, reply = post(shared_daemon, f"{KB}/documents", b"--x\r\nnonsense", content_type)
    assert status == 400, reply


def test_a_nul_in_an_upload_name_is_refused(shared_daemon: Daemon) -> None:
    body = (
        b'--b\r\nContent-Disposition: form-data; name="file"; filename="a\x00b.md"\r\n\r\n'
        b"# hi\r\n--b--\r\n"
    )
    status, _, reply = post(
        shared_daemon, f"{KB}/documents", body, "multipart/form-data; boundary=b"
    )
    assert status == 400, reply


def test_an_offset_beyond_any_integer_is_refused(shared_daemon: Daemon) -> None:
    head = f"GET {KB}/documents?offset={2**70} HTTP/1.1\nHost: cofferd\nConnection: close\n"
    status, _, reply = raw(shared_daemon, head)
    assert status == 400 and reply["error"]["code"] == "VALIDATION_ERROR"


def test_wrong_method_names_the_allowed_ones(shared_daemon: Daemon) -> None:
    request = f"PUT {KB}/search HTTP/1.1\r\nHost: cofferd\r\nConnection: close\r\n\r\n"
    status, data = exchange(shared_daemon.socket, request.encode(), 30)
    assert status == 405
    assert json.loads(data)["error"]["code"] == "METHOD_NOT_ALLOWED"


def test_wrong_method_carries_an_allow_header(shared_daemon: Daemon) -> None:
    import socket

    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(shared_daemon.socket))
        sock.sendall(f"PUT {KB}/search HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(4096)
    assert b"\r\nAllow: POST" in head


@pytest.mark.parametrize("where", ["url", "header"])
def test_very_long_urls_and_headers_get_the_envelope(shared_daemon: Daemon, where: str) -> None:
    long = "x" * 10_000
    if where == "url":
        head = f"GET /api/v1/health?{long} HTTP/1.1\nHost: cofferd\nConnection: close\n"
    else:
        head = f"GET /api/v1/health HTTP/1.1\nHost: cofferd\nX-Long: {long}\nConnection: close\n"
    status, _, reply = raw(shared_daemon, head)
    assert status in (414, 431) and reply["error"]["code"] in ("URI_TOO_LONG", "HEADERS_TOO_LARGE")
