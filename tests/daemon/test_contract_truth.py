"""docs/openapi.yaml tells what the code does: what deleting a knowledge base does to a
folder of yours, and every default it documents (the code's own, and all of them)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from cofferd.domain.config import EmbeddingConfig, KnowledgeBaseConfig
from cofferd.surfaces.http.json_shapes import (
    AddDocument,
    CreateKB,
    EditDocument,
    GrepRequest,
    Invocation,
    SearchAllRequest,
    SearchRequest,
)
from cofferd.surfaces.http.query_params import (
    AddQuery,
    AuditQuery,
    BacklinksQuery,
    DocumentQuery,
    DocumentsQuery,
    InvocationsQuery,
    PageQuery,
    PathsQuery,
    ResourcesQuery,
)
from tests.support.daemon import Daemon, contract, wait_for
from tests.support.helpers import write

KB = "/api/v1/knowledge_bases/{name}"
BODIES: dict[tuple[str, str], type[BaseModel]] = {  # the model that reads each JSON body
    ("/api/v1/knowledge_bases", "post"): CreateKB,
    ("/api/v1/search", "post"): SearchAllRequest,
    (f"{KB}/search", "post"): SearchRequest,
    (f"{KB}/grep", "post"): GrepRequest,
    (f"{KB}/documents", "post"): AddDocument,
    (f"{KB}/documents/{{doc_id}}", "put"): EditDocument,
    ("/api/v1/mcp_invocations", "post"): Invocation,
}
QUERIES: dict[tuple[str, str], type[BaseModel]] = {  # the model that reads each query
    (f"{KB}/documents", "get"): DocumentsQuery,
    (f"{KB}/conflicts", "get"): PageQuery,
    (f"{KB}/tags", "get"): PageQuery,
    (f"{KB}/trash", "get"): PageQuery,
    (f"{KB}/skipped", "get"): PageQuery,
    (f"{KB}/links/broken", "get"): PageQuery,
    (f"{KB}/documents/{{doc_id}}/links", "get"): PageQuery,
    (f"{KB}/backlinks", "get"): BacklinksQuery,
    (f"{KB}/paths", "get"): PathsQuery,
    (f"{KB}/documents", "post"): AddQuery,
    (f"{KB}/documents/{{doc_id}}", "get"): DocumentQuery,
    ("/api/v1/audit", "get"): AuditQuery,
    ("/api/v1/mcp_invocations", "get"): InvocationsQuery,
    ("/api/v1/resources", "get"): ResourcesQuery,
}
SCHEMAS: dict[str, type[BaseModel]] = {"Config": KnowledgeBaseConfig, "Embedding": EmbeddingConfig}


def code_defaults(model: type[BaseModel]) -> dict[str, Any]:
    """Each field's default, but those that mean "nothing given" (None, {})."""
    found = {}
    for name, field in model.model_fields.items():
        value = field.get_default(call_default_factory=True)
        if value is not PydanticUndefined and value is not None and value != {}:
            found[name] = value
    return found


def documented(properties: dict[str, Any]) -> dict[str, Any]:
    return {name: spec["default"] for name, spec in properties.items() if "default" in spec}


def body_properties(path: str, method: str) -> dict[str, Any]:
    schema = contract()["paths"][path][method]["requestBody"]["content"]["application/json"]
    properties: dict[str, Any] = schema["schema"]["properties"]
    return properties


def query_properties(path: str, method: str) -> dict[str, Any]:
    parameters = contract()["paths"][path][method].get("parameters", [])
    return {p["name"]: p["schema"] for p in parameters if p.get("in") == "query"}


@pytest.mark.parametrize(("where", "model"), list(BODIES.items()), ids=str)
def test_each_body_default_in_the_contract_is_the_codes(
    where: tuple[str, str], model: type[BaseModel]
) -> None:
    assert documented(body_properties(*where)) == code_defaults(model)


@pytest.mark.parametrize(("where", "model"), list(QUERIES.items()), ids=str)
def test_each_query_default_in_the_contract_is_the_codes(
    where: tuple[str, str], model: type[BaseModel]
) -> None:
    assert documented(query_properties(*where)) == code_defaults(model)


@pytest.mark.parametrize(("schema", "model"), list(SCHEMAS.items()))
def test_each_setting_default_in_the_contract_is_the_codes(
    schema: str, model: type[BaseModel]
) -> None:
    properties = contract()["components"]["schemas"][schema]["properties"]
    assert set(model.model_fields) <= set(properties)  # every setting is in the contract
    assert documented(properties) == code_defaults(model)


PAGED = {  # every list that grows with the vault's files (issue 45 §4)
    f"{KB}/documents", f"{KB}/conflicts", f"{KB}/documents/{{doc_id}}/links",
    f"{KB}/links/broken", f"{KB}/backlinks", f"{KB}/tags", f"{KB}/paths", f"{KB}/trash",
    f"{KB}/skipped",
}  # fmt: skip
WINDOWS = {  # the newest (or closest) few, by `limit`: a window, not a list to walk
    "/api/v1/audit", "/api/v1/mcp_invocations", f"{KB}/names",
}  # fmt: skip
PER_KB = {  # one entry per knowledge base (made one at a time by their user, not by files):
    # a handful, read whole by the editor's poll (document_changes) and by every client
    "/api/v1/status": "knowledge_bases", "/api/v1/document_changes": "knowledge_bases",
    "/api/v1/knowledge_bases": "knowledge_bases", "/api/v1/resources": "resources",
}  # fmt: skip
BOUNDED_BY_CONSTRUCTION = {  # lists answered whole: their size does not grow with the files
    *PER_KB, f"{KB}/metrics",  # metrics: its search modes, an enum
}  # fmt: skip
NOT_YET_PAGED: set[str] = set()


def _resolved(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        found: Any = contract()
        for part in schema["$ref"].removeprefix("#/").split("/"):
            found = found[part]
        schema = found
    return schema


def _list_endpoints() -> set[str]:
    """The GET endpoints whose answer holds a list."""
    found = set()
    for path, item in contract()["paths"].items():
        answer = item.get("get", {}).get("responses", {}).get("200", {})
        schema = _resolved(answer.get("content", {}).get("application/json", {}).get("schema", {}))
        properties = schema.get("properties", {}).values()
        if any(_resolved(p).get("type") == "array" for p in properties):
            found.add(path)
    return found


def test_every_list_endpoint_pages_as_the_documents_do() -> None:
    """A list that grows with the vault pages (limit, offset; total, limit and offset in the
    answer), as documents and conflicts do: 10,000 conflict copies were one 3 MB answer."""
    classed = PAGED | WINDOWS | BOUNDED_BY_CONSTRUCTION | NOT_YET_PAGED
    assert _list_endpoints() == classed  # a new list is classed here
    assert not NOT_YET_PAGED
    for path in PAGED:
        assert {"limit", "offset"} <= set(query_properties(path, "get")), path
        assert query_properties(path, "get")["limit"]["default"] >= 1, path  # stated
        assert {"total", "limit", "offset"} <= set(_answer(path)["required"]), path
    for path in WINDOWS:
        assert "limit" in query_properties(path, "get"), path
    for path, key in PER_KB.items():  # bounded by the KBs: each entry one KB, by its name
        each = _resolved(_resolved(_answer(path)["properties"][key])["items"])
        assert "name" in each["required"], path
    modes = _resolved(_answer(f"{KB}/metrics")["properties"]["modes"])
    assert _resolved(modes["items"])["enum"], "metrics' modes are an enum"


def _answer(path: str) -> dict[str, Any]:
    answer = contract()["paths"][path]["get"]["responses"]["200"]
    return _resolved(answer["content"]["application/json"]["schema"])


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_deleting_an_attached_knowledge_base_leaves_its_folder_whole(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    d = shared_daemon
    vault = tmp_path / "vault"
    for name in ("plan.md", "projects/coffer.md", ".obsidian/app.json", "photo.png"):
        write(vault / name, f"# {name}\n\nkept\n")
    before = _tree(vault)
    d.client.post("/api/v1/knowledge_bases", {"name": "kept", "path": str(vault)})
    wait_for(lambda: d.client.get(d.client.kb("kept", "/documents"))["total"] == 2)
    deleted = d.client.request("DELETE", d.client.kb("kept"))["deleted"]
    assert deleted["attached"] == str(vault)
    assert _tree(vault) == before
    assert not (d.home / "knowledge" / "kept").exists()
    for path, method in ((KB, "delete"), ("/api/v1/resources/{kind}/{name}", "delete")):
        description = contract()["paths"][path][method]["description"]
        assert "attached folder is never touched" in " ".join(description.split())
