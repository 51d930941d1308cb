"""The API fuzzer's parts, shared by tests/daemon/test_fuzz.py and bench.guards.fuzz: the
schema schemathesis generates from (the fuzz KB's names plugged in), the checks each answer
must pass, the KB rebuilt before each operation, a daemon behind a loopback forwarder, and
the hostile requests schemathesis does not send, with how each must be refused."""

from __future__ import annotations

import contextlib
import json
import random
import re
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import schemathesis
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.daemon import (
    CONTRACT,
    Daemon,
    check_response,
    cleanup,
    contract,
    exchange_raw,
    new_daemon,
)
from tests.support.forwarder import Forwarder

ACTOR = "fuzz"
FUZZ_KB = "fuzz"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def strict_json(ctx: Any, response: schemathesis.Response, case: schemathesis.Case) -> None:
    """Every answer, errors included, is JSON without NaN or Infinity."""
    try:
        json.loads(response.content, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise AssertionError(
            f"body is not strict JSON ({exc}): {response.content[:200]!r}"
        ) from None


CHECKS: list[Callable[..., Any]] = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
    strict_json,
]


@dataclass
class Known:
    """Names and document ids that exist, so generated paths can reach real resources."""

    names: list[str] = field(default_factory=lambda: [FUZZ_KB])
    doc_ids: list[str] = field(default_factory=list)


KNOWN = Known()
SEED_WORDS = ["alpha", "beta gamma", "Seed", "delta", "epsilon", "zeta eta", "Tracked", "a"]


def _plug_known(params: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Keep the generated path parameters, or swap in existing names and ids.

    Name and DocId are any string, so a string swapped for a string never turns a negative
    case positive; values that are not strings (negative mode) are left alone.
    """
    options = [params]
    if isinstance(params, dict) and isinstance(params.get("name"), str):
        for name in KNOWN.names:
            options.append({**params, "name": name})
            if isinstance(params.get("doc_id"), str):
                options += [{**params, "name": name, "doc_id": d} for d in KNOWN.doc_ids]
    return st.sampled_from(options)


def fuzz_schema(max_examples: int) -> Any:
    config = schemathesis.Config.from_dict(
        {
            "headers": {"X-Coffer-Actor": ACTOR},
            "request-timeout": 120,
            "generation": {
                "mode": "all",
                "max-examples": max_examples,
                "deterministic": True,
                "database": "none",
            },
            "phases": {"stateful": {"enabled": False}},
            # searches and greps often name words the seeded documents hold
            "dictionaries": {"words": {"values": SEED_WORDS}},
            "parameters": {
                "body.query": {"dictionary": "words", "probability": 0.3},
                "body.pattern": {"dictionary": "words", "probability": 0.3},
            },
        }
    )
    schema = schemathesis.openapi.from_path(CONTRACT, config=config)

    @schema.hook
    def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any]) -> Any:
        return _plug_known(path_parameters)

    return schema


def reset_fuzz_kb(base_url: str, scratch: Path) -> None:
    """(Re)create the `fuzz` knowledge base with one document of each kind."""
    s = requests.Session()
    s.headers["X-Coffer-Actor"] = "tests"
    kbs = f"{base_url}/api/v1/knowledge_bases"
    try:
        s.delete(f"{kbs}/{FUZZ_KB}", timeout=120)  # 404 when a fuzzed call deleted it
        _ok(s.post(kbs, json={"name": FUZZ_KB}, timeout=120))
        docs = f"{kbs}/{FUZZ_KB}/documents"
        ids = [
            _ok(s.post(docs, json={"content": "# Seed\n\nalpha beta gamma\n"}, timeout=120)),
            _ok(s.post(docs, files={"file": ("upload.txt", b"delta epsilon\n")}, timeout=120)),
        ]
        source = scratch / "tracked.md"
        source.write_text("# Tracked\n\nzeta eta theta\n")
        ids.append(_ok(s.post(docs, json={"source_path": str(source)}, timeout=120)))
        KNOWN.doc_ids = ids
    finally:
        s.close()


def _ok(response: requests.Response) -> str:
    assert response.status_code in (200, 201), (response.status_code, response.text)
    return str(response.json().get("document", {}).get("id", ""))


@contextmanager
def fuzz_target(tmp: Path) -> Iterator[tuple[Daemon, Forwarder]]:
    """A real daemon in `tmp`, reachable over TCP."""
    d = new_daemon(tmp)
    try:
        d.start()
        with Forwarder(d.socket) as fwd:
            yield d, fwd
    finally:
        if d.proc is not None:
            with contextlib.suppress(Exception):
                d.stop()  # also closes the log
        cleanup(d)


# -- hostile requests: what schemathesis does not send ------------------------------------------

SPEC_CODES = contract()["components"]["schemas"]["Error"]["properties"]["error"]["properties"][
    "code"
]["enum"]
HEAD = "Host: cofferd\r\nConnection: close\r\nX-Coffer-Actor: fuzz\r\n"
GOOD_VALUES = {"q": "a", "limit": "1", "offset": "0", "replace": "false", "kb": FUZZ_KB,
               "kind": "knowledge_base", "file_text": "true", "file": "a.md",
               "event": "kb_document_updated", "actor": "user", "client": "c",
               "tool": "t"}  # fmt: skip
# a valid value of each required body field, so that only the null one is wrong
REQUIRED = {"query": "alpha", "pattern": "a", "content": "x", "config": {}, "client": "c",
            "tool": "t", "duration_ms": 1, "outcome": "ok"}  # fmt: skip
NOT_HTTP = [
    b"G(T / HTTP/1.1\r\n\r\n",
    b"GET /api/v1/health HTTP/9.9\r\n\r\n",
    b"GET /api/v1/he alth HTTP/1.1\r\n\r\n",
    b"GET /api/v1/health HTTP/1.1\r\nBad Header\r\n\r\n",
    b"GET /api/v1/health HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
    b"POST /api/v1/search HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}",
    b"POST /api/v1/search HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n0\r\n\r\n",
    b"POST /api/v1/search HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n",
]


@dataclass(frozen=True)
class Hostile:
    """One request as bytes, and how it must be refused: (status, code, details.field);
    `operation` is the contract's `METHOD /template` it aims at ("" for none)."""

    what: str
    operation: str
    path: str
    raw: bytes
    expect: tuple[int, str, str | None]


def hostile_requests(rng: random.Random, doc_ids: list[str]) -> Iterator[Hostile]:
    values = {"name": FUZZ_KB, "doc_id": rng.choice(doc_ids or ["x"]), "kind": "knowledge_base"}
    for template, item in contract()["paths"].items():
        path = re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "x"), template)
        for method, op in item.items():
            if method != "parameters":
                yield from _hostile_for(rng, method.upper(), template, path, op)
    for raw in NOT_HTTP:
        yield Hostile("not HTTP", "", "", raw, (400, "BAD_REQUEST", None))
    junk = rng.choice([b"\x00", b"(", b"\x16\x03\x01", b" ", b"{"]) + rng.randbytes(40)
    yield Hostile("junk", "", "", junk + b"\r\n\r\n", (400, "BAD_REQUEST", None))


def _request(method: str, path: str, headers: str = "", body: bytes = b"") -> bytes:
    kind = "Content-Type: application/json\r\n" if body else ""
    head = f"{method} {path} HTTP/1.1\r\n{HEAD}{kind}{headers}Content-Length: {len(body)}\r\n"
    return head.encode("latin-1") + b"\r\n" + body


def _hostile_for(
    rng: random.Random, method: str, template: str, path: str, op: dict[str, Any]
) -> Iterator[Hostile]:
    label = f"{method} {template}"

    def case(what: str, query: str, expect: tuple[int, str, str | None], **kw: Any) -> Hostile:
        target = f"{path}?{query}" if query else path
        return Hostile(what, label, target, _request(method, target, **kw), expect)

    name = _unknown_name(rng)
    quoted = urllib.parse.quote(name, safe="")
    yield case("unknown parameter", f"{quoted}=1", (400, "VALIDATION_ERROR", name))
    for param in op.get("parameters", []):
        if param.get("in") != "query":
            continue
        given, good = param["name"], GOOD_VALUES[param["name"]]
        yield case("repeated", f"{given}={good}&{given}={good}", (400, "VALIDATION_ERROR", given))
        bad = _bad_value(rng, param["schema"])
        if bad is not None:
            quoted = urllib.parse.quote(bad, safe="")
            yield case("mistyped", f"{given}={quoted}", (400, "VALIDATION_ERROR", given))
    url, line = rng.randint(8_200, 60_000), rng.randint(70_000, 300_000)
    yield case("long URL", "x" * url, (414, "URI_TOO_LONG", None))
    yield case("long request line", "x" * line, (414, "URI_TOO_LONG", None))
    size = rng.choice([rng.randint(8_200, 16_000), rng.randint(16_500, 300_000)])
    yield case(
        "long header", "", (431, "HEADERS_TOO_LARGE", None), headers=f"X-L: {'x' * size}\r\n"
    )
    many = "".join(f"X-{i}: a\r\n" for i in range(rng.randint(129, 400)))
    yield case("many headers", "", (431, "HEADERS_TOO_LARGE", None), headers=many)
    schema = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if schema:
        for prop, body in _null_bodies(schema):
            yield case("null", "", (400, "VALIDATION_ERROR", prop), body=body)


def _unknown_name(rng: random.Random) -> str:
    return rng.choice(
        ["x", "limit[]", "LIMIT", "q ", "", "\u00e9t\u00e9", "a" * 300, "\u6771\u4eac", "%zz", "_"]
    ) + rng.choice(["", str(rng.randint(0, 99))])


def _bad_value(rng: random.Random, schema: dict[str, Any]) -> str | None:
    """A value not of a parameter's type; None for any text (nothing is not text)."""
    if schema.get("type") == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        edges = [str(low - 1)] if low is not None else []
        edges += [str(high + 1)] if high is not None else []
        return rng.choice([*edges, "1.5", "1e3", "+1", " 1", "0x10", "1_0", "", "x", "\u0661",
                           "9" * rng.randint(20, 400)])  # fmt: skip
    if schema.get("type") == "boolean":
        return rng.choice(["yes", "no", "1", "0", "True", "FALSE", "", "on", "t"])
    if "enum" in schema:
        return rng.choice(["other", "", "KNOWLEDGE_BASE", "knowledge_base "])
    return None


def _null_bodies(schema: dict[str, Any]) -> Iterator[tuple[str, bytes]]:
    """For each property whose type does not list null: a body with it null, all else valid."""
    names = schema.get("required", [])
    required = {k: REQUIRED.get(k, "fz" + uuid.uuid4().hex[:6]) for k in names}
    for prop, spec in schema["properties"].items():
        if not _nullable(spec):
            yield prop, json.dumps({**required, prop: None}).encode()


def _nullable(spec: dict[str, Any]) -> bool:
    if "$ref" in spec:
        node: Any = contract()
        for part in spec["$ref"].lstrip("#/").split("/"):
            node = node[part]
        return _nullable(node)
    kinds = spec.get("type", [])
    return (
        "null" in (kinds if isinstance(kinds, list) else [kinds])
        or None in spec.get("enum", [])
        or any(_nullable(o) for o in spec.get("oneOf", []))
    )


def send_raw(path: Path, raw: bytes, timeout: float = 60) -> tuple[int, Any]:
    """(status, body) of bytes sent as they are; the body as JSON, or the bytes if it is not."""
    answer = exchange_raw(path, raw, timeout)
    head, _, body = answer.partition(b"\r\n\r\n")
    match = re.match(rb"HTTP/1\.[01] (\d{3})", head)
    if not match:
        return 0, answer[:300]
    found = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    body = body[: int(found.group(1))] if found else body
    try:
        return int(match.group(1)), json.loads(body, parse_constant=_refuse_constant)
    except ValueError:
        return int(match.group(1)), body[:300]


def judge(hostile: Hostile, status: int, reply: Any) -> str | None:
    """What is wrong with the answer to a hostile request; None when nothing is."""
    status_, code, field_ = hostile.expect
    if status == 0:
        return f"no HTTP answer: {reply!r}"
    error = reply.get("error") if isinstance(reply, dict) else None
    if not isinstance(error, dict) or set(reply) != {"error"}:
        return f"{status} not the envelope: {reply!r}"
    if set(error) != {"code", "message", "details"} or error["code"] not in SPEC_CODES:
        return f"{status} an envelope without a stable code: {reply!r}"
    if (status, error["code"]) != (status_, code):
        return f"{status} {error['code']}, expected {status_} {code}: {error['message']!r}"
    if field_ is not None and error["details"].get("field") != field_:
        return f"names {error['details'].get('field')!r}, not {field_!r}"
    if hostile.operation:
        try:
            check_response(hostile.operation.split()[0], hostile.path, status, reply)
        except AssertionError as exc:
            return str(exc)
    return None
