"""The web page's graph (issue 46) of a real daemon: the nodes and edges of a KB with its
links resolved as `links` resolves them, orphans and attachments, a note's neighbourhood
1 to 3 links away, the cap on nodes saying so, and nobody without the cookie."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.helpers import write
from tests.support.web_session import open_web, origin, session, signed_in

NOTES = {
    "hub.md": "---\ntags: [plant]\n---\n# Hub\n\n[[a]] and [[b]], ![[pic.png]], [[missing]]\n",
    "a.md": "# A\n\nsee [[b]] and [[b]] again #tree\n",
    "b.md": "# B\n\non to [[deep/c]] and back to [[b]]\n",
    "deep/c.md": "# C\n\ndown to [[deep/d]]\n",
    "deep/d.md": "# D\n\nthe bottom\n",
    "lonely.md": "# Lonely\n\nno links at all\n",
}
EDGES = {
    ("hub.md", "a.md"),
    ("hub.md", "b.md"),
    ("hub.md", "pic.png"),
    ("a.md", "b.md"),
    ("b.md", "deep/c.md"),
    ("deep/c.md", "deep/d.md"),
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = new_daemon(tmp_path_factory.mktemp("graph"))
    try:
        d.start()
        d.client.post("/api/v1/knowledge_bases", {"name": "garden", "config": {}})
        docs = d.docs("garden")
        for path, text in NOTES.items():
            write(docs / path, text)
        (docs / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n")
        wait_for(lambda: d.client.get(d.client.kb("garden", "/documents"))["total"] == 6)
        yield d
    finally:
        cleanup(d)


async def _graph(d: Daemon, query: str = "") -> tuple[int, Any]:
    url = open_web(d)["url"]
    async with await signed_in(url) as client:
        route = f"{origin(url)}/api/v1/knowledge_bases/garden/graph{query}"
        async with client.get(route) as response:
            return response.status, await response.json()


def _edges(answer: dict[str, Any]) -> set[tuple[str, str]]:
    paths = [n["path"] for n in answer["nodes"]]
    return {(paths[s], paths[t]) for s, t in answer["edges"]}


async def test_the_whole_graph_resolves_links_once_each(site: Daemon) -> None:
    status, answer = await _graph(site)
    assert status == 200, answer
    by_path = {n["path"]: n for n in answer["nodes"]}
    assert set(by_path) == {*NOTES, "pic.png"}  # the broken link adds no node
    assert _edges(answer) == EDGES  # a link twice is one edge; a link to itself none
    assert {p: n["degree"] for p, n in by_path.items()} == {
        "hub.md": 3, "a.md": 2, "b.md": 3, "pic.png": 1, "deep/c.md": 2, "deep/d.md": 1,
        "lonely.md": 0,
    }  # fmt: skip
    assert [p for p, n in by_path.items() if n["is_orphan"]] == ["lonely.md"]
    assert [p for p, n in by_path.items() if n["is_attachment"]] == ["pic.png"]
    assert by_path["pic.png"]["id"] is None and by_path["hub.md"]["id"]
    assert by_path["hub.md"]["tags"] == ["plant"] and by_path["a.md"]["tags"] == ["tree"]
    assert by_path["deep/c.md"]["folder"] == "deep" and by_path["a.md"]["folder"] == ""
    assert by_path["b.md"]["title"] == "B"
    assert (answer["truncated"], answer["shown"], answer["total"]) == (False, 7, 7)
    assert [n["path"] for n in answer["nodes"][:2]] == ["b.md", "hub.md"]  # most linked first


async def test_a_neighbourhood_is_one_to_three_links_away(site: Daemon) -> None:
    seen = {}
    for depth in (1, 2, 3):
        status, answer = await _graph(site, f"?note=deep/d.md&depth={depth}")
        assert status == 200, answer
        assert answer["nodes"][0]["path"] == "deep/d.md" and answer["note"] == "deep/d.md"
        seen[depth] = {n["path"] for n in answer["nodes"]}
        assert not answer["truncated"] and answer["shown"] == answer["total"]
        assert _edges(answer) <= EDGES
    assert seen[1] == {"deep/d.md", "deep/c.md"}
    assert seen[2] == seen[1] | {"b.md"}
    assert seen[3] == seen[2] | {"hub.md", "a.md"}
    status, answer = await _graph(site, "?note=lonely.md&depth=3")
    assert [n["path"] for n in answer["nodes"]] == ["lonely.md"] and answer["edges"] == []


async def test_the_cap_shows_the_most_linked_and_says_so(site: Daemon) -> None:
    status, answer = await _graph(site, "?limit=3")
    assert status == 200, answer
    assert [n["path"] for n in answer["nodes"]] == ["b.md", "hub.md", "a.md"]
    assert (answer["truncated"], answer["shown"], answer["total"]) == (True, 3, 7)
    assert _edges(answer) == {("hub.md", "a.md"), ("hub.md", "b.md"), ("a.md", "b.md")}
    status, answer = await _graph(site, "?note=deep/d.md&depth=3&limit=2")
    assert [n["path"] for n in answer["nodes"]] == ["deep/d.md", "deep/c.md"]
    assert (answer["truncated"], answer["shown"], answer["total"]) == (True, 2, 5)


async def test_refusals_in_the_envelope(site: Daemon) -> None:
    cases = {
        "?depth=4": (400, "VALIDATION_ERROR"),
        "?limit=10001": (400, "VALIDATION_ERROR"),
        "?note=nowhere.md": (404, "DOCUMENT_NOT_FOUND"),
        "?note=" + urllib.parse.quote("../secret.md"): (403, "PATH_REFUSED"),
        "?other=1": (400, "VALIDATION_ERROR"),
    }
    for query, (status, code) in cases.items():
        got, answer = await _graph(site, query)
        assert (got, answer["error"]["code"]) == (status, code), (query, answer)
    base = origin(open_web(site)["url"])
    async with session() as stranger:
        async with stranger.get(f"{base}/api/v1/knowledge_bases/garden/graph") as response:
            assert response.status == 403
            assert (await response.json())["error"]["code"] == "FORBIDDEN"
        async with stranger.get(f"{base}/graph?kb=garden") as response:
            assert response.status == 403


async def test_the_page_and_its_libraries_are_served_here(site: Daemon) -> None:
    url = open_web(site, kb="garden")["url"]
    base = origin(url)
    async with await signed_in(url) as client:
        async with client.get(f"{base}/graph?kb=garden") as response:
            page = await response.text()
            assert response.status == 200 and 'data-kb="garden"' in page
        for name in ("graph.js", "graph-layout.js", "vendor/sigma.min.js",
                     "vendor/graphology.umd.min.js", "vendor/forceatlas2-iterate.js"):  # fmt: skip
            assert f"/static/{name}" in page or name.endswith(("layout.js", "iterate.js"))
            async with client.get(f"{base}/static/{name}") as response:
                assert response.status == 200, name
                assert "javascript" in response.content_type
        async with client.get(f"{base}/static/vendor/README.md") as response:
            assert response.status == 404
