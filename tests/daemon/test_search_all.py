"""Every knowledge base at once: each in its own mode, merged by rank, each passage named."""

from __future__ import annotations

import io
import json
import uuid

import pytest

from cofferctl import cli
from cofferctl.client import ApiError
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import write


def test_one_query_searches_every_knowledge_base(shared_daemon: Daemon) -> None:
    d = shared_daemon
    names = [f"all-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    for name, text in zip(names, ["albatross colonies nest", "albatross wings glide"], strict=True):
        d.client.post("/api/v1/knowledge_bases", {"name": name})
        write(d.docs(name) / "birds.md", f"# Birds\n\n{text}")  # the same path in both
    for name in names:
        wait_for(
            lambda name=name: d.client.post(d.client.kb(name, "/search"), {"query": "albatross"})[
                "passages"
            ]
        )

    reply = d.client.post("/api/v1/search", {"query": "albatross"})
    assert reply["mode"] == "keyword"
    assert {p["knowledge_base"] for p in reply["passages"]} >= set(names)
    assert set(names) <= set(reply["knowledge_bases"])
    only = d.client.post("/api/v1/search", {"query": "albatross", "knowledge_bases": names[:1]})
    assert [p["knowledge_base"] for p in only["passages"]] == names[:1]
    with pytest.raises(ApiError) as err:
        d.client.post("/api/v1/search", {"query": "x", "knowledge_bases": ["nosuch"]})
    assert err.value.code == "KB_NOT_FOUND"

    out = io.StringIO()
    args = ["--socket", str(d.socket), "search", "--all", "albatross", "glide", "--json"]
    assert cli.main(args, stdout=out) == 0
    assert json.loads(out.getvalue())["passages"][0]["knowledge_base"] == names[1]
    out = io.StringIO()
    args = ["--socket", str(d.socket), "search", "--kb", names[0], "albatross"]
    assert cli.main(args, stdout=out) == 0
    printed = out.getvalue()
    assert f"{names[0]}/docs/birds.md:1" in printed and names[1] not in printed
    assert "score: reciprocal rank fusion" in printed
