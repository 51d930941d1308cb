"""Bad requests get a clear error in the envelope, never a 500, never JSON that is not JSON."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import time
import uuid
from typing import Any

import pytest

from cofferctl.client import exchange
from cofferd.infrastructure.storage import sqlite
from tests.support.daemon import Daemon, check_response, contract, exchange_raw, wait_for

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


# -- what aiohttp's parser refuses, before any handler runs ----------------------------------


def refusal(d: Daemon, request: bytes) -> tuple[int, dict[str, Any]]:
    """Send bytes as they are, however broken; (status, the envelope they were refused in)."""
    return envelope_of(exchange_raw(d.socket, request, timeout=30))


def envelope_of(raw: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)}
    assert headers.get("content-type", "").startswith("application/json"), raw[:300]
    reply = json.loads(body[: int(headers["content-length"])], parse_constant=_no_constants)
    assert set(reply) == {"error"} and set(reply["error"]) == {"code", "message", "details"}
    assert reply["error"]["code"] in CODES and reply["error"]["message"], reply
    return int(status_line.split(" ")[1]), reply


CODES = contract()["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"][
    "enum"
]
HEAD = "Host: cofferd\r\nConnection: close\r\n"
SEARCH = f"POST {KB}/search HTTP/1.1\r\n{HEAD}Content-Type: application/json\r\n"
PARSER_REFUSALS = {
    "request line over the parser's limit": (
        f"GET /api/v1/health?{'x' * 70_000} HTTP/1.1\r\n{HEAD}\r\n", 414, "URI_TOO_LONG"),
    "header value over the parser's limit": (
        f"GET /api/v1/health HTTP/1.1\r\n{HEAD}X-Long: {'x' * 20_000}\r\n\r\n", 431,
        "HEADERS_TOO_LARGE"),
    "header of 70 KB": (
        f"GET /api/v1/health HTTP/1.1\r\n{HEAD}X-Long: {'x' * 70_000}\r\n\r\n", 431,
        "HEADERS_TOO_LARGE"),
    "header name over the parser's limit": (
        f"GET /api/v1/health HTTP/1.1\r\n{HEAD}X{'x' * 20_000}: 1\r\n\r\n", 431,
        "HEADERS_TOO_LARGE"),
    "headers of a megabyte": (
        f"GET /api/v1/health HTTP/1.1\r\n{HEAD}"
        + "".join(f"X-{i}: {'x' * 60_000}\r\n" for i in range(20)) + "\r\n", 431,
        "HEADERS_TOO_LARGE"),
    "too many headers": (
        f"GET /api/v1/health HTTP/1.1\r\n{HEAD}"
        + "".join(f"X-{i}: a\r\n" for i in range(200)) + "\r\n", 431, "HEADERS_TOO_LARGE"),
    "bad method": (f"G(T /api/v1/health HTTP/1.1\r\n{HEAD}\r\n", 400, "BAD_REQUEST"),
    "not HTTP": ("hello there\r\n\r\n", 400, "BAD_REQUEST"),
    "TLS on the socket": ("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400, "BAD_REQUEST"),
    "bad version": (f"GET /api/v1/health HTTP/9.9\r\n{HEAD}\r\n", 400, "BAD_REQUEST"),
    "bad request target": (f"GET /api/v1/he alth HTTP/1.1\r\n{HEAD}\r\n", 400, "BAD_REQUEST"),
    "NUL in the URL": (f"GET /api/v1/he\x00alth HTTP/1.1\r\n{HEAD}\r\n", 400, "BAD_REQUEST"),
    "malformed header": (f"GET /api/v1/health HTTP/1.1\r\n{HEAD}Bad Header\r\n\r\n", 400,
                         "BAD_REQUEST"),
    "bad chunk size": (f"{SEARCH}Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400,
                       "BAD_REQUEST"),
    "bad content length": (f"{SEARCH}Content-Length: abc\r\n\r\n", 400, "BAD_REQUEST"),
    "two content lengths": (f"{SEARCH}Content-Length: 1\r\nContent-Length: 2\r\n\r\n{{}}",
                            400, "BAD_REQUEST"),
    "chunked and a length": (
        f"{SEARCH}Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
        "BAD_REQUEST"),
}  # fmt: skip


@pytest.mark.parametrize("case", PARSER_REFUSALS)
def test_what_the_parser_refuses_is_answered_in_the_envelope(
    shared_daemon: Daemon, case: str
) -> None:
    request, status, code = PARSER_REFUSALS[case]
    got, reply = refusal(shared_daemon, request.encode("latin-1"))
    assert (got, reply["error"]["code"]) == (status, code), reply
    assert shared_daemon.client.get("/api/v1/health")["status"] == "ok"


def test_a_chunk_broken_after_the_head_is_refused(shared_daemon: Daemon) -> None:
    # the handler is already reading the body when the broken chunk size arrives
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(15)
        sock.connect(str(shared_daemon.socket))
        sock.sendall(f'{SEARCH}Transfer-Encoding: chunked\r\n\r\n5\r\n{{"que\r\n'.encode())
        time.sleep(0.3)
        sock.sendall(b"zz\r\nabc\r\n0\r\n\r\n")
        raw = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                raw += chunk
    status, reply = envelope_of(raw)
    assert (status, reply["error"]["code"]) == (400, "BAD_REQUEST")


# -- query strings: only what the contract lists, once, of its type ---------------------------

PATH_VALUES = {"name": "absent-kb", "doc_id": "absent", "kind": "knowledge_base", "trash_id": "x"}
OPERATIONS = [
    (method.upper(), re.sub(r"\{(\w+)\}", lambda m: PATH_VALUES[m.group(1)], template), op)
    for template, item in contract()["paths"].items()
    for method, op in item.items()
    if method != "parameters"
]
GOOD = {"q": "a", "limit": "1", "offset": "0", "replace": "false", "file_text": "true",
        "kb": "notes", "kind": "knowledge_base", "file": "a.md", "event": "kb_document_updated",
        "actor": "user", "client": "c", "tool": "t"}  # fmt: skip


def query_refusal(d: Daemon, method: str, path: str) -> tuple[int, dict[str, Any]]:
    head = f"{method} {path} HTTP/1.1\r\n{HEAD}Content-Length: 0\r\n\r\n"
    status, reply = refusal(d, head.encode("latin-1"))
    check_response(method, path, status, reply)
    return status, reply


@pytest.mark.parametrize(
    ("method", "path", "op"), OPERATIONS, ids=[o["operationId"] for *_, o in OPERATIONS]
)
def test_every_operation_refuses_unknown_query_parameters(
    shared_daemon: Daemon, method: str, path: str, op: dict[str, Any]
) -> None:
    # a KB that does not exist: were the parameter ignored, a write would change nothing
    status, reply = query_refusal(shared_daemon, method, f"{path}?colour=red")
    assert (status, reply["error"]["code"]) == (400, "VALIDATION_ERROR"), reply
    assert reply["error"]["details"]["field"] == "colour"
    assert "colour" in reply["error"]["message"]


REPEATED = [
    (method, path, p["name"])
    for method, path, op in OPERATIONS
    for p in op.get("parameters", [])
    if p.get("in") == "query"
]


@pytest.mark.parametrize(("method", "path", "name"), REPEATED)
def test_a_query_parameter_given_twice_is_refused(
    shared_daemon: Daemon, method: str, path: str, name: str
) -> None:
    query = f"{name}={GOOD[name]}&{name}={GOOD[name]}"
    status, reply = query_refusal(shared_daemon, method, f"{path}?{query}")
    assert (status, reply["error"]["code"]) == (400, "VALIDATION_ERROR"), reply
    assert reply["error"]["details"]["field"] == name


DOCS = f"{KB}/documents"
BAD_VALUES = [
    *[("GET", DOCS, "limit", v) for v in ["1.5", "1e3", "+1", "%201", "%D9%A1", "0x10", "1_0",
                                          "", "x", "-1", "0", "501", "9" * 30]],
    *[("GET", DOCS, "offset", v) for v in ["-1", "2147483648", "1.0", "true"]],
    *[("GET", "/api/v1/audit", "limit", v) for v in ["0", "1001", "ten"]],
    ("GET", "/api/v1/mcp_invocations", "limit", "true"),
    *[("POST", DOCS, "replace", v) for v in ["yes", "True", "1", "", "perhaps"]],
    *[("GET", "/api/v1/resources", "kind", v) for v in ["widget", "", "KNOWLEDGE_BASE"]],
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "name", "value"), BAD_VALUES)
def test_query_values_are_typed_strictly(
    shared_daemon: Daemon, method: str, path: str, name: str, value: str
) -> None:
    status, reply = query_refusal(shared_daemon, method, f"{path}?{name}={value}")
    assert (status, reply["error"]["code"]) == (400, "VALIDATION_ERROR"), reply
    assert reply["error"]["details"]["field"] == name


def test_the_documented_query_parameters_are_taken(shared_daemon: Daemon) -> None:
    c = shared_daemon.client
    assert c.get(f"{KB}/documents", q="", limit=500, offset=2**31 - 1)["limit"] == 500
    assert c.get("/api/v1/audit", kb="notes", limit=1000)["events"] is not None
    assert c.get("/api/v1/mcp_invocations", limit=1)["invocations"] is not None
    assert c.get("/api/v1/resources", kind="knowledge_base")["resources"]


# -- null in a body: only where the contract's type lists it -----------------------------------


def test_null_is_refused_where_the_contract_gives_a_type(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = "nulls-" + uuid.uuid4().hex[:6]
    d.client.post("/api/v1/knowledge_bases", {"name": kb})
    path = d.docs(kb) / "plan.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Plan\n\nfirst")
    doc = wait_for(lambda: d.client.get(d.client.kb(kb, "/documents"))["documents"])[0]
    edit = d.client.kb(kb, f"/documents/{doc['id']}")
    for method, where, body, field in [
        ("PUT", edit, {"content": "agent text", "expected_sha256": None}, "expected_sha256"),
        ("POST", d.client.kb(kb, "/documents"), {"source_path": None, "content": "x"},
         "source_path"),
        ("POST", d.client.kb(kb, "/documents"), {"content": None, "source_path": "/x"},
         "content"),
    ]:  # fmt: skip
        status, reply = d.client.send(method, where, body)
        assert (status, reply["error"]["code"]) == (400, "VALIDATION_ERROR"), reply
        assert reply["error"]["details"]["field"] == field
    assert path.read_text() == "# Plan\n\nfirst"
    assert d.client.get(d.client.kb(kb, "/documents"))["total"] == 1
    # where the contract lists null, it is the same as leaving the field out
    added = d.client.post(d.client.kb(kb, "/documents"), {"content": "# Note", "title": None})
    assert added["document"]["title"] == "Note"
