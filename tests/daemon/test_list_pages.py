"""Every list that grows with the vault pages as the documents do (issue 45 §4): limit and
offset asked, total, limit and offset answered, through the API, the CLI and MCP; and
cofferctl.api, asked for no page, reads such a list whole (what the language server needs)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from mcp import Client as McpClient

from cofferctl import api, cli
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import write
from tests.support.mcp_client import call as mcp_call
from tests.support.mcp_client import params as mcp_params

NOTES = 520  # more than one page of the largest a client may ask (500)
BINARY = 60  # skipped files
TRASHED = 55


def _walk(d: Daemon, route: str, key: str, limit: int, **query: Any) -> list[Any]:
    """Every item of a paged list, `limit` at a time, checking each page's numbers."""
    seen: list[Any] = []
    total = None
    while total is None or len(seen) < total:
        page = d.client.get(route, limit=limit, offset=len(seen), **query)
        assert (page["limit"], page["offset"]) == (limit, len(seen)), route
        total = page["total"]
        assert page[key] and len(page[key]) <= limit, route
        seen += page[key]
    return seen


def _cli(d: Daemon, *words: str) -> str:
    out = io.StringIO()
    assert cli.main(["--socket", str(d.socket), *words], stdout=out) == 0
    return out.getvalue()


async def test_each_list_of_a_large_vault_pages(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    vault = tmp_path / "vault"
    write(vault / "hub.md", "# Hub\n")
    for n in range(NOTES):
        write(vault / f"n/{n:04d}.md", f"# N{n}\n\n[[hub]] and [[gone {n}]] #t{n:04d}\n")
    for n in range(TRASHED):
        write(vault / f"junk/{n:02d}.md", f"# Junk {n}\n")
    for n in range(BINARY):
        (vault / f"bin/{n:02d}.md").parent.mkdir(exist_ok=True)
        (vault / f"bin/{n:02d}.md").write_bytes(bytes(range(256)) * 4)
    write(vault / "img/a.png", "not really")
    kb = "pages-" + tmp_path.name[-6:].lower().replace("_", "-")
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "path": str(vault)})
    route = lambda rest: d.client.kb(kb, rest)  # noqa: E731
    wait_for(lambda: d.client.get(route("/tags"))["total"] == NOTES, 120)
    wait_for(lambda: d.client.get(route("/skipped"))["total"] == BINARY, 60)
    for n in range(TRASHED):
        d.client.request("DELETE", d.client.document(kb, f"junk/{n:02d}.md"))

    # the API: each list a page at a time, a default page first
    first = d.client.get(route("/tags"))
    assert (len(first["tags"]), first["limit"], first["offset"]) == (50, 50, 0)
    tags = _walk(d, route("/tags"), "tags", 200)
    assert [t["tag"] for t in tags] == [f"t{n:04d}" for n in range(NOTES)]
    back = _walk(d, route("/backlinks"), "backlinks", 200, file="hub.md")
    assert sorted(b["relative_path"] for b in back) == [f"n/{n:04d}.md" for n in range(NOTES)]
    assert d.client.get(route("/backlinks"), file="hub.md")["total"] == NOTES
    hub = _walk(d, d.client.document(kb, "hub.md", "/links"), "backlinks", 300)
    assert [b["relative_path"] for b in hub] == [b["relative_path"] for b in back]
    broken = _walk(d, route("/links/broken"), "links", 200)
    assert len({(b["relative_path"], b["target"]) for b in broken}) == NOTES
    trash = _walk(d, route("/trash"), "items", 20)
    assert [t["relative_path"] for t in trash] == [f"junk/{n:02d}.md" for n in reversed(range(55))]
    skipped = _walk(d, route("/skipped"), "items", 25)
    assert [s["relative_path"] for s in skipped] == [f"bin/{n:02d}.md" for n in range(BINARY)]
    paths = d.client.get(route("/paths"), limit=100, offset=NOTES - 98)
    assert paths["total"] == NOTES + 2 and paths["paths"][-1] == "n/0519.md"
    assert paths["files"] == ["img/a.png"]  # a page spans the documents' end, the files' start

    # cofferctl.api with no page: the whole list, read page after page (the editor's)
    assert len(api.backlinks(d.client, kb, "hub.md")["backlinks"]) == NOTES
    assert len(api.tags(d.client, kb)["tags"]) == NOTES
    assert len(api.broken_links(d.client, kb)["links"]) == NOTES
    assert api.paths(d.client, kb)["files"] == ["img/a.png"]

    # the CLI: a page, and the command line of the next while more remain
    out = _cli(d, "tags", kb, "--limit", "3", "--offset", "10")
    assert "#t0010" in out and "#t0013" not in out
    assert f"11-13 of {NOTES} tags; the next: cofferctl tags {kb} --limit 3 --offset 13" in out
    out = _cli(d, "links", kb, "hub.md", "--offset", "500")
    assert f"501-{NOTES} of {NOTES} backlinks" in out and "the next" not in out
    out = _cli(d, "links", kb, "--broken")
    assert (
        f"1-50 of {NOTES} broken links; the next: cofferctl links {kb} --broken --offset 50" in out
    )
    out = _cli(d, "trash", kb, "--limit", "5")
    assert f"1-5 of {TRASHED} in the trash; the next:" in out and "junk/54.md" in out
    out = _cli(d, "skipped", kb, "--limit", "10", "--offset", "50")
    assert out.count("binary content") == 10
    assert f"51-60 of {BINARY} listed" in out
    assert "the next" not in out

    # MCP: limit and offset, and how many remain
    async with McpClient(mcp_params(d.socket)) as agent:
        listed = await mcp_call(agent, "list_tags", kb=kb, limit=5, offset=NOTES - 7)
        assert (listed["total"], len(listed["tags"]), listed["remaining"]) == (NOTES, 5, 2)
        listed = await mcp_call(agent, "get_broken_links", kb=kb, limit=500)
        assert (len(listed["links"]), listed["remaining"]) == (500, NOTES - 500)
        listed = await mcp_call(agent, "get_links", kb=kb, document_id="hub.md", offset=510)
        assert (len(listed["backlinks"]), listed["remaining"]) == (10, 0)
        listed = await mcp_call(agent, "list_trash", kb=kb, limit=50)
        assert (listed["total"], listed["remaining"]) == (TRASHED, 5)
        listed = await mcp_call(agent, "list_skipped", kb=kb, offset=40)
        assert (len(listed["items"]), listed["remaining"]) == (20, 0)
