"""A note on the web page (issue 46 §4) of a real daemon, over real HTTP: Markdown rendered as
vaults write it, links as the daemon resolves them (broken ones and missing headings
marked), tags, backlinks, properties; hostile notes come out inert; remote images wait to be
allowed; an 18 MB note answers soon, cut."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import pytest

from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.helpers import write
from tests.support.web_session import open_web, origin, signed_in

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000000000200015e0a2e4a0000000049454e44ae426082"
)
EVERYTHING = """---
title: Everything
tags: [garden, spring]
rating: 4
---
# Everything

## Budget plan

| fruit | kg |
|:------|---:|
| rhubarb | ~~3~~ 4 |

- [ ] sow
- [x] dig

Links: [[Plan]], [[Plan#Budget]], [[Plan#Nowhere]], [[Missing note]], [[Plan|the plan]],
[md](Plan.md#budget), [[#Budget plan]] and #project/alpha.
A footnote[^1]. ^para-1

![[pic.png]]

![[Plan]]

![remote](https://example.com/x.png)

[^1]: said below.
"""
PLAN = "# Plan\n\n## Budget\n\nmoney. [[Everything]]\n"
XSS = """---
"<script>window.pwned=1</script>": "<img src=x onerror=window.pwned=2>"
long: "%s"
---
# XSS <script>window.pwned=3</script>

<script>window.pwned=4</script>
<img src=x onerror="window.pwned=5">
<svg><script>window.pwned=6</script></svg>
<style>body{display:none}</style>
<p style="color:red" onclick="window.pwned=7">styled</p>
<!-- a comment -->
[js](javascript:window.pwned=8) [data](data:text/html;base64,PHNjcmlwdD4=)
[[javascript:window.pwned=9]] [[data:text/html,x|y]]
![x](javascript:window.pwned=10) ![y](data:image/svg+xml,%%3Csvg%%20onload=alert(1)%%3E)
<a href="javascript:window.pwned=11">raw</a>
""" % ("v" * 20000)
SVG = '<svg xmlns="http://www.w3.org/2000/svg"><script>window.pwned=12</script></svg>'


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = new_daemon(tmp_path_factory.mktemp("note"))
    try:
        d.start()
        d.client.post("/api/v1/knowledge_bases", {"name": "web", "config": {}})
        docs = d.docs("web")
        write(docs / "Everything.md", EVERYTHING)
        write(docs / "Plan.md", PLAN)
        write(docs / "xss.md", XSS)
        (docs / "pic.png").write_bytes(PNG)
        (docs / "evil.svg").write_text(SVG)
        (docs / "notes.html").write_text("<script>window.pwned=13</script>")
        write(docs / "big.md", "# Big\n\n" + ("rhubarb crumble and custard " * 3 + "\n") * 220_000)
        wait_for(lambda: d.client.get(d.client.kb("web", "/documents"))["total"] == 4)
        wait_for(lambda: "pic.png" in d.client.get(d.client.kb("web", "/paths"))["files"])
        d.client.post("/api/v1/knowledge_bases", {"name": "wiki", "config": {}})
        write(d.docs("wiki") / "_Footer.md", "[[Home]] | [[About|Snowplow-overview]]\n")
        write(d.docs("wiki") / "Home.md", "# Home\n\n[[Snowplow overview]]\n")
        write(d.docs("wiki") / "about/Snowplow-overview.md", "# Overview\n")
        wait_for(lambda: d.client.get(d.client.kb("wiki", "/documents"))["total"] == 3)
        yield d
    finally:
        cleanup(d)


class Elements(HTMLParser):
    """Every element of a page, with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}))


def elements(page: str) -> list[tuple[str, dict[str, str]]]:
    parser = Elements()
    parser.feed(page)
    return parser.found


def _markdown_part(page: str) -> str:
    return page.split('<div class="markdown">', 1)[1].split("</article>", 1)[0]


async def _page(d: Daemon, path: str) -> tuple[int, str, Any]:
    url = open_web(d)["url"]
    client = await signed_in(url)
    async with client, client.get(origin(url) + path, allow_redirects=False) as response:
        if response.content_type.startswith("text/"):
            return response.status, await response.text(), response.headers
        return response.status, (await response.read()).hex(), response.headers


def _link(page: str, text: str) -> dict[str, str]:
    """The attributes of the link (or span) whose text is `text`."""
    found = re.search(r"<(a|span)([^>]*)>" + re.escape(text) + "</(?:a|span)>", page)
    assert found is not None, (text, page)
    return dict(re.findall(r'(\w[\w-]*)="([^"]*)"', found.group(2)))


async def test_a_note_renders_every_construct(site: Daemon) -> None:
    status, page, _ = await _page(site, "/note/web/Everything.md")
    assert status == 200, page
    body = _markdown_part(page)
    tags = [tag for tag, _ in elements(body)]
    for tag in ("table", "th", "td", "s", "input", "sup", "section", "img", "h2"):
        assert tag in tags, (tag, body)
    assert '<th class="align-right">kg</th>' in body
    boxes = [a for t, a in elements(body) if t == "input"]
    assert [b["type"] for b in boxes] == ["checkbox", "checkbox"] and "checked" in boxes[1]
    assert '<h2 id="budget-plan">Budget plan</h2>' in body
    assert '<p id="^para-1">' in body and "^para-1" not in body.replace('id="^para-1"', "")
    properties = page.split('<table class="properties">', 1)[1].split("</table>", 1)[0]
    assert "<th>rating</th><td>4</td>" in properties and "title: Everything" not in page
    assert 'href="/?kb=web&amp;q=garden&amp;tags=garden"' in properties
    assert 'src="/file/web/pic.png"' in body
    assert (
        _link(body, "#project/alpha")["href"]
        == "/?kb=web&amp;q=project%2Falpha&amp;tags=project%2Falpha"
    )


async def test_links_resolve_as_the_daemon_says(site: Daemon) -> None:
    _, page, _ = await _page(site, "/note/web/Everything.md")
    body = _markdown_part(page)
    assert _link(body, "Plan")["href"] == "/note/web/Plan.md"
    assert _link(body, "Plan#Budget")["href"] == "/note/web/Plan.md#budget"
    assert _link(body, "md")["href"] == "/note/web/Plan.md#budget"
    assert _link(body, "the plan")["href"] == "/note/web/Plan.md"
    assert _link(body, "#Budget plan")["href"] == "#budget-plan"
    missing = _link(body, "Missing note")
    assert missing["class"] == "broken" and missing["title"] == "no note named 'Missing note'"
    heading = _link(body, "Plan#Nowhere")
    assert heading["class"] == "missing-heading" and heading["href"] == "/note/web/Plan.md"
    assert heading["title"].startswith("no heading 'Nowhere' in Plan.md")
    assert re.search(r'<a href="/note/web/Plan.md" class="note embed"[^>]*>Plan</a>', body)
    aside = page.split('<aside class="beside">', 1)[1]
    backlinks = aside.split("<h2>Links", 1)[0]
    assert "Backlinks (1)" in backlinks and 'href="/note/web/Plan.md"' in backlinks
    assert 'class="broken"' in aside.split("<h2>Links", 1)[1]
    status, image, headers = await _page(site, "/file/web/pic.png")
    assert status == 200 and headers["Content-Type"] == "image/png" and image == PNG.hex()
    status, _, _ = await _page(site, "/file/web/Plan.md")  # a document is not a file here
    assert status == 404


async def test_a_github_wikis_links_lead_to_its_pages(site: Daemon) -> None:
    _, page, _ = await _page(site, "/note/wiki/_Footer.md")
    body = _markdown_part(page)
    assert _link(body, "About")["href"] == "/note/wiki/about/Snowplow-overview.md"  # text first
    _, page, _ = await _page(site, "/note/wiki/Home.md")
    link = _link(_markdown_part(page), "Snowplow overview")  # the page's title
    assert link["href"] == "/note/wiki/about/Snowplow-overview.md"


async def test_a_remote_image_waits_until_the_reader_allows_it(site: Daemon) -> None:
    _, page, headers = await _page(site, "/note/web/Everything.md")
    assert "img-src 'self';" in headers["Content-Security-Policy"]
    assert not [a for t, a in elements(page) if t == "img" and "example.com" in a["src"]]
    assert "remote image not loaded: https://example.com/x.png" in page
    assert 'href="?remote=1">load remote images for this page</a>' in page
    status, page, headers = await _page(site, "/note/web/Everything.md?remote=1")
    assert status == 200, page
    assert "img-src 'self' https: http:" in headers["Content-Security-Policy"]
    assert [a for t, a in elements(page) if t == "img" and a["src"] == "https://example.com/x.png"]


async def test_a_hostile_note_comes_out_inert(site: Daemon) -> None:
    status, page, _ = await _page(site, "/note/web/xss.md")
    assert status == 200, page
    found = elements(page)
    assert [a for t, a in found if t == "script"] == [{"src": "/static/note.js", "defer": ""}]
    for tag, attrs in found:
        assert tag not in ("style", "svg", "iframe", "object", "embed"), tag
        for name, value in attrs.items():
            assert not name.startswith("on") and name != "style", (tag, name)
            if name in ("href", "src"):
                assert not value.strip().lower().startswith(("javascript:", "data:")), value
    assert "<!--" not in page and "<script>" not in page.replace(
        '<script src="/static/note.js" defer></script>', ""
    )
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in page  # an odd key, shown as text
    assert len(page) < 20000 + 10_000  # the long value is cut


async def test_a_file_opened_on_its_own_is_sandboxed_and_never_sniffed(site: Daemon) -> None:
    """An SVG (or any file of the KB but a PDF, which the browser's viewer shows) opened
    by its address is a document of no origin that runs and loads nothing."""
    for path, kind in (("evil.svg", "image/svg+xml"), ("pic.png", "image/png"),
                       ("notes.html", "application/octet-stream")):  # fmt: skip
        status, _, headers = await _page(site, f"/file/web/{path}")
        assert status == 200 and headers["Content-Type"].split(";")[0] == kind, path
        policy = [p.strip() for p in headers["Content-Security-Policy"].split(";")]
        assert "sandbox" in policy and "default-src 'none'" in policy, policy
        assert not [p for p in policy if p.startswith("script-src")], policy
        assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Content-Disposition"] == "attachment; filename*=UTF-8''notes.html"


async def test_an_18_mb_note_answers_soon_cut(site: Daemon) -> None:
    started = time.monotonic()
    status, page, _ = await _page(site, "/note/web/big.md")
    took = time.monotonic() - started
    assert status == 200 and took < 15, took
    assert "note truncated for display" in page
    assert len(page) < 3_000_000
