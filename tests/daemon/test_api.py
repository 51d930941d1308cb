"""The API of a real cofferd on a real socket; every response is checked against the contract."""

from __future__ import annotations

import json
import typing
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiohttp.http_exceptions import BadHttpMessage, BadHttpMethod, LineTooLong
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, BeforeValidator
from pydantic.fields import FieldInfo

from cofferctl.client import ApiError
from cofferd.domain import errors
from cofferd.surfaces.http import api, json_shapes
from cofferd.surfaces.http.error_envelope import (
    HTTP_CODES,
    PARSER_FIELD_LIMIT,
    PARSER_LIMIT,
    STATUSES,
    error_response,
    from_exception,
)
from cofferd.surfaces.http.query_params import query_model
from tests.support.daemon import Daemon, contract, wait_for
from tests.support.helpers import write


def new_kb(d: Daemon, **config: Any) -> str:
    name = "kb-" + uuid.uuid4().hex[:8]
    d.client.post("/api/v1/knowledge_bases", {"name": name, "config": config})
    return name


def error_of(call: Any) -> ApiError:
    with pytest.raises(ApiError) as err:
        call()
    return err.value


def search(d: Daemon, kb: str, query: str, top_k: int = 10) -> list[dict[str, Any]]:
    body = {"query": query, "top_k": top_k}
    passages: list[dict[str, Any]] = d.client.post(d.client.kb(kb, "/search"), body)["passages"]
    return passages


def test_every_route_is_in_the_contract() -> None:
    spec = contract()["paths"]
    for route in api.routes:
        assert isinstance(route, api.web.RouteDef)
        assert route.path in spec, f"{route.path} is missing from docs/openapi.yaml"
        assert route.method.lower() in spec[route.path], f"{route.method} {route.path}"
    served = {(r.method.lower(), r.path) for r in api.routes}  # type: ignore[union-attr]
    for path, item in spec.items():
        for method in item:
            if method != "parameters":
                assert (method, path) in served, f"contract has {method} {path}; server does not"


def test_every_domain_error_has_its_http_status() -> None:
    """The domain says codes; the HTTP surface alone says their statuses, one for each
    error class (a class added without a status fails here), by family."""
    classes = [c for c in vars(errors).values() if isinstance(c, type)]
    domain = [c for c in classes if issubclass(c, errors.CofferError)]
    missing = [c.__name__ for c in domain if c.code not in STATUSES]
    assert not missing, f"no HTTP status for {missing} in error_envelope.STATUSES"
    assert set(STATUSES) == {c.code for c in domain}, "a status for a code no error has"
    assert not any(hasattr(c, "status") for c in domain), "a status in the domain"
    for cls in domain:
        family = {errors.NotFound: 404, errors.Conflict: 409, errors.ValidationFailed: 400}
        for parent, status in family.items():
            if issubclass(cls, parent) and cls is not parent:
                assert STATUSES[cls.code] == status, cls.__name__


def test_every_error_has_the_same_shape() -> None:
    classes = [c for c in vars(errors).values() if isinstance(c, type)]
    coded = [c for c in classes if issubclass(c, errors.CofferError) and "code" in c.__dict__]
    contract_codes = contract()["components"]["schemas"]["Error"]["properties"]["error"][
        "properties"
    ]["code"]["enum"]
    for cls in coded:
        exc = cls.__new__(cls)
        errors.CofferError.__init__(exc, "message", key="value")
        response = from_exception(exc)
        body = json.loads(response.body)  # type: ignore[arg-type]
        assert response.status == STATUSES[cls.code]
        assert body == {
            "error": {"code": cls.code, "message": "message", "details": {"key": "value"}}
        }
        assert cls.code in contract_codes
    unexpected = from_exception(RuntimeError("secret internals"))
    assert unexpected.status == 500 and b"secret" not in unexpected.body  # type: ignore[operator]
    # what the server itself refuses (unknown routes, what aiohttp's parser refuses)
    said = {*HTTP_CODES.values(), "INTERNAL_ERROR"}
    assert said <= set(contract_codes)
    assert set(contract_codes) == said | {c.code for c in coded}, "a code nothing answers"
    refusals = [
        (from_exception(LineTooLong(b"/x", PARSER_LIMIT)), 414, "URI_TOO_LONG"),
        (from_exception(LineTooLong(b"x", PARSER_FIELD_LIMIT)), 431, "HEADERS_TOO_LARGE"),
        (from_exception(BadHttpMessage("Too many headers received")), 431, "HEADERS_TOO_LARGE"),
        (from_exception(BadHttpMethod("G(T / HTTP/1.1")), 400, "BAD_REQUEST"),
        (error_response(405, HTTP_CODES[405], "message"), 405, "METHOD_NOT_ALLOWED"),
    ]
    for response, status, code in refusals:
        body = json.loads(response.body)  # type: ignore[arg-type]
        assert (response.status, body["error"]["code"]) == (status, code)
        assert set(body["error"]) == {"code", "message", "details"} and body["error"]["message"]


def _resolved(item: dict[str, Any]) -> dict[str, Any]:
    if "$ref" not in item:
        return item
    node: Any = contract()
    for part in item["$ref"].lstrip("#/").split("/"):
        node = node[part]
    return _resolved(node)


def _query_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """What a query parameter's schema says, in one shape (pydantic's or the contract's)."""
    options = [o for o in schema.get("anyOf", [schema]) if o.get("type") != "null"]
    assert len(options) == 1, schema
    merged = {**schema, **options[0]}
    enum = merged.get("enum") or ([merged["const"]] if "const" in merged else None)
    keys = ("type", "minimum", "maximum", "default")
    return {**{k: merged.get(k) for k in keys}, "enum": enum}


def test_every_operation_takes_the_query_parameters_the_contract_lists() -> None:
    spec = contract()["paths"]
    for route in api.routes:
        assert isinstance(route, api.web.RouteDef)
        item = spec[route.path]
        params = [_resolved(p) for p in item.get("parameters", [])]
        params += [_resolved(p) for p in item[route.method.lower()].get("parameters", [])]
        documented = {p["name"]: p["schema"] for p in params if p["in"] == "query"}
        model = query_model(route.handler)
        where = f"{route.method} {route.path}"
        assert set(model.model_fields) == set(documented), where
        taken = model.model_json_schema()["properties"]
        for name, schema in documented.items():
            assert _query_schema(taken[name]) == _query_schema(schema), f"{where} ?{name}"


BODIES: dict[tuple[str, str], type[BaseModel]] = {
    ("post", "/api/v1/knowledge_bases"): json_shapes.CreateKB,
    ("post", "/api/v1/knowledge_bases/{name}/attach"): json_shapes.AttachKB,
    ("patch", "/api/v1/knowledge_bases/{name}"): json_shapes.UpdateKB,
    ("post", "/api/v1/knowledge_bases/{name}/documents"): json_shapes.AddDocument,
    ("put", "/api/v1/knowledge_bases/{name}/documents/{doc_id}"): json_shapes.EditDocument,
    ("post", "/api/v1/knowledge_bases/{name}/search"): json_shapes.SearchRequest,
    ("post", "/api/v1/search"): json_shapes.SearchAllRequest,
    ("post", "/api/v1/knowledge_bases/{name}/grep"): json_shapes.GrepRequest,
    ("post", "/api/v1/knowledge_bases/{name}/inspect"): json_shapes.InspectNote,
    ("post", "/api/v1/mcp_invocations"): json_shapes.Invocation,
    ("post", "/api/v1/web"): json_shapes.OpenWeb,
}


def _contract_nullable(schema: dict[str, Any]) -> bool:
    schema = _resolved(schema)
    types_ = schema.get("type", [])
    options = schema.get("oneOf", []) + schema.get("anyOf", [])
    return (
        "null" in (types_ if isinstance(types_, list) else [types_])
        or None in schema.get("enum", [])
        or any(_contract_nullable(o) for o in options)
    )


def _code_nullable(field: FieldInfo) -> bool:
    refused = any(
        isinstance(m, BeforeValidator) and m.func is json_shapes._not_null for m in field.metadata
    )
    return type(None) in typing.get_args(field.annotation) and not refused


def _inner_model(field: FieldInfo) -> type[BaseModel] | None:
    for kind in (field.annotation, *typing.get_args(field.annotation)):
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            return kind
    return None


def _compare_body(model: type[BaseModel], schema: dict[str, Any], where: str) -> None:
    schema = _resolved(schema)
    properties = schema["properties"]
    assert set(model.model_fields) == set(properties), where
    for name, field in model.model_fields.items():
        nullable = _contract_nullable(properties[name])
        assert _code_nullable(field) == nullable, f"{where}.{name}: null accepted {not nullable}"
        inner = _inner_model(field)
        if inner is not None:
            _compare_body(inner, properties[name], f"{where}.{name}")


def test_request_bodies_take_null_exactly_where_the_contract_does() -> None:
    spec = contract()["paths"]
    with_json = {
        (method, path)
        for path, item in spec.items()
        for method, op in item.items()
        if method != "parameters"
        and "application/json" in op.get("requestBody", {}).get("content", {})
    }
    assert set(BODIES) == with_json
    for (method, path), model in BODIES.items():
        schema = spec[path][method]["requestBody"]["content"]["application/json"]["schema"]
        _compare_body(model, schema, f"{method.upper()} {path}")


def test_status_and_health(shared_daemon: Daemon) -> None:
    d = shared_daemon
    status = d.client.get("/api/v1/status")
    assert status["data_home"] == str(d.home) and status["socket"] == str(d.socket)
    assert "notes" in [k["name"] for k in status["knowledge_bases"]]  # the default KB
    assert status["watcher"]["running"]
    assert d.client.get("/api/v1/health")["status"] == "ok"


def test_kb_lifecycle(shared_daemon: Daemon) -> None:
    d = shared_daemon
    name = new_kb(d, chunk_size=128)
    assert d.client.get(d.client.kb(name))["config"]["chunk_size"] == 128
    assert name in [k["name"] for k in d.client.get("/api/v1/knowledge_bases")["knowledge_bases"]]
    updated = d.client.request("PATCH", d.client.kb(name), {"config": {"chunk_size": 256}})
    assert updated["config"]["chunk_size"] == 256
    assert error_of(lambda: new_kb_named(d, name)).code == "KB_EXISTS"
    d.client.request("DELETE", d.client.kb(name))
    assert not (d.home / "knowledge" / name).exists()
    assert error_of(lambda: d.client.get(d.client.kb(name))).code == "KB_NOT_FOUND"


def test_an_unloadable_local_model_is_refused_at_once(shared_daemon: Daemon) -> None:
    d = shared_daemon
    config = {
        "enabled_modes": ["keyword", "grep", "vector"],
        "embedding": {"provider": "local", "model": "BAAI/bge-small-en-v1.5", "dimensions": 384},
    }
    err = error_of(
        lambda: d.client.post("/api/v1/knowledge_bases", {"name": "hub", "config": config})
    )
    assert (err.status, err.code) == (503, "ENGINE_UNAVAILABLE")
    assert "bge-small" in err.message
    assert error_of(lambda: d.client.get(d.client.kb("hub"))).code == "KB_NOT_FOUND"


def new_kb_named(d: Daemon, name: str) -> None:
    d.client.post("/api/v1/knowledge_bases", {"name": name})


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", "/api/v1/knowledge_bases", {"name": "../x"}, 400, "VALIDATION_ERROR"),
        ("POST", "/api/v1/knowledge_bases", {"name": "ok", "config": {"chunk_size": 1}}, 400,
         "VALIDATION_ERROR"),
        ("POST", "/api/v1/knowledge_bases", {"nom": "x"}, 400, "VALIDATION_ERROR"),
        ("GET", "/api/v1/knowledge_bases/nope", None, 404, "KB_NOT_FOUND"),
        ("GET", "/api/v1/knowledge_bases/..%2Fetc", None, 400, "VALIDATION_ERROR"),
        ("GET", "/api/v1/knowledge_bases/notes/documents/nope", None, 404, "DOCUMENT_NOT_FOUND"),
        ("POST", "/api/v1/knowledge_bases/notes/search", {"query": ""}, 400, "VALIDATION_ERROR"),
        ("POST", "/api/v1/knowledge_bases/notes/search", {"query": "x", "top_k": 0}, 400,
         "VALIDATION_ERROR"),
        ("POST", "/api/v1/knowledge_bases/notes/search", {"query": "x", "extra": 1}, 400,
         "VALIDATION_ERROR"),
        ("POST", "/api/v1/knowledge_bases/notes/grep", {"pattern": "(unclosed"}, 400,
         "INVALID_PATTERN"),
        ("POST", "/api/v1/knowledge_bases/notes/grep", {"pattern": ""}, 400, "VALIDATION_ERROR"),
        ("GET", "/api/v1/knowledge_bases/notes/documents?limit=0", None, 400, "VALIDATION_ERROR"),
        ("GET", "/api/v1/knowledge_bases/notes/documents?limit=x", None, 400, "VALIDATION_ERROR"),
        ("GET", "/api/v1/resources/widget/notes", None, 400, "VALIDATION_ERROR"),
    ],
)  # fmt: skip
def test_error_envelopes(
    shared_daemon: Daemon, method: str, path: str, body: Any, status: int, code: str
) -> None:
    err = error_of(lambda: shared_daemon.client.request(method, path, body))
    assert (err.status, err.code) == (status, code)
    assert err.message


def test_unknown_routes_methods_and_bad_json(shared_daemon: Daemon) -> None:
    c = shared_daemon.client
    for method, path, status, code in [
        ("GET", "/api/v1/nope", 404, "NOT_FOUND"),
        ("DELETE", "/api/v1/status", 405, "METHOD_NOT_ALLOWED"),
    ]:
        got, body = super(type(c), c).send(method, path)
        assert (got, body["error"]["code"]) == (status, code)
    conn_status, body = _raw(shared_daemon, "POST", "/api/v1/knowledge_bases/notes/search", b"{no")
    assert (conn_status, body["error"]["code"]) == (400, "VALIDATION_ERROR")


def _raw(d: Daemon, method: str, path: str, payload: bytes) -> tuple[int, Any]:
    import http.client
    import socket

    conn = http.client.HTTPConnection("cofferd")
    conn.sock = socket.socket(socket.AF_UNIX)
    conn.sock.connect(str(d.socket))
    conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def test_oversize_body_is_413(shared_daemon: Daemon) -> None:
    payload = json.dumps({"query": "x" * (33 * 1024 * 1024)}).encode()
    status, body = _raw(shared_daemon, "POST", "/api/v1/knowledge_bases/notes/search", payload)
    assert (status, body["error"]["code"]) == (413, "PAYLOAD_TOO_LARGE")


def test_documents_read_edit_search_delete(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    write(d.docs(kb) / "guide.md", "---\ntitle: Guide\ntags: [a]\n---\n# Setup\n\nold words\n")
    write(d.docs(kb) / "sub" / "meeting notes.md", "# Meeting\n\nagenda")
    listing = wait_for(
        lambda: (r := d.client.get(d.client.kb(kb, "/documents")))["total"] == 2 and r
    )
    by_title = {doc["title"]: doc for doc in listing["documents"]}
    guide = by_title["Guide"]
    assert guide["path"] == str(d.docs(kb) / "guide.md")
    assert by_title["Meeting"]["folder_path"] == str(d.docs(kb) / "sub")

    filtered = d.client.get(d.client.kb(kb, "/documents"), q="MEET", limit=1)
    assert filtered["total"] == 1 and filtered["documents"][0]["title"] == "Meeting"
    page = d.client.get(d.client.kb(kb, "/documents"), limit=1, offset=1)
    assert (page["total"], len(page["documents"]), page["offset"]) == (2, 1, 1)

    one = d.client.get(d.client.kb(kb, f"/documents/{guide['id']}"))
    assert one["content"] == "# Setup\n\nold words\n" and one["frontmatter"]["tags"] == ["a"]

    # read-your-writes: the PUT returns once the index has the new text
    edited = d.client.request(
        "PUT", d.client.kb(kb, f"/documents/{guide['id']}"), {"content": "# Setup\n\nfresh words\n"}
    )
    assert edited["content"] == "# Setup\n\nfresh words\n"
    assert [p["document_id"] for p in search(d, kb, "fresh")] == [guide["id"]]
    assert search(d, kb, "old") == []
    on_disk = (d.docs(kb) / "guide.md").read_text()
    assert on_disk.startswith("---\ntitle: Guide\ntags: [a]\n---\n")  # frontmatter kept verbatim

    big = "x" * 2048
    small = new_kb(d, max_document_bytes=1024)
    write(d.docs(small) / "a.md", "# A")
    doc_id = wait_for(lambda: d.client.get(d.client.kb(small, "/documents"))["documents"])[0]["id"]
    err = error_of(
        lambda: d.client.request(
            "PUT", d.client.kb(small, f"/documents/{doc_id}"), {"content": big}
        )
    )
    assert err.code == "PAYLOAD_TOO_LARGE" and (d.docs(small) / "a.md").read_text() == "# A"

    d.client.request("DELETE", d.client.kb(kb, f"/documents/{guide['id']}"))
    assert not (d.docs(kb) / "guide.md").exists()
    assert d.client.get(d.client.kb(kb, "/documents"))["total"] == 1
    err = error_of(lambda: d.client.get(d.client.kb(kb, f"/documents/{guide['id']}")))
    assert err.code == "DOCUMENT_NOT_FOUND"


def test_search_passages_and_highlights(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    write(d.docs(kb) / "tokyo.md", "# 東京\n\n東京都は日本の首都です。")
    (passage,) = wait_for(lambda: search(d, kb, "首都"))
    start, end = passage["highlights"][0]
    assert passage["snippet"][start:end] == "首都"
    assert passage["title"] == "東京" and passage["heading"] == ["東京"]


def test_grep(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    write(d.docs(kb) / "a.md", "\n".join(f"line {i} needle" for i in range(50)))
    write(d.docs(kb) / ".hidden.md", "needle")
    write(d.docs(kb) / "notes.rtf", "needle")  # a format no KB indexes
    doc_id = wait_for(lambda: d.client.get(d.client.kb(kb, "/documents"))["documents"])[0]["id"]
    body = d.client.post(
        d.client.kb(kb, "/grep"), {"pattern": r"line \d+ needle", "max_matches": 7}
    )
    assert len(body["hits"]) == 7 and body["truncated"] is True
    assert body["hits"][0] == {
        "document_id": doc_id, "path": str(d.docs(kb) / "a.md"), "relative_path": "a.md",
        "line_number": 1, "line": "line 0 needle",
    }  # fmt: skip
    body = d.client.post(d.client.kb(kb, "/grep"), {"pattern": "NEEDLE", "ignore_case": True})
    assert len(body["hits"]) == 50 and not body["truncated"]
    assert {h["relative_path"] for h in body["hits"]} == {"a.md"}
    assert {h["path"] for h in body["hits"]} == {str(d.docs(kb) / "a.md")}


def test_resources_enable_disable(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    path = f"/api/v1/resources/knowledge_base/{kb}"
    assert d.client.get(path)["enabled"] is True
    assert kb in [r["name"] for r in d.client.get("/api/v1/resources")["resources"]]
    d.client.post(path + "/disable")
    err = error_of(lambda: search(d, kb, "x"))
    assert err.code == "KB_DISABLED" and err.status == 409
    write(d.docs(kb) / "while-off.md", "# Off\n\nwritten while disabled")
    enabled = d.client.post(path + "/enable")
    assert enabled["reindex"]["documents_added"] == 1  # enabling reconciles
    assert search(d, kb, "disabled")
    d.client.request("DELETE", path)
    assert error_of(lambda: d.client.get(path)).code == "KB_NOT_FOUND"


def test_audit_log_names_the_actor(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    events = d.client.get("/api/v1/audit", kb=kb)["events"]
    assert events[0]["event"] == "resource_created" and events[0]["actor"] == "tests"


REQUESTS = [
    ("POST", "/api/v1/knowledge_bases"),
    ("POST", "/api/v1/knowledge_bases/notes/search"),
    ("POST", "/api/v1/knowledge_bases/notes/grep"),
    ("PATCH", "/api/v1/knowledge_bases/notes"),
    ("PUT", "/api/v1/knowledge_bases/notes/documents/x"),
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    target=st.sampled_from(REQUESTS),
    body=st.dictionaries(
        st.sampled_from(
            ["name", "config", "query", "top_k", "pattern", "max_matches", "content", "x"]
        ),
        json_values,
        max_size=3,
    ),
)
def test_no_request_produces_a_500(
    shared_daemon: Daemon, target: tuple[str, str], body: dict[str, Any]
) -> None:
    if (
        target[0] == "POST"
        and target[1].endswith("knowledge_bases")
        and isinstance(body.get("name"), str)
    ):
        body["name"] = "fz" + uuid.uuid4().hex[:6]  # keep fuzzing from creating odd names twice
    status, _ = shared_daemon.client.send(*target, body)  # validated against the contract
    assert status < 500


def test_an_edit_keeps_permissions_and_links(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    private = write(d.docs(kb) / "private.md", "# Private\n\nmine")
    private.chmod(0o600)
    write(d.docs(kb) / "2024" / "day.md", "# Day\n\nfirst")
    (d.docs(kb) / "today.md").symlink_to(d.docs(kb) / "2024" / "day.md")
    # the link is not a second document: its target is the one, found where it is
    docs = wait_for(lambda: (r := d.client.get(d.client.kb(kb, "/documents")))["total"] == 2 and r)
    ids = {doc["relative_path"]: doc["id"] for doc in docs["documents"]}
    assert set(ids) == {"private.md", "2024/day.md"}
    d.client.request("PUT", d.client.kb(kb, f"/documents/{ids['private.md']}"), {"content": "new"})
    assert private.stat().st_mode & 0o777 == 0o600
    d.client.request(
        "PUT", d.client.kb(kb, f"/documents/{ids['2024/day.md']}"), {"content": "second"}
    )
    assert (d.docs(kb) / "today.md").is_symlink()
    assert (d.docs(kb) / "2024" / "day.md").read_text() == "second"


def test_an_edit_based_on_an_old_read_is_refused(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    path = write(d.docs(kb) / "shared.md", "# Shared\n\nfirst")
    doc = wait_for(lambda: d.client.get(d.client.kb(kb, "/documents"))["documents"])[0]
    read = d.client.get(d.client.kb(kb, f"/documents/{doc['id']}"))
    path.write_text("# Shared\n\nthe user saved this meanwhile")
    err = error_of(
        lambda: d.client.request(
            "PUT",
            d.client.kb(kb, f"/documents/{doc['id']}"),
            {"content": "agent text", "expected_sha256": read["content_sha256"]},
        )
    )
    assert (err.status, err.code) == (409, "DOCUMENT_CHANGED")
    assert path.read_text() == "# Shared\n\nthe user saved this meanwhile"


@pytest.mark.parametrize("loose", ["A%2FPLAN.MD", "a%2Fplan", "plan", "The%20Plan", "PLAN.md"])
def test_writes_take_only_an_exact_reference(shared_daemon: Daemon, loose: str) -> None:
    """A name read loosely (another case, no suffix, its end, its title) finds a document
    to show; an edit, a delete, a reconversion by such a name would change a file that was
    not named, so they are refused, naming the document meant."""
    d = shared_daemon
    kb = new_kb(d)
    path = write(d.docs(kb) / "a" / "plan.md", "# The Plan\n\nkept as written")
    doc = wait_for(lambda: d.client.get(d.client.kb(kb, "/documents"))["documents"])[0]
    assert d.client.get(d.client.kb(kb, f"/documents/{loose}"))["id"] == doc["id"]
    for method, suffix, body in (
        ("PUT", "", {"content": "overwritten"}),
        ("DELETE", "", None),
        ("POST", "/reconvert", None),
    ):
        err = error_of(
            lambda method=method, suffix=suffix, body=body: d.client.request(
                method, d.client.kb(kb, f"/documents/{loose}{suffix}"), body
            )
        )
        assert (err.status, err.code) == (404, "DOCUMENT_NOT_FOUND"), (method, err.message)
        assert "a/plan.md" in err.message, err.message
    assert path.read_text() == "# The Plan\n\nkept as written"
    assert d.client.get(d.client.kb(kb, "/documents"))["documents"][0]["id"] == doc["id"]
    # the exact path and the id still write
    d.client.request("PUT", d.client.kb(kb, "/documents/a%2Fplan.md"), {"content": "by path"})
    assert "by path" in path.read_text()


async def test_an_index_being_rebuilt_answers_503_with_retry_after(tmp_path: Path) -> None:
    """The convention for "try again": 503 and Retry-After, not 507 (the disk refused)."""
    from cofferd.infrastructure.storage.database import Database

    db = Database(tmp_path / "coffer.db")
    await db.open()
    await db.close()  # as while the damaged index is moved aside and made again
    with pytest.raises(errors.IndexRebuilding) as raised:
        await db.read(lambda conn: conn.execute("SELECT 1").fetchone())
    response = from_exception(raised.value)
    assert response.status == 503 and response.headers["Retry-After"] == "5"
    assert json.loads(response.body)["error"]["code"] == "INDEX_REBUILDING"  # type: ignore[arg-type]
