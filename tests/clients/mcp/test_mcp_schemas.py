"""The tool schemas themselves, as a real MCP client lists them: strict, described,
bounded, annotated, with output schemas; and the server names Coffer's version."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import Client

import coffer_kernel
from tests.support.daemon import Daemon
from tests.support.mcp_client import params

READ_ONLY = {
    "search", "search_all", "grep", "list_knowledge_bases", "list_documents",
    "get_document", "get_links", "get_broken_links", "list_tags", "list_conflicts",
    "list_skipped", "status", "metrics", "list_trash",
}  # fmt: skip
DESTRUCTIVE = {"edit_document", "delete_document"}
WRITES = {
    "add_document", "edit_document", "delete_document", "restore_document", "reindex",
    "reconvert_document", "update_source", "check_sources",
}  # fmt: skip
WITHOUT_KB = {"list_knowledge_bases", "status", "search_all"}


async def list_tools(daemon: Daemon) -> dict[str, Any]:
    async with Client(params(daemon.socket)) as client:
        tools = (await client.list_tools()).tools
        assert client.server_info is not None
        return {
            "version": client.server_info.version,
            "tools": {t.name: t.model_dump(by_alias=True, exclude_none=True) for t in tools},
        }


@pytest.fixture(scope="module")
def listing(shared_daemon: Daemon) -> dict[str, Any]:
    return asyncio.run(list_tools(shared_daemon))


def test_the_server_names_coffers_version(listing: dict[str, Any]) -> None:
    assert listing["version"] == coffer_kernel.__version__


def test_every_tool_is_listed(listing: dict[str, Any]) -> None:
    assert set(listing["tools"]) == READ_ONLY | WRITES


def test_input_schemas_are_strict_and_described(listing: dict[str, Any]) -> None:
    for name, tool in listing["tools"].items():
        schema = tool["inputSchema"]
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["additionalProperties"] is False, name
        assert len(tool["description"]) > 40, name
        for arg, spec in schema["properties"].items():
            assert spec.get("description"), f"{name}.{arg} has no description"
            if spec.get("type") == "integer":
                assert "minimum" in spec and "default" in spec, f"{name}.{arg}"
            if spec.get("type") == "boolean":
                assert "default" in spec, f"{name}.{arg}"
        if name not in WITHOUT_KB:
            assert "kb" in schema["required"], f"{name} must name its knowledge base"
        assert "default" not in schema["properties"].get("kb", {}), name


def test_annotations_say_what_each_tool_may_do(listing: dict[str, Any]) -> None:
    for name, tool in listing["tools"].items():
        hints = tool["annotations"]
        for key in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"):
            assert isinstance(hints[key], bool), f"{name}.{key}"
        assert hints["readOnlyHint"] is (name in READ_ONLY), name
        assert hints["destructiveHint"] is (name in DESTRUCTIVE), name
        assert hints["title"], name
    assert listing["tools"]["add_document"]["annotations"]["idempotentHint"] is False
    assert listing["tools"]["add_document"]["annotations"]["openWorldHint"] is True


def test_output_schemas_are_typed(listing: dict[str, Any]) -> None:
    for name, tool in listing["tools"].items():
        schema = tool["outputSchema"]
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["properties"], name
        assert set(schema["required"]) <= set(schema["properties"]), name


def test_edit_tells_the_agent_where_the_version_comes_from(listing: dict[str, Any]) -> None:
    edit = listing["tools"]["edit_document"]
    assert {"content", "expected_sha256"} <= set(edit["inputSchema"]["required"])
    assert edit["inputSchema"]["properties"]["content"]["minLength"] == 1
    assert "get_document" in edit["description"] and "content_sha256" in edit["description"]
    assert "restore_document" in listing["tools"]["delete_document"]["description"]
