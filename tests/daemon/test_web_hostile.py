"""The web page (issue 46) against hostile files, in a real browser (Debian's Chromium driven
by Playwright) over a real daemon: an SVG with script opened on its own or embedded in a
note, CSS a note smuggles in, and file names made of markup listed in search results,
backlinks and the graph. Nothing runs (`window.pwned` stays undefined), nothing is fetched
from another origin, and the note's text stays visible."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.helpers import write
from tests.support.web_session import open_web, origin

KB = "hostile"
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000000000200015e0a2e4a0000000049454e44ae426082"
)
EVIL_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40"'
    " onload=\"window.pwned='svg-onload'\"><script>window.pwned = 'svg';"
    " try { top.pwned = 'svg-top'; } catch (e) {}"
    " document.documentElement.setAttribute('data-ran', '1'); fetch('/pwned-svg');</script>"
    '<rect width="40" height="40" fill="red"/></svg>'
)
EMBEDS = f"""# Embeds

![[evil.svg]]

![evil](evil.svg)

<object data="/file/{KB}/evil.svg"></object><embed src="/file/{KB}/evil.svg">
<iframe src="/file/{KB}/evil.svg"></iframe>

embedded marmalade
"""
STYLED = """# Styled

<style>body { display: none } .markdown { visibility: hidden }
* { color: transparent !important }</style>
<link rel="stylesheet" href="https://evil.example/x.css">
<link rel="stylesheet" href="/file/hostile/evil.css">

<p style="display:none" class="x" id="hidden">hidden paragraph of marmalade</p>

<span style="font-size:0; color: white">tiny words of marmalade</span>

<div style="position:fixed;top:0;left:0;width:100%;height:100%;background:white;z-index:9">
cover</div>

```css
@import url("https://evil.example/import.css");
body { display: none }
```

still visible marmalade
"""
# names that would run if any part of the page wrote them as markup or as a link
NAMES = [
    "\"><img src=x onerror=window.pwned='name-img'>",
    "<svg onload=window.pwned='name-svg'>",
    "<script>window.pwned='name-script'<script>",
    "javascript:window.pwned='name-js'",
]
IMAGE = "\"><img src=x onerror=window.pwned='image-name'>.png"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = new_daemon(tmp_path_factory.mktemp("hostile"))
    try:
        d.start()
        d.client.post("/api/v1/knowledge_bases", {"name": KB, "config": {}})
        docs = d.docs(KB)
        (docs / "evil.svg").write_text(EVIL_SVG)
        (docs / "evil.css").write_text("body { display: none }")
        (docs / IMAGE).write_bytes(PNG)
        write(docs / "embeds.md", EMBEDS)
        write(docs / "styled.md", STYLED)
        linked = " ".join(f"[[{name}]]" for name in NAMES)
        write(docs / "hub.md", f"# Hub\n\nmarmalade hub: {linked}\n\n![[{IMAGE}]]\n")
        for name in NAMES:
            write(docs / f"{name}.md", f"# {name}\n\nmarmalade from {name}, back to [[hub]]\n")
        total = 3 + len(NAMES)
        wait_for(lambda: d.client.get(d.client.kb(KB, "/documents"))["total"] == total)
        wait_for(lambda: IMAGE in d.client.get(d.client.kb(KB, "/paths"))["files"])
        yield d
    finally:
        cleanup(d)


class Watched:
    """A signed-in page, the requests it made and the errors its scripts raised."""

    def __init__(self, d: Daemon, browser: Any) -> None:
        self.context = browser.new_context(viewport={"width": 1100, "height": 800})
        self.page = self.context.new_page()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        url = open_web(d, kb=KB)["url"]
        self.base = origin(url)
        self.page.goto(url)

    def goto(self, path: str) -> Any:
        return self.page.goto(self.base + path)

    def pwned(self) -> Any:
        return self.page.evaluate("window.pwned")

    def strangers(self) -> list[str]:
        """Requests that left the page's origin or asked for what a hostile file wanted."""
        return [r for r in self.requests if not r.startswith(self.base + "/") or "pwned-svg" in r]


def test_an_svg_with_script_opened_on_its_own_runs_nothing(site: Daemon, browser: Any) -> None:
    w = Watched(site, browser)
    response = w.goto(f"/file/{KB}/evil.svg")
    assert response.status == 200 and response.headers["content-type"] == "image/svg+xml"
    assert w.page.evaluate("document.documentElement.localName") == "svg"  # it was shown
    assert w.page.evaluate("document.documentElement.getAttribute('data-ran')") is None
    assert w.pwned() is None
    assert w.page.evaluate("window.origin") == "null"  # sandboxed: no origin, no cookie
    assert w.strangers() == []
    w.context.close()


def test_an_svg_embedded_in_a_note_runs_nothing(site: Daemon, browser: Any) -> None:
    w = Watched(site, browser)
    w.goto(f"/note/{KB}/embeds.md")
    assert "embedded marmalade" in w.page.locator(".markdown").inner_text()
    images = w.page.locator(".markdown img")
    assert images.count() >= 1
    for src in images.evaluate_all("(all) => all.map((i) => i.getAttribute('src'))"):
        assert src == f"/file/{KB}/evil.svg", src
    w.page.wait_for_function(
        "[...document.querySelectorAll('.markdown img')].every((i) => i.complete)"
    )
    assert w.page.locator("object, embed, iframe, main script").count() == 0
    assert len(w.page.frames) == 1
    assert w.pwned() is None
    assert w.strangers() == []
    assert w.errors == []
    w.context.close()


VISIBLE = """(text) => {
  const found = [...document.querySelectorAll(".markdown *")].find(
    (e) => e.children.length === 0 && e.textContent.includes(text));
  if (!found) return "missing";
  const box = found.getBoundingClientRect();
  const style = getComputedStyle(found);
  const hidden = [];
  if (box.width === 0 || box.height === 0) hidden.push("no box");
  if (style.display === "none" || style.visibility !== "visible") hidden.push("hidden");
  if (parseFloat(style.fontSize) < 8) hidden.push("font-size " + style.fontSize);
  if (style.color === "rgba(0, 0, 0, 0)" || style.color === getComputedStyle(document.body)
      .backgroundColor) hidden.push("colour " + style.color);
  const top = document.elementFromPoint(box.x + 2, box.y + box.height / 2);
  const seen = top && (found.contains(top) || top.contains(found));
  if (!seen) hidden.push("covered by " + (top && top.outerHTML));
  return hidden.join("; ") || "visible";
}"""


BODY_STYLE = "(({display, color, backgroundColor}) => ({display, color, backgroundColor}))" + (
    "(getComputedStyle(document.body))"
)


def test_css_a_note_smuggles_in_changes_nothing(site: Daemon, browser: Any) -> None:
    w = Watched(site, browser)
    w.goto(f"/note/{KB}/hub.md")
    body_before = w.page.evaluate(BODY_STYLE)
    w.goto(f"/note/{KB}/styled.md")
    w.page.wait_for_load_state("load")
    body_after = w.page.evaluate(BODY_STYLE)
    assert body_after == body_before and body_after["display"] != "none", body_after
    for text in ("still visible marmalade", "hidden paragraph of marmalade",
                 "tiny words of marmalade", "@import url"):  # fmt: skip
        assert w.page.evaluate(VISIBLE, text) == "visible", text
    sheets = w.page.evaluate("[...document.styleSheets].map((s) => s.href)")
    assert sheets and all(s.startswith(w.base + "/static/") for s in sheets), sheets
    assert w.page.locator("main style, main link, main [style]").count() == 0
    assert w.strangers() == []
    assert w.pwned() is None
    w.context.close()


def test_file_names_made_of_markup_are_listed_as_text_everywhere(
    site: Daemon, browser: Any
) -> None:
    w = Watched(site, browser)
    page = w.page
    page.locator("#q").fill("marmalade")  # search results
    page.wait_for_selector("body[data-state=painted]")
    page.wait_for_function(f"document.querySelectorAll('#results li').length >= {len(NAMES)}")
    listed = page.locator("#results").inner_text()
    for name in NAMES:
        assert f"{name}.md" in listed, (name, listed)
    assert page.locator("#results img, #results svg, #results script").count() == 0
    hrefs = page.locator("#results a").evaluate_all("(all) => all.map((a) => a.href)")
    assert hrefs and all(h.startswith(w.base + "/note/") for h in hrefs), hrefs
    assert w.pwned() is None

    w.goto(f"/note/{KB}/hub.md")  # links, backlinks and an embedded image
    aside = page.locator("aside.beside").inner_text()
    for name in NAMES:
        assert aside.count(f"{name}.md") == 2, (name, aside)  # a link and a backlink
    hrefs = page.locator("main a").evaluate_all("(all) => all.map((a) => a.href)")
    assert not [h for h in hrefs if h.lower().startswith(("javascript:", "data:"))], hrefs
    images = page.locator("main img").evaluate_all("(all) => all.map((i) => i.src)")
    assert len(images) == 1 and images[0].startswith(w.base + f"/file/{KB}/"), images
    assert page.locator("main svg, main script").count() == 0
    page.locator("aside.beside a", has_text=NAMES[0]).first.click()  # a hostile note itself
    page.wait_for_selector(".markdown")
    assert f"marmalade from {NAMES[0]}" in page.locator(".markdown").inner_text()
    assert w.pwned() is None

    w.goto(f"/graph?kb={KB}")  # the graph: labels drawn by sigma, the legend as text
    page.wait_for_selector("body[data-state=drawn]")
    paths = page.evaluate("window.cofferGraph.state.answer.nodes.map((n) => n.path)")
    assert {f"{name}.md" for name in NAMES} | {IMAGE} <= set(paths), paths
    assert page.locator("#graph img, #graph svg, #legend img, #said img").count() == 0
    assert w.pwned() is None
    assert w.strangers() == []
    assert w.errors == []
    w.context.close()
